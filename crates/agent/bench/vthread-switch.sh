#!/usr/bin/env bash
# What following virtual threads costs a program that switches them as
# often as it can: VirtualYield (THREADS virtual threads, each calling
# Thread.yield() YIELDS times: an unmount and a mount per yield) plain and
# under the agent (its mount/unmount callbacks on, the loop itself not
# traced), REPS times interleaved; prints the median wall ns per yield of
# each and the agent's extra ns per yield (per unmount+mount pair).
#
#   crates/agent/bench/vthread-switch.sh [AGENT_SO] [JAVA21] [THREADS] [YIELDS] [REPS]
#
# Defaults: target/release/libvmview_agent.so, $VMVIEW_TEST_JAVA21 or the
# first JDK 21+ under /usr/lib/jvm, 100 threads, 20000 yields, 5 reps.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
agent="${1:-$here/../../../target/release/libvmview_agent.so}"
java="${2:-${VMVIEW_TEST_JAVA21:-}}"
if [[ -z "$java" ]]; then
  for j in /usr/lib/jvm/*/bin/java; do
    v=$("$j" -version 2>&1 | awk -F'"' '/version/ { split($2, p, "."); print p[1]; exit }')
    [[ "$v" =~ ^[0-9]+$ ]] && ((v >= 21)) && { java=$j; break; }
  done
fi
[[ -n "$java" ]] || { echo "no JDK 21+ java: pass it as the second argument" >&2; exit 1; }
threads="${3:-100}"
yields="${4:-20000}"
reps="${5:-5}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
javac -d "$out" "$here/VirtualYield.java"
plain=() traced=()
for ((r = 0; r < reps; r++)); do
  plain+=("$("$java" -cp "$out" VirtualYield "$threads" "$yields" 3)")
  traced+=("$("$java" "-agentpath:$agent=classes=VirtualYield,file=$out/t.vmv,quiet" \
    -cp "$out" VirtualYield "$threads" "$yields" 3)")
done
median() { printf '%s\n' "$@" | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
p=$(median "${plain[@]}"); t=$(median "${traced[@]}")
printf "%-8s %12s\n" config "ns/yield"
printf "%-8s %12.1f\n" plain "$p" agent "$t"
printf "extra ns per unmount+mount: %.1f (x%.2f)\n" "$(echo "$t - $p" | bc -l)" "$(echo "$t / $p" | bc -l)"
