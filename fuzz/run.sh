#!/usr/bin/env bash
# Runs one fuzz target for a while: `fuzz/run.sh TARGET SECONDS [LIBFUZZER
# ARGS…]`, e.g. `fuzz/run.sh trace_reader 3600 -jobs=2`. The machine has
# stable Rust only; cargo-fuzz's sanitizer flags need nightly, which
# RUSTC_BOOTSTRAP=1 unlocks on stable. Crashes land in
# fuzz/artifacts/TARGET; reproduce one with
# `RUSTC_BOOTSTRAP=1 cargo fuzz run TARGET fuzz/artifacts/TARGET/crash-…`.
set -euo pipefail
cd "$(dirname "$0")"
target=${1:?usage: fuzz/run.sh TARGET SECONDS [libFuzzer args]}
seconds=${2:-60}
shift 2 || shift $#
command -v cargo-fuzz >/dev/null 2>&1 || { echo "run: install cargo-fuzz first: cargo install --locked cargo-fuzz" >&2; exit 1; }
mkdir -p "corpus/$target"
# -s none: no AddressSanitizer. The fuzzed crates have no unsafe code, and
# ASan cost 5-10x in executions per second (filter_expr: about 350/s with
# it, 3,000/s without, on this 2-core machine under load); panics, hangs
# and the RSS limit are still caught. FUZZ_SANITIZER=address brings it back.
# -rss_limit_mb: a bounded reader never needs more; a leak or an unbounded
# allocation from a forged length shows up as a crash.
# Per target: a dictionary of the input language's tokens (TARGET.dict),
# and for filter_expr a -max_len of 256 bytes (a filter typed by hand is
# shorter; longer inputs only hold longer regular expressions, whose
# compilation is most of each execution). Later arguments override these.
extra=()
[ -f "$target.dict" ] && extra+=(-dict="$PWD/$target.dict")
case $target in
filter_expr) extra+=(-max_len=256) ;;
esac
RUSTC_BOOTSTRAP=1 cargo fuzz run -s "${FUZZ_SANITIZER:-none}" "$target" "corpus/$target" -- \
  -max_total_time="$seconds" -rss_limit_mb=2048 -print_final_stats=1 "${extra[@]}" "$@"
