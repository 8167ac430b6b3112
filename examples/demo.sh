#!/usr/bin/env bash
# Builds vmview, compiles the bundled shop example, records it and shows the
# trace. Run from anywhere: `examples/demo.sh`.
set -euo pipefail
cd "$(dirname "$0")/.."
cargo build --release
mkdir -p target/examples/shop
javac -g -d target/examples/shop examples/shop/src/shop/*.java
target/release/vmview record --classes 'shop.*' -o target/examples/shop.vmv \
  -- java -cp target/examples/shop shop.Main
target/release/vmview show target/examples/shop.vmv
target/release/vmview stats target/examples/shop.vmv
