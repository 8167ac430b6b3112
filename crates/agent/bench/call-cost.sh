#!/usr/bin/env bash
# Cost of one traced call, per capture mode: runs CallCost (a loop calling
# one small method) plain and under the agent, REPS times interleaved, and
# prints the median extra CPU time of the calling thread per call and the
# median extra wall time per call. The writer thread's own CPU time is not
# in the first column (it runs beside the program on another core).
#
#   crates/agent/bench/call-cost.sh [AGENT_SO] [CALLS] [WORK] [REPS]
#
# Defaults: target/release/libvmview_agent.so, 1000000 calls, WORK=100
# arithmetic rounds per call (~150 ns untraced), 5 repetitions. jvmti mode
# runs 1/50 of the calls (it is that slow). ONLY=REGEX in the environment
# runs only the configurations whose names match (and plain), e.g.
# ONLY='args=off|metrics' for the cost of metrics=. BUFFER= sets the agent's
# buffer= (default: the agent's own default, 64m); AGENT_B=PATH (AGENT_C=)
# runs every agent configuration with another agent too, interleaved; with a vmview binary on
# the PATH (or VMVIEW=PATH) the median of events dropped per run is shown.
# Configurations: args off; args on with two primitives in and one out
# (step(long, int) long); "string": one String in (take(String, int)).
# The v2 rows write trace format version 2 (format=2). Every agent run has
# budget=off: the default budget would demote the measured method to a
# call counter and the rows would measure the counter.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
agent="${1:-$here/../../../target/release/libvmview_agent.so}"
calls="${2:-1000000}"
work="${3:-100}"
reps="${4:-5}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
javac -d "$out" "$here/CallCost.java"

# name|agent options|environment|program shape (empty: step(long,int) long)
configs=("plain|" "bci args=off|mode=bci,args=off"
         "bci args=on|mode=bci,args=on"
         "plain string|||string" "bci string|mode=bci,args=on||string"
         "v2 args=off|mode=bci,args=off,format=2" "v2 args=on|mode=bci,args=on,format=2"
         "v2 string|mode=bci,args=on,format=2||string"
         "bci metrics=cpu|mode=bci,args=off,metrics=cpu" "bci metrics=alloc|mode=bci,args=off,metrics=alloc"
         "bci metrics=cpu+alloc|mode=bci,args=off,metrics=cpu+alloc"
         "jvmti args=off|mode=jvmti,args=off" "jvmti args=on|mode=jvmti,args=on")
# With a JDK 25 (JAVA25=DIR, default /usr/lib/jvm/temurin-25-jdk-amd64):
# the same loop under JFR's method-timing (counts and times per method,
# no event per call) and method-trace (one event per call), against a
# plain JDK 25 run.
java25="${JAVA25:-/usr/lib/jvm/temurin-25-jdk-amd64}/bin/java"
if [[ -x "$java25" ]]; then
  configs+=("plain jdk25|" "jfr method-timing|-XX:StartFlightRecording:method-timing=CallCost::step,filename=$out/t.jfr"
            "jfr method-trace|-XX:StartFlightRecording:method-trace=CallCost::step,filename=$out/t.jfr")
fi
if [[ -n "${ONLY:-}" ]]; then
  kept=()
  for c in "${configs[@]}"; do
    name="${c%%|*}"
    [[ "$name" == plain* || "$name" =~ $ONLY ]] && kept+=("$c")
  done
  configs=("${kept[@]}")
fi
# AGENT_B=PATH (and AGENT_C=PATH): each agent configuration runs again
# with that agent ("NAME @B", "NAME @C"), interleaved with the first:
# before/after a change.
if [[ -n "${AGENT_B:-}${AGENT_C:-}" ]]; then
  all=()
  for c in "${configs[@]}"; do
    all+=("$c")
    IFS='|' read -r name opts envs shape <<< "$c"
    if [[ -n "$opts" && "$name" != jfr* ]]; then
      [[ -n "${AGENT_B:-}" ]] && all+=("$name @B|$opts|$envs|$shape")
      [[ -n "${AGENT_C:-}" ]] && all+=("$name @C|$opts|$envs|$shape")
    fi
  done
  configs=("${all[@]}")
fi
vmview="${VMVIEW:-$(command -v vmview || true)}"
bufopt=""; [[ -n "${BUFFER:-}" ]] && bufopt=",buffer=$BUFFER"
declare -A cpu wall drops; runs=0
for ((r = 0; r < reps; r++)); do
  for c in "${configs[@]}"; do
    IFS='|' read -r name opts envs shape <<< "$c"; n="$calls"; runs=$((runs + 1))
    [[ "$name" == jvmti* ]] && n=$((calls / 50))
    agentarg=(); javabin=java
    if [[ "$name" == jfr* || "$name" == *jdk25 ]]; then
      javabin="$java25"; [[ -n "$opts" ]] && agentarg=("$opts" -Xlog:jfr+startup=error)
    elif [[ -n "$opts" ]]; then
      so="$agent"; [[ "$name" == *" @B" ]] && so="$AGENT_B"; [[ "$name" == *" @C" ]] && so="$AGENT_C"
      agentarg=("-agentpath:$so=$opts,classes=CallCost,budget=off,file=$out/t$r-$runs.vmv$bufopt,quiet"); fi
    trace="$out/t$r-$runs.vmv"
    read -r c1 w1 < <(env $envs "$javabin" "${agentarg[@]}" -cp "$out" CallCost "$n" "$work" $shape)
    # The JVM writes the end of its trace after printing: wait for it.
    wait $! 2>/dev/null || true
    cpu[$name]+="$c1 "; wall[$name]+="$w1 "
    if [[ -n "$opts" && -n "$vmview" && "$name" != jfr* ]]; then
      d=$("$vmview" stats "$trace" --format json 2>/dev/null | sed -n 's/^  "dropped": \([0-9]*\),$/\1/p' || true)
      drops[$name]+="${d:-?} "; rm -f "$trace"
    fi
  done
done
median() { tr ' ' '\n' | awk NF | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
printf "%-16s %14s %14s %16s %16s %10s\n" config "cpu ns/call" "wall ns/call" "extra cpu/call" "extra wall/call" "dropped"
for c in "${configs[@]}"; do
  name="${c%%|*}"
  # Extra time over the plain run of the same shape.
  base=plain; [[ "$c" == *"|string" ]] && base="plain string"
  [[ "$name" == jfr* || "$name" == *jdk25 ]] && base="plain jdk25"
  base_cpu=$(echo "${cpu[$base]}" | median); base_wall=$(echo "${wall[$base]}" | median)
  mc=$(echo "${cpu[$name]}" | median); mw=$(echo "${wall[$name]}" | median)
  md=$(echo "${drops[$name]:-}" | median); [[ -z "$md" ]] && md=-
  printf "%-16s %14.1f %14.1f %16.1f %16.1f %10s\n" "$name" "$mc" "$mw" \
    "$(echo "$mc - $base_cpu" | bc -l)" "$(echo "$mw - $base_wall" | bc -l)" "$md"
done
