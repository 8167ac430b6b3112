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
# ONLY='args=off|metrics' for the cost of metrics=.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
agent="${1:-$here/../../../target/release/libvmview_agent.so}"
calls="${2:-1000000}"
work="${3:-100}"
reps="${4:-5}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
javac -d "$out" "$here/CallCost.java"

# name|agent options|environment
configs=("plain|" "bci args=off|mode=bci,args=off"
         "bci args=on|mode=bci,args=on"
         "bci metrics=cpu|mode=bci,args=off,metrics=cpu" "bci metrics=alloc|mode=bci,args=off,metrics=alloc"
         "bci metrics=cpu+alloc|mode=bci,args=off,metrics=cpu+alloc"
         "jvmti args=off|mode=jvmti,args=off" "jvmti args=on|mode=jvmti,args=on")
if [[ -n "${ONLY:-}" ]]; then
  kept=()
  for c in "${configs[@]}"; do
    name="${c%%|*}"
    [[ "$name" == plain || "$name" =~ $ONLY ]] && kept+=("$c")
  done
  configs=("${kept[@]}")
fi
declare -A cpu wall
for ((r = 0; r < reps; r++)); do
  for c in "${configs[@]}"; do
    IFS='|' read -r name opts envs <<< "$c"; n="$calls"
    [[ "$name" == jvmti* ]] && n=$((calls / 50))
    agentarg=()
    [[ -n "$opts" ]] && agentarg=("-agentpath:$agent=$opts,classes=CallCost,file=$out/t.vmv,buffer=1g,quiet")
    read -r c1 w1 < <(env $envs java "${agentarg[@]}" -cp "$out" CallCost "$n" "$work")
    cpu[$name]+="$c1 "; wall[$name]+="$w1 "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base_cpu=$(echo "${cpu[plain]}" | median); base_wall=$(echo "${wall[plain]}" | median)
printf "%-16s %14s %14s %16s %16s\n" config "cpu ns/call" "wall ns/call" "extra cpu/call" "extra wall/call"
for c in "${configs[@]}"; do
  name="${c%%|*}"
  mc=$(echo "${cpu[$name]}" | median); mw=$(echo "${wall[$name]}" | median)
  printf "%-16s %14.1f %14.1f %16.1f %16.1f\n" "$name" "$mc" "$mw" \
    "$(echo "$mc - $base_cpu" | bc -l)" "$(echo "$mw - $base_wall" | bc -l)"
done
