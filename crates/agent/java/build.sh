#!/usr/bin/env bash
# Compiles vmview/BufferedProbe.java (the buffered probe of mode=bci,args=off) into
# the class file the agent embeds. Run after editing Probe.java and commit
# both; the agent's unit tests check the class against the probe table.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
javac --release 8 -g:none -d "$out" "$here/vmview/BufferedProbe.java" 2>&1 | grep -v "warning: \[options\]" || true
cp "$out/vmview/BufferedProbe.class" "$here/../src/capture/probe-buffered.class"
echo "wrote crates/agent/src/capture/probe-buffered.class ($(stat -c %s "$here/../src/capture/probe-buffered.class") bytes)"
