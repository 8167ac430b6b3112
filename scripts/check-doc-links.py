#!/usr/bin/env python3
"""Checks the relative links of the repository's Markdown files.

Every `[text](path)` and `[text](path#anchor)` that is not a URL must name
a file or directory that exists, and an anchor must name a heading of its
target (GitHub's slugs). Prints each broken link and exits 1 if any;
`--allow-missing FILE` accepts a link to FILE that another branch adds.
Usage: scripts/check-doc-links.py [--allow-missing docs/SERVE.md ...]
"""
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def slug(heading):
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    out, fence = set(), False
    for line in open(path, encoding="utf-8"):
        if line.startswith("```"):
            fence = not fence
        elif not fence and line.startswith("#"):
            out.add(slug(line.lstrip("#")))
    return out


def markdown_files():
    for d, dirs, files in os.walk(ROOT):
        dirs[:] = [x for x in dirs if x not in ("target", ".git", "node_modules", "fuzz")]
        for f in files:
            if f.endswith(".md"):
                yield os.path.join(d, f)


def main(argv):
    allowed = {os.path.normpath(os.path.join(ROOT, a)) for a in argv if a != "--allow-missing"}
    bad = 0
    for md in markdown_files():
        text = open(md, encoding="utf-8").read()
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, anchor = target.partition("#")
            full = os.path.normpath(os.path.join(os.path.dirname(md), path)) if path else md
            rel = os.path.relpath(md, ROOT)
            if not os.path.exists(full):
                if full not in allowed:
                    print(f"{rel}: missing {target}")
                    bad += 1
                continue
            if anchor and full.endswith(".md") and anchor not in anchors(full):
                print(f"{rel}: no heading for #{anchor} in {os.path.relpath(full, ROOT)}")
                bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
