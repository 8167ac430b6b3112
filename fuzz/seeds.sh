#!/usr/bin/env bash
# Writes the fuzz targets' seed corpora into fuzz/corpus/TARGET from real
# inputs: traces recorded by the real agent from the CLI's Java fixtures
# (binary, truncated, and exported as XML), the class-file rewriter's fixture
# classes compiled with javac, and filter expressions and agent options from
# the documentation. Needs a JDK and the workspace built (`cargo build
# --workspace`; set VMVIEW to the binary if it is not in target/debug).
# Nothing here is committed: corpora are regenerated, and libFuzzer adds to
# them as it runs.
set -euo pipefail
cd "$(dirname "$0")"
root=..
vmview=${VMVIEW:-${CARGO_TARGET_DIR:-$root/target}/debug/vmview}
[ -x "$vmview" ] || { echo "seeds: $vmview not found; build the workspace first" >&2; exit 1; }
corpus=corpus
mkdir -p "$corpus"/{trace_reader,xml_reader,jfr_reader,filter_expr,agent_options,class_rewriter}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Traces: small recordings of fixtures that use different event kinds.
javac -g -d "$tmp/fx" "$root"/crates/cli/tests/fixtures/fx/*.java
n=0
for run in "Hello" "Params" "Exceptions" "Strings" "Loop 300"; do
  set -- $run
  main=$1; shift
  trace="$tmp/$main.vmv"
  "$vmview" record --classes 'fx.*' -o "$trace" -- java -cp "$tmp/fx" "fx.$main" "$@" >/dev/null 2>&1 || true
  [ -s "$trace" ] || continue
  # Keep seeds small: libFuzzer's default -max_len is 4096 bytes past the
  # largest seed, and large seeds slow every execution.
  if [ "$(stat -c %s "$trace")" -le 65536 ]; then
    cp "$trace" "$corpus/trace_reader/$main.vmv"
  fi
  head -c 2048 "$trace" >"$corpus/trace_reader/$main-head.vmv"
  "$vmview" export "$trace" --format xml -o "$tmp/$main.xml" >/dev/null 2>&1 ||
    "$vmview" export --format xml "$trace" >"$tmp/$main.xml" 2>/dev/null || true
  if [ -s "$tmp/$main.xml" ]; then
    head -c 65536 "$tmp/$main.xml" >"$corpus/xml_reader/$main.xml"
  fi
  n=$((n + 1))
done
echo "seeds: $n traces"

# JFR recordings of two fixtures (JDK 17's own JFR): whole when small,
# and their first bytes, and one cut inside its chunk.
for run in "Hello" "JfrWaits 1 2"; do
  set -- $run
  main=$1; shift
  rec="$tmp/$main.jfr"
  java -XX:StartFlightRecording=filename="$rec",settings=profile,exceptions=all \
    -cp "$tmp/fx" "fx.$main" "$@" >/dev/null 2>&1 || true
  [ -s "$rec" ] || continue
  if [ "$(stat -c %s "$rec")" -le 262144 ]; then
    cp "$rec" "$corpus/jfr_reader/$main.jfr"
  fi
  head -c 4096 "$rec" >"$corpus/jfr_reader/$main-head.jfr"
  head -c "$(($(stat -c %s "$rec") / 2))" "$rec" >"$corpus/jfr_reader/$main-half.jfr"
done

# Classes: the rewriter's fixtures (constructors, switches, lambdas, …).
javac -g -d "$tmp/classes" "$root"/crates/classfile/tests/fixtures/*.java
find "$tmp/classes" -name '*.class' -exec cp {} "$corpus/class_rewriter/" \;

# Filter expressions, as in docs/COMMANDS.md and the filter crate's docs.
i=0
while IFS= read -r line; do
  i=$((i + 1))
  printf '%s' "$line" >"$corpus/filter_expr/$i"
done <<'EXPR'
type in [CALL, RETURN] && class ~ "^shop\\." && elapsed_ns > 1ms
type == THROW && !(exception ~ "IllegalState")
id >= 10 && id < 20 || thread == "main"
method == "add" and arg.count > 3
MTD ~ "^get" && CLASS ~ "Inventory$"
time > 1.5s && time <= 2s
not type in [GC, SAMPLE] or depth > 4
value == null && return_type == "java.lang.String"
EXPR

# Nesting at and past the filter's limit (128 levels of ( and !), within
# run.sh's -max_len of 256 bytes.
deep() { printf "%${1}s" '' | tr ' ' "$2"; }
printf '%s' "$(deep 128 '!')type == CALL" >"$corpus/filter_expr/nest-at-limit"
printf '%s' "$(deep 129 '(')true" >"$corpus/filter_expr/nest-past-limit"
printf '%s' "$(deep 130 '!')true" >"$corpus/filter_expr/nots-past-limit"
printf '%s' "$(deep 60 '(')id == 1$(deep 60 ')')" >"$corpus/filter_expr/nest-60"

# XML: elements nested past the reader's limit for skipped events (16), in
# an event the type mask skips (first byte odd, then the mask: THROW only)
# and in one it decodes.
nested="<TRACE VERSION=\"1\"><CALL ID=\"1\" TIME=\"0\">$(for _ in $(seq 20); do printf '<X>'; done)$(for _ in $(seq 20); do printf '</X>'; done)</CALL></TRACE>"
{ printf '\001\040\000\000\000'; printf '%s' "$nested"; } >"$corpus/xml_reader/nested-skipped.xml"
printf '%s' "$nested" >"$corpus/xml_reader/nested-decoded.xml"

# Agent options, as `vmview record` writes them.
i=0
while IFS= read -r line; do
  i=$((i + 1))
  printf '%s' "$line" >"$corpus/agent_options/$i"
done <<'OPTS'
file=trace-%p-%t.vmv,classes=shop.*
file=t.vmv,classes=shop.**:!shop.internal.*,events=calls+exceptions,buffer=256k,flush=500ms
classes=fx.*,args=true,strings=64,bytecode=fx.Loop
events=all,sample=10ms,buffer=1g
file=/tmp/x.vmv,classes=,mode=bci
OPTS
# The option parser is not recursive (a list is split, a glob matched in a
# loop); long lists and globs check that it stays linear.
printf 'classes=%s*' "$(for _ in $(seq 200); do printf 'a*'; done)" >"$corpus/agent_options/long-glob"
printf 'classes=%s' "$(for i in $(seq 300); do printf 'p%d.*+' "$i"; done)" >"$corpus/agent_options/long-list"
for t in "$corpus"/*; do echo "seeds: $(ls "$t" | wc -l) in $t"; done
