#!/usr/bin/env bash
# CI's install test: installs vmview each way a user can, and with each
# install records and shows the bundled shop example from a directory
# outside the checkout, with VMVIEW_AGENT and XDG_CACHE_HOME unset (the
# agent comes out of the installed binary into ~/.cache/vmview):
#   1. cargo install --path crates/cli --root TMP (--debug, reusing the
#      build in target/, so it recompiles nothing CI has not built)
#   2. the .deb from scripts/package.sh, with dpkg -i (root), removed after
#   3. the .tar.gz from scripts/package.sh, unpacked into TMP
# Usage: scripts/test-install.sh [--profile dev|release]  (default: dev)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
profile=dev
[ "${1:-}" = --profile ] && profile=$2
cargo_profile_flag=--debug
[ "$profile" = release ] && cargo_profile_flag=

tmp=$(mktemp -d /tmp/vmview-install.XXXXXX)
deb_installed=0
cleanup() {
  if ((deb_installed)); then dpkg -r vmview >/dev/null 2>&1 || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
unset VMVIEW_AGENT XDG_CACHE_HOME
fail() { echo "install-test: FAILED: $*" >&2; exit 1; }

# Records the shop example (compiled from SRC) with VMVIEW, from a fresh
# directory outside the checkout, and checks the trace's calls.
check() {
  local how=$1 vmview=$2 src=$3
  local work=$tmp/work-$how
  mkdir -p "$work/classes"
  case "$(realpath "$work")" in "$repo"/*) fail "$work is inside the checkout" ;; esac
  javac -g -d "$work/classes" "$src"/shop/*.java
  (
    cd "$work"
    "$vmview" record --classes 'shop.*' -o shop.vmv -- java -cp classes shop.Main \
      >out.txt 2>err.txt || { cat err.txt; fail "$how: vmview record"; }
    grep -q 'apples in stock' out.txt || fail "$how: the example's output is missing"
    "$vmview" show shop.vmv >show.txt || fail "$how: vmview show"
    grep -q 'shop.Inventory' show.txt || { head -20 show.txt; fail "$how: no shop.Inventory calls in the trace"; }
    "$vmview" stats shop.vmv | grep -q "^agent .*build $("$vmview" --version | sed 's/.*agent build \(.*\))/\1/')" ||
      fail "$how: the trace does not name this vmview's agent build"
  )
  echo "install-test: $how: recorded and showed the shop example ($(wc -l <"$work/show.txt") lines) from $work"
}

# 1. cargo install --path
echo "install-test: cargo install --locked $cargo_profile_flag --path crates/cli --root $tmp/cargo"
CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$repo/target} cargo install --locked --quiet \
  $cargo_profile_flag --path crates/cli --root "$tmp/cargo" ||
  fail "cargo install --path crates/cli"
[ -x "$tmp/cargo/bin/vmview" ] || fail "cargo install left no bin/vmview"
[ ! -e "$tmp/cargo/bin/libvmview_agent.so" ] || fail "the agent must be inside vmview, not beside it"
check cargo-install "$tmp/cargo/bin/vmview" examples/shop/src

# 2. and 3. the packages
scripts/package.sh --profile "$profile" --out "$tmp/dist" --fast >"$tmp/package.log" 2>&1 ||
  { cat "$tmp/package.log"; fail "scripts/package.sh"; }
deb=$(ls "$tmp"/dist/vmview_*.deb)
tarball=$(ls "$tmp"/dist/vmview-*.tar.gz)

if dpkg -s vmview >/dev/null 2>&1; then
  fail "a vmview package is installed already; remove it (dpkg -r vmview) before this test"
fi
dpkg -i "$deb" >/dev/null || fail "dpkg -i $deb"
deb_installed=1
[ "$(command -v vmview)" = /usr/bin/vmview ] || fail ".deb: vmview is not /usr/bin/vmview"
[ -f /usr/share/man/man1/vmview-record.1.gz ] || fail ".deb: no man page"
zcat /usr/share/man/man1/vmview.1.gz | grep -q '^\.TH vmview 1' || fail ".deb: vmview.1 is not a man page"
check deb /usr/bin/vmview /usr/share/doc/vmview/examples/shop/src
dpkg -r vmview >/dev/null || fail "dpkg -r vmview"
deb_installed=0
[ ! -e /usr/bin/vmview ] || fail ".deb: dpkg -r left /usr/bin/vmview"
echo "install-test: deb: installed, used and removed $(basename "$deb")"

mkdir -p "$tmp/unpacked"
tar -C "$tmp/unpacked" -xzf "$tarball"
dir=$(ls -d "$tmp"/unpacked/vmview-*)
for f in vmview README.md LICENSE-MIT LICENSE-APACHE INSTALL.md man/man1/vmview.1.gz; do
  [ -e "$dir/$f" ] || fail ".tar.gz: $f is missing"
done
check tar.gz "$dir/vmview" "$dir/examples/shop/src"
echo "install-test: 3 installs passed"
