#!/usr/bin/env bash
# Compiles the Java classes the agent embeds: vmview/BufferedProbe.java (the
# buffered probe of mode=bci,args=off) and vmview/Calibration.java (the
# calibration loop of mode=bci, compiled against a stand-in of the generated
# vmview/Probe). Run after editing them and commit the class files; the
# agent's unit tests check them against the probe table.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
javac --release 8 -g:none -d "$out" "$here/vmview/BufferedProbe.java" "$here/vmview/Calibration.java" \
    "$here/stub/vmview/Probe.java" 2>&1 | grep -v "warning: \[options\]" || true
cp "$out/vmview/BufferedProbe.class" "$here/../src/capture/probe-buffered.class"
cp "$out/vmview/Calibration.class" "$here/../src/calibration.class"
for f in capture/probe-buffered.class calibration.class; do
    echo "wrote crates/agent/src/$f ($(stat -c %s "$here/../src/$f") bytes)"
done
