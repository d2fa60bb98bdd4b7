#!/usr/bin/env python3
"""File-level import cycles in the workspace's Rust crates (stdlib only; no cargo, no build).

For every crate `src/` directory (each directory under the repository with a Cargo.toml and a
src/, skipping target/ and vendor/), this builds the graph "file A depends on file B" and prints
its strongly connected components (Tarjan) of more than 2 files, with the edges inside each.

How A -> B is found (a textual approximation of rustc's name resolution):
  * the module tree is walked from each crate root (lib.rs, main.rs, bin/*.rs) through `mod x;`
    (x.rs or x/mod.rs) and inline `mod x { .. }` blocks (their items belong to their file);
  * every `use` leaf and every path in code whose first segment is `crate`, `self`, `super`, a
    child module or a module brought in by `use` is resolved to the module defining its item,
    following `use`/`pub use` re-exports (and globs) to the defining file. A name that cannot be
    found falls back to the file of the module it was looked up in (e.g. lib.rs); a name
    re-exported from another crate (`pub use harness_hooks::X`) is external: no edge;
  * `mod x;` declarations are not edges, nor are paths naming only a module, nor method calls
    (`x.run()` into an `impl` block in another file is invisible: only paths and imports count);
  * comments, doc comments, string/char literals, `mod tests { .. }` blocks and any item
    marked `#[cfg(test)]` (so test-only module files too) are ignored.
An edge is printed with the item names it refers to: `tree/mod.rs -> ralph.rs: Ralph, run`;
`Name^` is named only by a `pub use`/`pub(crate) use` re-export in the referring file, and
`Name?` could not be found in the module it was looked up in (e.g. an item a macro defines).
`[cut -> N]` after an edge: removing it alone leaves the largest cycle there at N files. The
greedy cut (edges removed one at a time, each leaving the smallest cycle, then fewest items)
is listed when it has at most 6 edges (always in --json). "pairs only": no cycle goes through
3 distinct files (all edges mutual, the pairs a tree: a hub such as lib.rs or mod.rs that
re-exports or calls its children while they use its items); it still counts as a component.

Usage:  python3 bench/cycles.py [--json] [--check [--budget CRATE=N ...]] [--skip-reexports] [--root DIR]
  --json   print the graphs, components and edges as JSON instead of text
  --check  exit 1 when any crate has a cycle of more than 2 files: a component that is not
           "pairs only" (for CI: `.ci/run` runs `--skip-reexports --check`)
  --budget CRATE=N  let CRATE (`harness/src`) keep a component of up to N files: known debt,
           named so that it can only shrink (lower N as it does)
  --skip-reexports  leave out references made only by `pub use` (a facade re-exporting its
           children), to see the cycles that remain once every importer names the defining file
  --root   the repository (default: the parent of this script's directory)
"""
import argparse, json, os, re, sys

WORD = r'(?:r#)?[A-Za-z_]\w*'
ITEM_RE = re.compile(r"(?<!['\w#])(fn|struct|enum|trait|type|const|static|union|macro_rules!)\s+"
                     r"(?!fn\b|unsafe\b|async\b|extern\b|mut\b)(\w+)")
PATH_RE = re.compile(r'(?<![\w:])(\$?crate|' + WORD + r')((?:\s*::\s*' + WORD + r')+)')
USE_RE = re.compile(r'(?<![\w$])use\s+([^;]+);')
RAW_RE = re.compile(r'b?r(#*)"')
PUB_RE = re.compile(r'\bpub\s*(\([^)]*\))?\s*$')

def strip(src):
    """Blank out comments and the contents of string and char literals (offsets unchanged)."""
    out, i, n = list(src), 0, len(src)
    def wipe(a, b):
        out[a:b] = [ch if ch == '\n' else ' ' for ch in src[a:b]]
    while i < n:
        c = src[i]
        if c == '/' and src.startswith('//', i):
            j = src.find('\n', i); j = n if j < 0 else j; wipe(i, j); i = j
        elif c == '/' and src.startswith('/*', i):
            j, depth = i + 2, 1
            while j < n and depth:
                if src.startswith('/*', j): depth, j = depth + 1, j + 2
                elif src.startswith('*/', j): depth, j = depth - 1, j + 2
                else: j += 1
            wipe(i, j); i = j
        elif c in 'br' and (m := RAW_RE.match(src, i)) and not (i and (src[i-1].isalnum() or src[i-1] == '_')):
            end = src.find('"' + m.group(1), m.end()); end = n if end < 0 else end
            wipe(m.end(), end); i = end + 1 + len(m.group(1))
        elif c == '"':
            j = i + 1
            while j < n and src[j] != '"':
                j += 2 if src[j] == '\\' else 1
            wipe(i + 1, j); i = j + 1
        elif c == "'" and i + 1 < n and src[i+1] == '\\':
            j = src.find("'", i + 3); wipe(i + 1, j); i = j + 1
        elif c == "'" and i + 2 < n and src[i+2] == "'":
            wipe(i + 1, i + 2); i += 3
        else:
            i += 1  # code, or a lifetime's quote
    return ''.join(out)

def match_brace(s, i):  # s[i] == '{'; the index just past its matching '}'
    depth = 0
    for j in range(i, len(s)):
        depth += (s[j] == '{') - (s[j] == '}')
        if depth == 0 and s[j] == '}': return j + 1
    return len(s)

def drop_tests(s):
    """Blank `#[cfg(test)]` items (up to their `;` or matching `}`) and `mod tests {..}` blocks."""
    while m := re.search(r'#\[cfg\(test\)\]|(?<!\w)mod\s+tests\s*\{', s):
        j, depth = m.start() if m.group(0).startswith('mod') else m.end(), 0
        while j < len(s):
            if s[j] in '([': depth += 1
            elif s[j] in ')]': depth -= 1
            elif depth == 0 and s[j] == ';': j += 1; break
            elif depth == 0 and s[j] == '{': j = match_brace(s, j); break
            j += 1
        s = s[:m.start()] + re.sub(r'[^\n]', ' ', s[m.start():j]) + s[j:]
    return s

class Crate:
    """One crate root's module tree: modpath tuple -> {file, children, defs, uses, globs}."""

    def __init__(self, root):
        self.mods, self.files, self.usestmts = {}, {}, []
        self.load(root, (), os.path.dirname(root))

    def newmod(self, path, file):
        self.mods[path] = {'file': file, 'children': set(), 'defs': set(), 'uses': {}, 'globs': []}

    def load(self, file, path, childdir):
        text = drop_tests(strip(open(file, encoding='utf-8').read()))
        self.newmod(path, file)
        depth, d = [], 0
        for ch in text:
            depth.append(d); d += (ch == '{') - (ch == '}')
        spans = [(0, len(text), path, 0, childdir)]  # (start, end, modpath, item depth, dir)
        for m in re.finditer(r'(?<!\w)mod\s+(\w+)\s*\{', text):
            b, outer = m.end() - 1, self.innermost(spans, m.start())
            sub = outer[2] + (m.group(1),)
            spans.append((b, match_brace(text, b), sub, depth[b] + 1, os.path.join(outer[4], m.group(1))))
            self.newmod(sub, file)
            self.mods[outer[2]]['children'].add(m.group(1))
        for m in ITEM_RE.finditer(text):
            sp = self.innermost(spans, m.start())
            if depth[m.start()] == sp[3]: self.mods[sp[2]]['defs'].add(m.group(2))
        code = text
        for m in USE_RE.finditer(text):
            mod = self.innermost(spans, m.start())[2]
            reexport = bool(PUB_RE.search(text[max(0, m.start() - 30):m.start()]))
            for segs, alias in self.use_leaves(re.sub(r'\s+', '', re.sub(r'\s+as\s+', '@', m.group(1)))):
                if segs[-1] == '*': self.mods[mod]['globs'].append((mod, segs[:-1]))
                elif alias != '_': self.mods[mod]['uses'][alias] = (mod, segs)
                self.usestmts.append((file, mod, segs, reexport))
            code = code[:m.start()] + ' ' * (m.end() - m.start()) + code[m.end():]  # paths in code only
        self.files[file] = (code, spans)
        for m in re.finditer(r'(?<!\w)mod\s+(\w+)\s*;', text):
            sp = self.innermost(spans, m.start())
            if depth[m.start()] != sp[3]: continue
            for cand in (os.path.join(sp[4], m.group(1) + '.rs'), os.path.join(sp[4], m.group(1), 'mod.rs')):
                if os.path.exists(cand):
                    self.mods[sp[2]]['children'].add(m.group(1))
                    self.load(cand, sp[2] + (m.group(1),), os.path.dirname(cand) if cand.endswith('mod.rs') else cand[:-3])
                    break

    @staticmethod
    def innermost(spans, pos):
        return max((s for s in spans if s[0] <= pos < s[1]), key=lambda s: s[0])

    def use_leaves(self, tree, prefix=()):
        """`a::{b, c::d@e, self}` (`@` for ` as `) -> [((a,b),'b'), ((a,c,d),'e'), ((a,),'a')]"""
        parts, depth, cur = [], 0, ''
        for ch in tree + ',':
            if ch == ',' and depth == 0:
                if cur: parts.append(cur)
                cur = ''; continue
            depth += (ch == '{') - (ch == '}'); cur += ch
        leaves = []
        for p in parts:
            if p.endswith('}') and '{' in p:
                head = tuple(x for x in p[:p.index('{')].split('::') if x)
                leaves += self.use_leaves(p[p.index('{') + 1:-1], prefix + head)
                continue
            p, _, alias = p.partition('@')
            segs = prefix + tuple(x for x in p.split('::') if x)
            segs = segs[:-1] if segs[-1:] == ('self',) else segs
            if segs: leaves.append((segs, alias or segs[-1]))
        return leaves

    def absolute(self, mod, segs, seen=()):
        """A path written in module `mod` -> the path from the crate root, or None if external."""
        if not segs: return mod
        head, m, rest = segs[0], self.mods[mod], segs[1:]
        if head in ('crate', '$crate'): return self.absolute((), rest)
        if head == 'self': return self.absolute(mod, rest, seen)
        if head == 'super': return self.absolute(mod[:-1], rest, seen)
        if head in m['children'] or head in m['defs']: return mod + segs
        if head in m['uses'] and (mod, head) not in seen:
            tgt = self.absolute(*m['uses'][head], seen + ((mod, head),))
            return None if tgt is None else tgt + rest
        return None

    def resolve(self, path, guard=0):
        """-> ('mod', modpath) | ('item', modpath, name) | ('unres', modpath, name) | ('ext',)"""
        cur = ()
        for i, seg in enumerate(path):
            m, last = self.mods[cur], i == len(path) - 1
            if seg in m['children'] and not (last and seg in m['defs']):
                cur += (seg,); continue
            if seg in m['defs']: return ('item', cur, seg)
            if guard < 30 and seg in m['uses']:
                tgt = self.absolute(*m['uses'][seg])
                return ('ext',) if tgt is None else self.resolve(tgt + path[i+1:], guard + 1)
            for gmod, gsegs in m['globs'] if guard < 30 else ():
                tgt = self.absolute(gmod, gsegs)
                r = tgt is not None and tgt in self.mods and self.resolve(tgt + path[i:], guard + 1)
                if r and r[0] in ('item', 'ext'): return r
            return ('unres', cur, seg)
        return ('mod', cur)

    def edges(self, add):
        """Calls add(from_file, to_file, item, by_pub_use) for every cross-file reference."""
        def ref(file, mod, segs, code, reexport=False):
            head, m = segs[0], self.mods[mod]
            if code and head not in ('crate', '$crate', 'self', 'super') and head not in m['children']:
                tgt = self.absolute(mod, segs[:1]) if head in m['uses'] else None
                if tgt is None or self.resolve(tgt)[0] != 'mod': return  # a local, a type, a crate
            path = self.absolute(mod, segs)
            r = ('ext',) if path is None else self.resolve(path)
            if r[0] in ('item', 'unres') and self.mods[r[1]]['file'] != file:
                add(file, self.mods[r[1]]['file'], r[2] + '?' * (r[0] == 'unres'), reexport)
        for file, mod, segs, reexport in self.usestmts:
            if segs[-1] != '*':
                ref(file, mod, segs, False, reexport)
            elif (tgt := self.absolute(mod, segs[:-1])) in self.mods and self.mods[tgt]['file'] != file:
                add(file, self.mods[tgt]['file'], '*', reexport)
        for file, (code, spans) in self.files.items():
            for m in PATH_RE.finditer(code):
                if re.search(r'\(\s*in\s+$', code[max(0, m.start() - 12):m.start()]): continue  # pub(in x)
                segs = (m.group(1),) + tuple(re.split(r'\s*::\s*', m.group(2).strip())[1:])
                ref(file, self.innermost(spans, m.start())[2], tuple(s.removeprefix('r#') for s in segs), True)

def tarjan(nodes, succ):
    index, low, stack, on, out = {}, {}, [], set(), []
    def visit(v):
        index[v] = low[v] = len(index); stack.append(v); on.add(v)
        for w in succ.get(v, ()):
            if w not in index: visit(w); low[v] = min(low[v], low[w])
            elif w in on: low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while not comp or comp[-1] != v:
                comp.append(stack.pop()); on.discard(comp[-1])
            out.append(sorted(comp))
    sys.setrecursionlimit(10000)
    for v in sorted(nodes):
        if v not in index: visit(v)
    return out

def largest(nodes, edges):
    return max(map(len, tarjan(nodes, successors(edges))), default=0)

def successors(edges):
    succ = {}
    for a, b in edges: succ.setdefault(a, []).append(b)
    return succ

def analyse(srcdir, skip_reexports=False):
    roots = [os.path.join(srcdir, f) for f in ('lib.rs', 'main.rs')]
    bindir = os.path.join(srcdir, 'bin')
    if os.path.isdir(bindir):
        roots += [os.path.join(bindir, f, *([] if f.endswith('.rs') else ['main.rs'])) for f in sorted(os.listdir(bindir))]
    graph, files = {}, set()
    def add(a, b, item, reexport):  # an item is `Name^` when only `pub use` names it
        items = graph.setdefault((a, b), {})
        items[item] = items.get(item, True) and reexport
    for root in roots:
        if os.path.isfile(root):
            crate = Crate(root)
            files |= set(crate.files)
            crate.edges(add)
    rel = lambda f: os.path.relpath(f, srcdir)
    nodes = sorted(rel(f) for f in files)
    edges = {(rel(a), rel(b)): sorted(k + '^' * r for k, r in v.items() if not (r and skip_reexports))
             for (a, b), v in graph.items()}
    edges = {e: v for e, v in sorted(edges.items()) if v}
    sccs = []
    for comp in (c for c in tarjan(nodes, successors(edges)) if len(c) > 2):
        inner = {e: v for e, v in edges.items() if e[0] in comp and e[1] in comp}
        cuts = {e: largest(comp, [x for x in inner if x != e]) for e in inner}
        greedy, left = [], list(inner)
        while largest(comp, left) > 2:  # drop the edge leaving the smallest cycle, fewest items
            best = min(left, key=lambda e: (largest(comp, [x for x in left if x != e]), len(inner[e])))
            greedy.append(best); left.remove(best)
        pairs_only = all((b, a) in inner for a, b in inner) and len({frozenset(e) for e in inner}) == len(comp) - 1
        sccs.append({'files': comp, 'pairs_only': pairs_only,
                     'edges': [{'from': a, 'to': b, 'items': v, 'cut_leaves': cuts[(a, b)]} for (a, b), v in inner.items()],
                     'greedy_cut': [{'from': a, 'to': b, 'items': inner[(a, b)]} for a, b in greedy]})
    all_files = {rel(os.path.join(d, f)) for d, _, fs in os.walk(srcdir) for f in fs if f.endswith('.rs')}
    return {'files': nodes, 'not_in_tree': sorted(all_files - set(nodes)),
            'edges': [{'from': a, 'to': b, 'items': v} for (a, b), v in edges.items()],
            'sccs': sccs, 'largest_cycle': max((len(s['files']) for s in sccs), default=0)}

def find_src_dirs(top):
    out = []
    for d, dirs, fs in os.walk(top):
        dirs[:] = sorted(x for x in dirs if not x.startswith('.') and x not in ('target', 'vendor', 'node_modules'))
        if 'Cargo.toml' in fs and os.path.isdir(os.path.join(d, 'src')):
            out.append(os.path.relpath(os.path.join(d, 'src'), top))
    return sorted(out, key=lambda p: (p != 'src', p))

def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    for flag in ('--json', '--check', '--skip-reexports'):
        ap.add_argument(flag, action='store_true')
    ap.add_argument('--budget', action='append', default=[], metavar='CRATE=N')
    ap.add_argument('--root', default=os.path.join(os.path.dirname(os.path.abspath(__file__)), '..'))
    args = ap.parse_args()
    top = os.path.abspath(args.root)
    report = {d: analyse(os.path.join(top, d), args.skip_reexports) for d in find_src_dirs(top)}
    if args.json:
        print(json.dumps(report, indent=2))
    else:
        for d, r in report.items():
            print(f'== {d}: {len(r["files"])} files, {len(r["edges"])} edges'
                  + (f' (not in the module tree: {", ".join(r["not_in_tree"])})' if r['not_in_tree'] else ''))
            for k, s in enumerate(r['sccs'], 1):
                kind = ' (pairs only)' if s['pairs_only'] else ''
                print(f'  cycle {k}{kind}: {len(s["files"])} files: {", ".join(s["files"])}')
                for e in s['edges']:
                    cut = f'  [cut -> {e["cut_leaves"]}]' if e['cut_leaves'] < len(s['files']) else ''
                    print(f'    {e["from"]} -> {e["to"]}: {", ".join(e["items"])}{cut}')
                g = s['greedy_cut']
                print(f'    greedy cut ({len(g)} edges): ' + ('; '.join(
                    f'{e["from"]} -> {e["to"]} ({", ".join(e["items"])})' for e in g) if len(g) <= 6 else 'too many to list'))
        print()
        for d, r in report.items():
            print(f'{d}: largest cycle {r["largest_cycle"]} files')
    if args.check:
        budget = {}
        for entry in args.budget:
            crate, _, n = entry.partition('=')
            if not n.isdigit():
                ap.error(f'--budget {entry!r}: give CRATE=N, e.g. harness/src=25')
            budget[crate] = int(n)
        over = []
        for d, r in report.items():
            worst = max((len(s['files']) for s in r['sccs'] if not s['pairs_only']), default=0)
            allowed = budget.get(d, 2)
            if worst > allowed:
                over.append(f'{d}: a cycle of {worst} files (allowed: {allowed})')
            elif d in budget and worst < allowed:
                print(f'{d}: its largest cycle is {worst} files now; lower --budget {d}={allowed} to {max(worst, 2)}')
        if over:
            print('import cycles over budget:\n  ' + '\n  '.join(over), file=sys.stderr)
            sys.exit(1)

if __name__ == '__main__':
    main()
