#!/usr/bin/env python3
"""The shell examples of README.md and docs/*.md, for tests/e2e/test_doc_examples.sh.

    doc_examples.py SRC OUT_DIR

Every fenced block whose info string is sh, bash, shell, console or zsh, or empty, is a shell
example, and the line before its fence must say what the test does with it:

    <!-- example: run -->                       the test runs the block (bash -e -o pipefail)
    <!-- example: not run: REASON -->           it does not, for REASON (a real GPU, a cluster)

Writes each block to be run as OUT_DIR/N.sh (its text, nothing added) and prints one line per
example, tab-separated: `run N FILE LINE` (LINE: the block's first line in FILE), or `skip FILE
LINE REASON`, or `error FILE LINE MESSAGE` for an example without a valid marker, a marker with
no example after it, an unterminated fence, or a command in an indented code block (which is
for output; commands go in a fenced, marked block)."""
import os
import re
import sys

SHELL = {"", "sh", "bash", "shell", "console", "zsh"}
MARKER = re.compile(r"^<!--\s*example:\s*(.*?)\s*-->$")
FENCE = re.compile(r"^\s*(`{3,}|~{3,})\s*([^`\s]*)")  # (indented too: a block in a list item)


def scan(root, rel, out, counter):
    lines = open(os.path.join(root, rel), encoding="utf-8").read().split("\n")
    i, marker = 0, None
    while i < len(lines):
        line = lines[i]
        m = MARKER.match(line.strip())
        if m:
            if marker:
                print(f"error\t{rel}\t{marker[1]}\ta marker with no example after it")
            marker = (m.group(1), i + 1)
            i += 1
            continue
        f = FENCE.match(line)
        if f:
            fence, info = f.group(1), f.group(2).lower()
            end = i + 1
            while end < len(lines) and not lines[end].strip().startswith(fence):
                end += 1
            if end == len(lines):
                print(f"error\t{rel}\t{i + 1}\tan unterminated code fence")
                return
            body, first = lines[i + 1:end], i + 2
            if info in SHELL:
                if not marker or marker[1] != i:
                    print(f"error\t{rel}\t{i + 1}\ta shell example with no <!-- example: run --> "
                          "or <!-- example: not run: REASON --> on the line before it")
                elif marker[0] == "run":
                    counter[0] += 1
                    with open(os.path.join(out, f"{counter[0]}.sh"), "w") as s:
                        s.write("\n".join(body) + "\n")
                    print(f"run\t{counter[0]}\t{rel}\t{first}")
                elif marker[0].startswith("not run:") and marker[0][8:].strip():
                    print(f"skip\t{rel}\t{first}\t{marker[0][8:].strip()}")
                else:
                    print(f"error\t{rel}\t{marker[1]}\tan unknown marker '{marker[0]}' (run, or "
                          "not run: REASON)")
            elif marker and marker[1] == i:
                print(f"error\t{rel}\t{marker[1]}\ta marker before a '{info}' block, not a shell one")
            marker = None
            i = end + 1
            continue
        if marker and marker[1] != i:
            print(f"error\t{rel}\t{marker[1]}\ta marker with no example right after it")
            marker = None
        # An indented code block (4 spaces, after a blank line): output only.
        if line.startswith("    ") and in_code(lines, i):
            cmd = line.strip()
            if cmd.startswith("$ ") or re.match(r"^(sudo )?gpubox [a-z-]", cmd):
                print(f"error\t{rel}\t{i + 1}\ta command in an indented code block: fence it as "
                      "```sh with a marker")
        i += 1
    if marker:
        print(f"error\t{rel}\t{marker[1]}\ta marker with no example after it")


def in_code(lines, i):
    """Whether line i is in an indented code block: indented lines back to a blank one."""
    j = i - 1
    while j >= 0 and lines[j].startswith("    "):
        j -= 1
    return j < 0 or not lines[j].strip()


def main():
    root, out = sys.argv[1], sys.argv[2]
    docs = ["README.md"] + sorted("docs/" + f for f in os.listdir(os.path.join(root, "docs"))
                                  if f.endswith(".md"))
    counter = [0]
    for rel in docs:
        scan(root, rel, out, counter)


main()
