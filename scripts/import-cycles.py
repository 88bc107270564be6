#!/usr/bin/env python3
"""Import cycles between the files of src/ (docs/architecture.md, "What each folder of
`src/` owns"): an edge A -> B when file A's code (comments, strings and its `#[cfg(test)] mod
tests` block left out) names a `crate::`, `super::` or `self::` path that resolves to module
file B; with --strict also a parent's bare paths into its own child modules. Prints each cycle
(a strongly connected component of more than one file) and exits 1 if there is one. `.ci/run`
runs it without --strict: `python3 scripts/import-cycles.py src`.

With --folders, the same edges are grouped by folder: each top-level folder of src/ (and each
top-level file) is one node, and so is each folder of src/agent/ (docs/architecture.md); a
folder's own `mod.rs` belongs to it. Edges inside a node are dropped. Prints each mutual pair and
each cycle of folders, and exits 1 if there is one (no two-way doors between folders); with
--layers also each folder's row (one above every folder it names) and what it names: the
picture in docs/architecture.md, "The folders and their one-way arrows"."""
import os, re, sys
ROOT = sys.argv[1] if len(sys.argv) > 1 and not sys.argv[1].startswith('-') else 'src'
STRICT = '--strict' in sys.argv
FOLDERS = '--folders' in sys.argv
files = {}
for d, _, fs in os.walk(ROOT):
    for f in fs:
        if f.endswith('.rs'):
            files[os.path.join(d, f)] = None
def modpath(p):
    rel = os.path.relpath(p, ROOT)[:-3].split(os.sep)
    if rel[-1] in ('mod', 'lib', 'main'):
        rel = rel[:-1]
    return rel
mods = {tuple(modpath(p)): p for p in files if not p.endswith('main.rs')}
def strip(src):
    src = re.sub(r'//[^\n]*', '', src)
    src = re.sub(r'/\*.*?\*/', '', src, flags=re.S)
    src = re.sub(r'"(\\.|[^"\\])*"', '""', src)
    return src
def resolve(segs):
    for n in range(len(segs), 0, -1):
        if tuple(segs[:n]) in mods:
            return mods[tuple(segs[:n])]
    return None
edges = {p: set() for p in files}
for p in files:
    if p.endswith('main.rs'):
        continue
    me = modpath(p)
    src = strip(open(p).read())
    # unit tests (a `#[cfg(test)] mod tests` block, last in a file) are not the module's imports
    cut = re.search(r'#\[cfg\(test\)\]\s*(pub(\([^)]*\))?\s+)?mod\s+\w+\s*\{', src)
    if cut:
        src = src[:cut.start()]
    children = set(re.findall(r'^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', src, re.M))
    # expand `use x::{a, b::{c}}` groups into paths
    paths = []
    for m in re.finditer(r'\b((?:crate|super|self)(?:::(?:\w+|\{[^;]*?\}))+)', src):
        paths.append(m.group(1))
    if STRICT:
        for c in children:
            for m in re.finditer(r'(?<![\w:])(' + c + r'(?:::\w+)+)', src):
                paths.append('self::' + m.group(1))
    def expand(path):
        m = re.match(r'^(.*?)::\{(.*)\}$', path, re.S)
        if not m:
            return [path]
        head, body = m.group(1), m.group(2)
        out, depth, cur = [], 0, ''
        for ch in body:
            if ch == ',' and depth == 0:
                out.append(cur); cur = ''
                continue
            depth += ch == '{'; depth -= ch == '}'
            cur += ch
        out.append(cur)
        res = []
        for o in out:
            o = o.strip()
            if o:
                res += expand(head + '::' + o)
        return res
    for path in paths:
        for full in expand(path):
            segs = [s.strip() for s in full.split('::')]
            segs = [re.sub(r'\s+as\s+\w+$', '', s) for s in segs]
            base = list(me)
            if segs[0] == 'crate':
                base, segs = [], segs[1:]
            else:
                # a module file's own module is `me`; super:: goes up from it
                while segs and segs[0] in ('self', 'super'):
                    if segs[0] == 'super':
                        base = base[:-1]
                    segs = segs[1:]
            tgt = resolve(base + [s for s in segs if re.match(r'^\w+$', s)])
            if tgt and tgt != p:
                edges[p].add(tgt)
def folder(p):
    rel = os.path.relpath(p, ROOT)[:-3].split(os.sep)
    if len(rel) == 1:
        return rel[0]
    if rel[0] == 'agent' and len(rel) > 2:
        return 'agent/' + rel[1]
    return rel[0]
if FOLDERS:
    grouped = {}
    for p, ts in edges.items():
        if p.endswith('main.rs'):
            continue
        grouped.setdefault(folder(p), set())
        for t in ts:
            if folder(t) != folder(p):
                grouped[folder(p)].add(folder(t))
    edges = grouped
    pairs = sorted({tuple(sorted((a, b))) for a, ts in edges.items() for b in ts if a in edges.get(b, ())})
    for a, b in pairs:
        print(f'two-way: {a} <-> {b}')
# Tarjan
index, low, stack, on, sccs, i = {}, {}, [], set(), [], [0]
sys.setrecursionlimit(100000)
def visit(v):
    index[v] = low[v] = i[0]; i[0] += 1; stack.append(v); on.add(v)
    for w in edges[v]:
        if w not in index:
            visit(w); low[v] = min(low[v], low[w])
        elif w in on:
            low[v] = min(low[v], index[w])
    if low[v] == index[v]:
        comp = []
        while True:
            w = stack.pop(); on.discard(w); comp.append(w)
            if w == v:
                break
        if len(comp) > 1:
            sccs.append(sorted(comp))
for v in edges:
    if v not in index:
        visit(v)
for c in sccs:
    print('cycle:', ' '.join(c))
if FOLDERS and '--layers' in sys.argv and not sccs:
    # The picture in docs/architecture.md: each folder on the row above everything it names.
    level = {}
    def lvl(n):
        if n not in level:
            level[n] = 1 + max([lvl(t) for t in edges.get(n, ()) if t in edges] or [-1])
        return level[n]
    for n in edges:
        lvl(n)
    for n in sorted(edges, key=lambda n: (-level[n], n)):
        if n != 'lib':
            print(f"{level[n]:2} {n:15} -> {', '.join(sorted(t for t in edges[n] if t != 'lib'))}")
what = 'folders' if FOLDERS else 'files'
print(len(sccs), f'import cycles between {what}' + (' (strict)' if STRICT else ''), f'({sum(len(e) for e in edges.values())} edges)')
sys.exit(1 if sccs else 0)
