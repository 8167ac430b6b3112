#!/usr/bin/env bash
# Stack bytes each probe native uses (see probe-stack.py): runs a small
# recursion (fx.Recurse from the CLI tests' fixtures) under gdb with the
# agent, args=on, and prints the most each native used.
#
#   crates/agent/bench/probe-stack.sh [AGENT_SO] [DEPTH]
#
# Needs gdb. The first probe call of a thread costs the most (it creates
# the thread's state and registers it with the writer). FUNCS="path::fn
# ..." measures other functions; CALLS=N the first N calls (400).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
agent="${1:-$here/../../../target/release/libvmview_agent.so}"
depth="${2:-100}"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
javac -d "$out" "$here/../../cli/tests/fixtures/fx/Recurse.java"
gdb -batch -nx -x "$here/probe-stack.py" --args \
  java -Xss2m "-agentpath:$agent=file=$out/trace.vmv,classes=fx.*,args=on" \
  -cp "$out" fx.Recurse "$depth" 2 7 2>&1 | grep -E "bytes at most|depth sum"
