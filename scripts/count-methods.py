#!/usr/bin/env python3
"""Counts the methods of a type's inherent `impl` blocks, file by file.

    python3 scripts/count-methods.py FairyRuntime src/agent

Reads every `.rs` file under the folder, finds each `impl TYPE {` / `impl<..> TYPE<..> {` block
(inherent only: `impl Trait for TYPE` is not counted) and counts the `fn` items at the block's
own depth (nested functions and closures are not methods). Comments and string literals are
skipped. Prints `count path` per file with at least one, then the total; exit status 0.
"""
import os
import re
import sys


def strip(src):
    """The source with comments, strings and char literals blanked (same length, same lines)."""
    out = []
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif src.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if src.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif src.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", src[i:j]))
            i = j
        elif c == "r" and re.match(r'r#*"', src[i:i + 260]) and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.match(r'r(#*)"', src[i:])
            end = src.find('"' + m.group(1), i + len(m.group(0)))
            end = n if end < 0 else end + 1 + len(m.group(1))
            out.append(re.sub(r"[^\n]", " ", src[i:end]))
            i = end
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == "\\" else 1
            out.append(re.sub(r"[^\n]", " ", src[i:j + 1]))
            i = j + 1
        elif c == "'":
            m = re.match(r"'(\\.[^']*|[^\\'])'", src[i:])
            if m:
                out.append(" " * len(m.group(0)))
                i += len(m.group(0))
            else:  # a lifetime
                out.append(c)
                i += 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def count(src, ty):
    code = strip(src)
    head = re.compile(r"\bimpl\s*(<[^{;]*?>)?\s*" + re.escape(ty) + r"\b(\s*<[^{;]*?>)?\s*(where[^{]*)?\{")
    total = 0
    for m in head.finditer(code):
        start = m.end()  # just past the block's `{`
        depth, i = 1, start
        while i < len(code) and depth:
            if code[i] == "{":
                depth += 1
            elif code[i] == "}":
                depth -= 1
            elif depth == 1 and re.match(r"\bfn\s", code[i:i + 3]) and not (code[i - 1].isalnum() or code[i - 1] == "_"):
                total += 1
            i += 1
    return total


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    ty, root = sys.argv[1], sys.argv[2]
    rows = []
    for d, _, files in os.walk(root):
        for f in files:
            if f.endswith(".rs"):
                p = os.path.join(d, f)
                with open(p, encoding="utf-8") as fh:
                    c = count(fh.read(), ty)
                if c:
                    rows.append((p, c))
    rows.sort()
    for p, c in rows:
        print(f"{c:4} {p}")
    print(f"{sum(c for _, c in rows):4} total ({ty})")


if __name__ == "__main__":
    main()
