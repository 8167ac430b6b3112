#!/usr/bin/env bash
# CPU time per thread name of a JVM run: runs COMMAND, reads every
# thread's CPU time from /proc every 0.2 s while it runs, and prints the
# totals per thread name (seconds, user + system), largest first. Threads
# of one name (worker-0 and worker-1 stay apart; four "GC Thread#N" do
# too) are summed across restarts of a name.
#
#   scripts/thread-cpu.sh PATTERN COMMAND...
#
# PATTERN (pgrep -f) picks the JVM among COMMAND's processes, e.g. the
# main class. Example (the budget's H2 diagnosis in docs/PERFORMANCE.md):
#   scripts/thread-cpu.sh soak.H2Soak target/release/vmview record \
#     --classes 'soak.*,org.h2.*' --events calls --args off --budget off \
#     -o /tmp/h2.vmv -- java -cp target/soak/classes:/usr/share/java/h2.jar \
#     soak.H2Soak 2000 4
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,15p' "$0" >&2; exit 2; }
pattern=$1
shift
"$@" &
top=$!
hz=$(getconf CLK_TCK)
declare -A ticks
while kill -0 "$top" 2>/dev/null; do
  for p in $(pgrep -f "$pattern" || true); do
    [ "$p" = "$$" ] && continue
    for t in /proc/"$p"/task/*; do
      name=$(cat "$t/comm" 2>/dev/null) || continue
      st=$(cat "$t/stat" 2>/dev/null) || continue
      # Fields after the command name: utime and stime are the 12th and 13th.
      read -r -a f <<<"${st##*) }"
      ticks["$name ${t##*/}"]=$((f[11] + f[12]))
    done
  done
  sleep 0.2
done
wait "$top" || true
declare -A byname
for k in "${!ticks[@]}"; do
  n=${k% *}
  byname[$n]=$((${byname[$n]:-0} + ${ticks[$k]}))
done
for n in "${!byname[@]}"; do
  printf '%s\t%s\n' "${byname[$n]}" "$n"
done | sort -rn | awk -F'\t' -v hz="$hz" '{ printf "%8.2f s  %s\n", $1 / hz, $2 }'
