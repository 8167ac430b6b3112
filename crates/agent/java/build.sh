#!/usr/bin/env bash
# Compiles the Java class the agent embeds: vmview/Calibration.java (the
# calibration loop of mode=bci, compiled against a stand-in of the generated
# vmview/Probe). Run after editing it and commit the class file; the
# agent's unit tests check it against the probe table.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
javac --release 8 -g:none -d "$out" "$here/vmview/Calibration.java" \
    "$here/stub/vmview/Probe.java" 2>&1 | grep -v "warning: \[options\]" || true
cp "$out/vmview/Calibration.class" "$here/../src/calibration.class"
for f in calibration.class; do
    echo "wrote crates/agent/src/$f ($(stat -c %s "$here/../src/$f") bytes)"
done
