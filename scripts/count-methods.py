#!/usr/bin/env python3
"""Counts the methods of a type's inherent `impl` blocks, file by file.

    python3 scripts/count-methods.py FairyRuntime src/agent [--max N]

Reads every `.rs` file under the folder, finds each `impl TYPE {` / `impl<..> TYPE<..> {` block
(inherent only: `impl Trait for TYPE` is not counted) and counts the `fn` items at the block's
own depth (nested functions and closures are not methods). Comments and string literals are
skipped. Prints `count path` per file with at least one, then the total; exit status 0, or 1
with `--max N` when the total is above N (`.ci/run` holds `FairyRuntime` to 40 this way,
docs/architecture.md). Wrong arguments: exit status 2 with this text.

    python3 scripts/count-methods.py --self-test

runs this script on a small tree of its own (a nested function, a trait impl, a `fn` in a
comment and in a string, none of them counted) and checks its output and exit statuses.
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


def self_test():
    """Runs the script as CI does, on a tree whose count is known (3), below, at and above it."""
    import subprocess
    import tempfile
    fixture = """
impl Thing {
    fn one(&self) { fn nested() {} let _c = |x: u8| x; }
    // fn commented() {}
    pub(crate) fn two() -> &'static str { "fn in_a_string() {}" }
}
impl Clone for Thing { fn clone(&self) -> Self { Thing } }
impl<T> Thing<T> where T: Copy { async fn three(&self) {} }
"""
    with tempfile.TemporaryDirectory() as root:
        os.makedirs(os.path.join(root, "a"))
        with open(os.path.join(root, "a", "thing.rs"), "w", encoding="utf-8") as fh:
            fh.write(fixture)
        def run(*args):
            done = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True)
            return done.returncode, done.stdout
        cases = [
            (("Thing", root), 0),
            (("Thing", root, "--max", "3"), 0),
            (("Thing", root, "--max", "2"), 1),
            (("--max", "9", "Thing", root), 0),
            (("Thing", root, "--max"), 2),
            (("Thing", root, "--max", "many"), 2),
            (("Thing", os.path.join(root, "missing"), "--max", "3"), 2),
        ]
        for args, want in cases:
            rc, out = run(*args)
            assert rc == want, f"{args}: exit status {rc}, not {want}"
            if rc != 2:
                assert out.splitlines()[-1].split()[0] == "3", f"{args}: {out!r}"
    print("self-test passed")


def usage():
    sys.stderr.write(__doc__)
    sys.exit(2)


def main():
    args = sys.argv[1:]
    if args == ["--self-test"]:
        self_test()
        return
    limit = None
    if "--max" in args:
        at = args.index("--max")
        try:
            limit = int(args[at + 1])
        except (IndexError, ValueError):
            usage()
        if limit < 0:
            usage()
        del args[at:at + 2]
    if len(args) != 2 or not os.path.isdir(args[1]):
        usage()
    ty, root = args
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
    total = sum(c for _, c in rows)
    print(f"{total:4} total ({ty})")
    if limit is not None and total > limit:
        print(f"{ty} has {total} methods, more than --max {limit}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
