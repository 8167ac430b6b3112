#!/usr/bin/env python3
"""Runs each test that failed in a `cargo test --workspace --no-fail-fast` log once more, alone.

CI's suite starts hundreds of JVMs on two cores beside one another; a test
that fails there and passes when run again by itself is reported by name as
flaky (a bug to fix, see docs/TESTING.md), not hidden. A test that fails
twice fails CI, and so does a failed build or a log this script cannot
read: it only ever turns a failure into a pass when the very tests that
failed were found, run again and passed.

Usage: ci-rerun.py LOG. Prints `rerun: passed N` and `rerun: flaky NAME`
lines and exits 0 when every failed test passed the second time, 1 otherwise.
"""

import re
import subprocess
import sys


def failures(log: str):
    """(cargo arguments of each failed target, names of the failed tests)."""
    names = []
    lines = log.splitlines()
    for i, line in enumerate(lines):
        # libtest ends a failing binary with "failures:", the names (four
        # spaces each), a blank line and "test result: FAILED".
        if line != "failures:":
            continue
        block = []
        for nxt in lines[i + 1 :]:
            m = re.fullmatch(r"    (\S+)", nxt)
            if not m:
                break
            block.append(m.group(1))
        j = i + 1 + len(block)
        if block and j + 1 < len(lines) and lines[j] == "" and lines[j + 1].startswith("test result: FAILED"):
            names.extend(block)
    targets = re.findall(r"^\s+`(-p [^`]+)`$", log, re.M)
    targets += re.findall(r"to rerun pass `(-p [^`]+)`", log)
    seen = []
    for t in targets:
        if t not in seen:
            seen.append(t)
    return seen, names


def main() -> int:
    log = open(sys.argv[1], encoding="utf-8", errors="replace").read()
    targets, names = failures(log)
    failed_count = sum(int(n) for n in re.findall(r"^test result: FAILED\. \d+ passed; (\d+) failed", log, re.M))
    if not names or not targets or failed_count != len(names):
        print(f"rerun: cannot tell which tests failed ({len(names)} names, {failed_count} failures, {len(targets)} targets)")
        return 1
    passed = 0
    for target in targets:
        cmd = ["cargo", "test", "--quiet", *target.split(), "--", "--exact", "--test-threads=1", *names]
        print("rerun:", " ".join(cmd), flush=True)
        run = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        out = run.stdout
        for p, f in re.findall(r"^test result: \w+\. (\d+) passed; (\d+) failed", out, re.M):
            passed += int(p)
            if int(f):
                sys.stdout.write(out)
                print(f"rerun: {f} failed again in {target}")
                return 1
        if run.returncode != 0:
            sys.stdout.write(out)
            print(f"rerun: cargo test {target} exited {run.returncode}")
            return 1
    if passed != len(names):
        print(f"rerun: {passed} of {len(names)} failed tests were found and passed")
        return 1
    print(f"rerun: passed {passed}")
    for n in names:
        print(f"rerun: flaky {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
