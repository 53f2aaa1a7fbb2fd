#!/usr/bin/env python3
"""Keeps each crate's module graph acyclic (issue 26).

For each crate (telemetry, engine, ui, app) this walks the module tree from src/lib.rs or
src/main.rs (so only files the build compiles outside tests), strips comments and every
`#[cfg(test)]` item (test modules above all), and collects the paths each file names that start
with `crate::`, `super::` or `self::` (in `use` trees too: `use crate::{a, b::c}`). Each path is
resolved to the module that really defines the item: through `use` and `pub use` (re-exports,
globs included) until it reaches a module, or an item defined there. A node is a module path
cut at two segments (`cmd::bench`, `model::vocab`, `panels::flame`; the crate root is `crate`);
a file's own node likewise. Every strongly connected component of more than one node is a
cycle, printed with one example edge per arrow (file:line).

Relative paths (`mod vocab; vocab::X` in a parent) are followed to resolve re-exports, but are
not edges themselves: a parent naming its own children is the tree, not a cycle.

Exit status: 1 if any crate has a cycle, else 0.

    python3 scripts/modgraph.py                 # the four crates
    python3 scripts/modgraph.py --exclude app   # all but app
    python3 scripts/modgraph.py --edges engine  # every edge of one crate, then its cycles
    python3 scripts/modgraph.py --root DIR --crates a,b
"""
import argparse
import os
import re
import sys

CRATES = ["telemetry", "engine", "ui", "app"]
IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
ITEM_RE = re.compile(r"\b(?:fn|struct|enum|trait|type|const|static|union)\s+(" + IDENT + r")")
MACRO_RE = re.compile(r"\bmacro_rules!\s*(" + IDENT + r")")
MOD_RE = re.compile(r"\bmod\s+(" + IDENT + r")\s*([;{])")
USE_RE = re.compile(r"(?<![\w$])use\s+")
CFG_TEST_RE = re.compile(r"#\s*\[\s*cfg\s*\(\s*test\s*\)\s*\]")
VIS_RE = re.compile(r"\bpub\s*\(\s*(?:in\s+[^)]*|crate|super|self)\s*\)")
PATH_RE = re.compile(r"(?<![\w$:])(?:crate|super|self)(?:\s*::\s*" + IDENT + r")+")
PATH_ATTR_RE = re.compile(r'#\s*\[\s*path\s*=\s*"([^"]*)"\s*\]\s*$')


# ---------------------------------------------------------------- lexing


def blank(chars, i, j):
    """Blanks chars[i:j] (a list), keeping newlines so line numbers hold."""
    for k in range(i, j):
        if chars[k] != "\n":
            chars[k] = " "


def strip_comments_and_strings(src):
    """(no_comments, code): the source with comments blanked, and with string and char literal
    contents blanked as well. Both keep every offset and line of the source."""
    nc = list(src)
    code = list(src)
    i, n = 0, len(src)
    while i < n:
        c = src[i]
        if src.startswith("//", i):
            j = src.find("\n", i)
            j = n if j < 0 else j
            blank(nc, i, j)
            blank(code, i, j)
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
            blank(nc, i, j)
            blank(code, i, j)
            i = j
        elif c in "rbc" and (i == 0 or not (src[i - 1].isalnum() or src[i - 1] == "_")):
            m = re.compile(r'(?:br|cr|r)(#*)"').match(src, i)
            if m:
                end = src.find('"' + m.group(1), m.end())
                end = n if end < 0 else end
                blank(code, m.end(), end)
                i = end + 1 + len(m.group(1))
            elif src.startswith(('b"', 'c"'), i):
                i = skip_string(src, code, i + 1)
            elif src.startswith("b'", i):
                i = skip_char(src, code, i + 1)
            else:
                i += 1
        elif c == '"':
            i = skip_string(src, code, i)
        elif c == "'":
            i = skip_char(src, code, i)
        else:
            i += 1
    return "".join(nc), "".join(code)


def skip_string(src, code, i):
    j = i + 1
    while j < len(src) and src[j] != '"':
        j += 2 if src[j] == "\\" else 1
    blank(code, i + 1, min(j, len(src)))
    return j + 1


def skip_char(src, code, i):
    """A char literal ('a', '\\n', '\\u{..}') or a lifetime ('a, 'static)."""
    if i + 1 < len(src) and src[i + 1] == "\\":
        j = src.find("'", i + 3)
        j = len(src) if j < 0 else j
        blank(code, i + 1, j)
        return j + 1
    if i + 2 < len(src) and src[i + 2] == "'":
        blank(code, i + 1, i + 2)
        return i + 3
    return i + 1


def match_close(code, i, open_ch, close_ch):
    """The offset just past the bracket closing the one at code[i]."""
    depth = 0
    for j in range(i, len(code)):
        if code[j] == open_ch:
            depth += 1
        elif code[j] == close_ch:
            depth -= 1
            if depth == 0:
                return j + 1
    return len(code)


def item_end(code, i):
    """The end of the item starting at code[i]: past its `;` or its `{ … }` (at depth 0)."""
    depth = 0
    for j in range(i, len(code)):
        ch = code[j]
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif depth == 0 and ch == ";":
            return j + 1
        elif depth == 0 and ch == "{":
            return match_close(code, j, "{", "}")
    return len(code)


def skip_attrs(code, i):
    while True:
        while i < len(code) and code[i].isspace():
            i += 1
        if code.startswith("#", i):
            j = i + 1
            while j < len(code) and code[j].isspace():
                j += 1
            if code.startswith("[", j):
                i = match_close(code, j, "[", "]")
                continue
        return i


def strip_cfg_test(nc, code):
    """Blanks every `#[cfg(test)]` item (attribute included) in both versions."""
    nc, code = list(nc), list(code)
    text = "".join(code)
    pos = 0
    while True:
        m = CFG_TEST_RE.search(text, pos)
        if not m:
            break
        end = item_end(text, skip_attrs(text, m.end()))
        blank(nc, m.start(), end)
        blank(code, m.start(), end)
        text = "".join(code)
        pos = end
    return "".join(nc), "".join(code)


# ---------------------------------------------------------------- use trees


def parse_use_tree(s):
    """`a::{b, c::d as e, f::*}` → [(["a", "b"], "b"), (["a", "c", "d"], "e"), (["a", "f"], "*")].
    A bare `self` in a group binds the group's own prefix."""
    toks = re.findall(IDENT + r"|::|[{},*]", s)
    pos = 0

    def tree(prefix):
        nonlocal pos
        out = []
        path = list(prefix)
        while pos < len(toks):
            t = toks[pos]
            if t == "::":
                pos += 1
            elif t == "{":
                pos += 1
                while pos < len(toks) and toks[pos] != "}":
                    if toks[pos] == ",":
                        pos += 1
                        continue
                    out += tree(path)
                pos += 1
                return out
            elif t == "*":
                pos += 1
                return [(path, "*")]
            elif t in ",}":
                break
            elif t == "as":
                pos += 1
                alias = toks[pos] if pos < len(toks) else "_"
                pos += 1
                return out + [(path, alias)]
            else:
                path = path + [t]
                pos += 1
        if path == list(prefix):
            return out
        if path[-1] == "self":
            path = path[:-1]
        return out + [(path, path[-1] if path else "_")]

    return tree([])


# ---------------------------------------------------------------- the crate


class Crate:
    def __init__(self, root, name):
        self.name = name
        self.src = os.path.join(root, name, "src")
        self.modules = {}  # module path (tuple) -> file
        self.items = {}  # module -> set of names defined there
        self.aliases = {}  # module -> {name: raw path list}
        self.globs = {}  # module -> [raw path list]
        self.refs = []  # (file, line, node, module, raw path list)
        self.files = []
        top = next((os.path.join(self.src, f) for f in ("lib.rs", "main.rs")
                    if os.path.exists(os.path.join(self.src, f))), None)
        if top is None:
            raise SystemExit(f"modgraph: {self.src} has no lib.rs or main.rs")
        self.load(top, (), self.src)

    def load(self, path, mod, child_dir):
        self.files.append(path)
        self.modules[mod] = path
        with open(path, encoding="utf-8") as f:
            src = f.read()
        nc, code = strip_comments_and_strings(src)
        nc, code = strip_cfg_test(nc, code)
        code = VIS_RE.sub(lambda m: " " * len(m.group(0)), code)
        starts = [0] + [i + 1 for i, ch in enumerate(code) if ch == "\n"]

        def line_of(off):
            lo, hi = 0, len(starts)
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if starts[mid] <= off else (lo, mid)
            return lo + 1

        # inline modules: (start, end, module path), innermost found last
        spans = []
        children = []  # (module path, offset) of `mod x;` declarations

        def module_at(off):
            best = mod
            for s, e, m in spans:
                if s <= off < e and len(m) > len(best):
                    best = m
            return best

        for m in MOD_RE.finditer(code):
            parent = module_at(m.start())
            sub = parent + (m.group(1),)
            if m.group(2) == "{":
                spans.append((m.end() - 1, match_close(code, m.end() - 1, "{", "}"), sub))
                self.modules.setdefault(sub, path)
            else:
                children.append((sub, m.start()))
        for s, e, m in spans:
            self.modules.setdefault(m, path)
        for m in ITEM_RE.finditer(code):
            self.items.setdefault(module_at(m.start()), set()).add(m.group(1))
        for m in MACRO_RE.finditer(code):
            self.items.setdefault(module_at(m.start()), set()).add(m.group(1))

        rel = os.path.relpath(path, os.path.dirname(self.src.rstrip("/")))
        rel = os.path.join(self.name, rel) if not rel.startswith(self.name + os.sep) else rel
        used = [False] * len(code)
        for m in USE_RE.finditer(code):
            end = item_end(code, m.end())
            here = module_at(m.start())
            node = cut(here)
            for p in range(m.start(), end):
                used[p] = True
            for segs, bound in parse_use_tree(code[m.end():end - 1]):
                if not segs:
                    continue
                if bound == "*":
                    self.globs.setdefault(here, []).append((here, segs))
                else:
                    self.aliases.setdefault(here, {})[bound] = (here, segs)
                if segs[0] in ("crate", "super", "self"):
                    self.refs.append((rel, line_of(m.start()), node, here, segs))
        for m in PATH_RE.finditer(code):
            if used[m.start()]:
                continue
            segs = re.findall(IDENT, m.group(0))
            here = module_at(m.start())
            self.refs.append((rel, line_of(m.start()), cut(here), here, segs))

        for sub, off in children:
            attr = PATH_ATTR_RE.search(nc[:off].rstrip())
            if attr:
                f = os.path.join(os.path.dirname(path), attr.group(1))
                self.load(f, sub, os.path.join(os.path.dirname(f), sub[-1]))
                continue
            inner = sub[len(mod):]
            base = os.path.join(child_dir, *inner[:-1])
            for f, d in ((os.path.join(base, inner[-1] + ".rs"), os.path.join(base, inner[-1])),
                         (os.path.join(base, inner[-1], "mod.rs"), os.path.join(base, inner[-1]))):
                if os.path.exists(f):
                    self.load(f, sub, d)
                    break

    def absolute(self, here, segs):
        """A raw path named in module `here` as (module to start from, remaining segments), or
        None where it leaves the crate (std, another crate)."""
        cur, i = here, 0
        if segs[0] == "crate":
            cur, i = (), 1
        elif segs[0] == "self":
            i = 1
        elif segs[0] == "super":
            while i < len(segs) and segs[i] == "super":
                cur, i = cur[:-1], i + 1
        elif not (cur + (segs[0],) in self.modules or segs[0] in self.aliases.get(cur, {})
                  or segs[0] in self.items.get(cur, set())):
            return None
        return cur, segs[i:]

    def resolve(self, here, segs, depth=0):
        """The module that defines what `segs` (named in module `here`) names, or None."""
        start = self.absolute(here, segs)
        if start is None or depth > 32:
            return None
        cur, rest = start
        for k, s in enumerate(rest):
            if cur + (s,) in self.modules:
                cur = cur + (s,)
                continue
            alias = self.aliases.get(cur, {}).get(s)
            if alias is not None:
                a_here, a_segs = alias
                if a_segs[-1] == s and len(a_segs) == 1 and a_here == cur:
                    return cur
                return self.resolve(a_here, a_segs + rest[k + 1:], depth + 1)
            if s in self.items.get(cur, set()):
                return cur
            for g_here, g_segs in self.globs.get(cur, []):
                g = self.resolve(g_here, g_segs, depth + 1)
                if g is None:
                    continue
                if (g + (s,) in self.modules or s in self.aliases.get(g, {})
                        or s in self.items.get(g, set())):
                    return self.resolve(g, ["self", s] + rest[k + 1:], depth + 1)
            return cur
        return cur

    def edges(self):
        """{(from node, to node): (file, line)}, the first example of each arrow."""
        out = {}
        for rel, line, node, here, segs in sorted(self.refs, key=lambda r: (r[0], r[1])):
            target = self.resolve(here, segs)
            if target is None:
                continue
            to = cut(target)
            if to != node and (node, to) not in out:
                out[(node, to)] = (rel, line)
        return out


def cut(mod):
    return "::".join(mod[:2]) if mod else "crate"


def sccs(nodes, edges):
    """Tarjan's strongly connected components, each sorted, in a stable order."""
    succ = {n: sorted({b for (a, b) in edges if a == n}) for n in nodes}
    index, low, on, stack, out = {}, {}, set(), [], []
    counter = [0]

    def visit(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in succ[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index:
            visit(v)
    return sorted(out)


def check(root, name, show_edges=False):
    crate = Crate(root, name)
    edges = crate.edges()
    nodes = {cut(m) for m in crate.modules} | {n for e in edges for n in e}
    if show_edges:
        for (a, b), (f, line) in sorted(edges.items()):
            print(f"  {a} -> {b}  {f}:{line}")
    cycles = [c for c in sccs(nodes, edges) if len(c) > 1]
    if not cycles:
        print(f"{name}: no cycles ({len(nodes)} nodes, {len(edges)} edges)")
        return 0
    print(f"{name}: {len(cycles)} cycle{'s' if len(cycles) > 1 else ''} "
          f"({len(nodes)} nodes, {len(edges)} edges)")
    for comp in cycles:
        print(f"  cycle: {', '.join(comp)}")
        members = set(comp)
        for (a, b), (f, line) in sorted(edges.items()):
            if a in members and b in members:
                print(f"    {a} -> {b}  {f}:{line}")
    return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--root", default=os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."),
                    help="the workspace root (default: this repository)")
    ap.add_argument("--crates", default=",".join(CRATES), help="comma-separated crate directories")
    ap.add_argument("--exclude", default="", help="comma-separated crates to leave out")
    ap.add_argument("--edges", action="store_true", help="print every edge too")
    args = ap.parse_args()
    skip = {c for c in args.exclude.split(",") if c}
    status = 0
    for name in [c for c in args.crates.split(",") if c and c not in skip]:
        status |= check(args.root, name, args.edges)
    return status


if __name__ == "__main__":
    sys.exit(main())
