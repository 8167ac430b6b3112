#!/usr/bin/env bash
# Builds vmview's release artefacts into dist/ (or --out DIR):
#   vmview-VERSION-ARCH-linux.tar.gz  the binary (the agent is inside it),
#                                     man pages, README, licences, INSTALL,
#                                     the shop example's sources
#   vmview_VERSION-1_ARCH.deb         the same, for dpkg -i (cargo-deb)
#
# Usage: scripts/package.sh [--profile release|dev] [--out DIR] [--no-deb] [--fast]
#   --profile dev packages a debug build (what CI's install test uses, to
#   reuse the build it already has); the default is release.
#   --fast compresses quickly (larger files), for tests.
# Needs cargo-deb for the .deb: cargo install --locked cargo-deb
set -euo pipefail
cd "$(dirname "$0")/.."

profile=release
out=dist
deb=1
fast=0
while (($#)); do
  case "$1" in
    --profile) profile=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    --no-deb) deb=0; shift ;;
    --fast) fast=1; shift ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "package.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
done
case "$profile" in
  release) dir=release ;;
  dev|debug) profile=dev; dir=debug ;;
  *) echo "package.sh: --profile must be release or dev" >&2; exit 2 ;;
esac

echo "package: cargo build --locked -p vmview-cli --profile $profile"
cargo build --locked -p vmview-cli --profile "$profile"
target=${CARGO_TARGET_DIR:-target}
bin=$target/$dir/vmview
version=$("$bin" --version | awk '{print $2}')
arch=$(uname -m)

# Man pages from the same clap definitions as --help, gzipped as Debian
# wants them (-n: no time stamp, so rebuilding gives the same bytes).
man=$target/$dir/man
rm -rf "$man"
"$bin" manpage "$man" 2>/dev/null
gzip -9n "$man"/*.1

mkdir -p "$out"
name=vmview-$version-$arch-linux
stage=$target/package/$name
rm -rf "$target/package"
mkdir -p "$stage/man/man1" "$stage/examples/shop/src/shop"
cp "$bin" "$stage/"
cp "$man"/*.1.gz "$stage/man/man1/"
cp README.md docs/INSTALL.md LICENSE-MIT LICENSE-APACHE "$stage/"
cp examples/shop/src/shop/*.java "$stage/examples/shop/src/shop/"
level=9
((fast)) && level=1
tar -C "$target/package" -cf - "$name" | gzip -"$level"n >"$out/$name.tar.gz"
echo "package: $out/$name.tar.gz"

if ((deb)); then
  if ! command -v cargo-deb >/dev/null 2>&1; then
    echo "package: cargo-deb is missing: cargo install --locked cargo-deb (or pass --no-deb)" >&2
    exit 1
  fi
  # --no-strip: the release profile keeps line tables for backtraces.
  # cargo-deb warns that a dev profile is for tests only: it is (-q).
  flags=(--no-build --no-strip --profile "$profile" -o "$out/")
  ((fast)) && flags+=(--fast)
  [ "$profile" = dev ] && flags+=(-q)
  CARGO_TARGET_DIR=$target cargo deb -p vmview-cli "${flags[@]}" >/dev/null
  ls "$out"/vmview_*.deb | sed 's/^/package: /'
fi
