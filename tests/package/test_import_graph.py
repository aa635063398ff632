"""The module-level import graph of ``lychee_ray``: no cycles, and few imports hidden inside functions.

A cycle between modules is what function-level imports were used to dodge; both make the order in
which modules load matter. Here the graph is walked from the source (``ast``), as Python runs it:
module-level imports (a class body counts, ``if TYPE_CHECKING:`` does not) are edges, and importing
``a.b.c`` also runs ``a/__init__`` and ``a/b/__init__``. Imports of our own modules inside a function
are allowed only to delay a heavy optional load, each with a comment on its line or the line above.
"""

from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "lychee_ray"
# imports of our own modules inside functions (issue 36: from 62 to at most 15), each delaying a heavy load
MAX_FUNCTION_IMPORTS = 15


def _module_name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("").parts
    return ".".join(rel[:-1]) if rel[-1] == "__init__" else ".".join(rel)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PKG.rglob("*.py")) if "__pycache__" not in p.parts}


def _is_type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _targets(node: ast.Import | ast.ImportFrom, package: str) -> list[str]:
    """Our modules an import statement loads (``from pkg import sub`` loads ``pkg.sub`` too)."""
    if isinstance(node, ast.Import):
        names = [a.name for a in node.names]
    else:
        if node.level:
            parts = package.split(".")
            base = parts[: len(parts) - (node.level - 1)]
            mod = ".".join(base + ([node.module] if node.module else []))
        else:
            mod = node.module or ""
        names = [mod] + [f"{mod}.{a.name}" for a in node.names]
    return [n for n in names if n in MODULES]


def _walk(module: str) -> tuple[set[str], list[tuple[int, str]]]:
    """(modules imported at module level, [(line, module) imported inside a function])."""
    path = MODULES[module]
    package = module if path.name == "__init__.py" else module.rsplit(".", 1)[0]
    top: set[str] = set()
    inner: list[tuple[int, str]] = []

    def walk(body: list[ast.stmt], at_top: bool) -> None:
        for node in body:
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for t in _targets(node, package):
                    if at_top:
                        top.add(t)
                    else:
                        inner.append((node.lineno, t))
            elif isinstance(node, ast.If) and _is_type_checking(node):
                continue
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                walk(node.body, False)
            else:
                for field in ("body", "orelse", "finalbody", "handlers"):
                    sub = getattr(node, field, None)
                    if isinstance(sub, list):
                        walk(sub, at_top)

    walk(ast.parse(path.read_text(encoding="utf-8")).body, True)
    return top, inner


def _graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for m in MODULES:
        direct, _ = _walk(m)
        full = set(direct)
        for t in direct:  # importing a.b.c runs the __init__ of a and a.b first
            parts = t.split(".")
            for i in range(2, len(parts)):
                parent = ".".join(parts[:i])
                if parent in MODULES and m != parent and not m.startswith(parent + "."):
                    full.add(parent)
        edges[m] = full
    return edges


def _cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            v, it = work[-1]
            advanced = False
            for w in it:
                if w not in index:
                    index[w] = low[w] = counter
                    counter += 1
                    stack.append(w)
                    on_stack.add(w)
                    work.append((w, iter(sorted(edges[w]))))
                    advanced = True
                    break
                if w in on_stack:
                    low[v] = min(low[v], index[w])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on_stack.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def test_the_cycle_finder_finds_a_cycle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_the_module_level_import_graph_has_no_cycles():
    cycles = _cycles(_graph())
    assert not cycles, "import cycles (break them; do not hide them in a function):\n" + "\n".join(map(str, cycles))


def test_imports_inside_functions_are_few_and_say_why():
    found = []
    for m, path in MODULES.items():
        lines = path.read_text(encoding="utf-8").splitlines()
        for line, target in _walk(m)[1]:
            said = "#" in lines[line - 1] or lines[line - 2].strip().startswith("#")
            found.append((f"{path.relative_to(PKG.parent)}:{line} imports {target}", said))
    unexplained = [where for where, said in found if not said]
    assert not unexplained, "a function-level import needs a comment saying which heavy load it delays:\n" + "\n".join(unexplained)
    assert len(found) <= MAX_FUNCTION_IMPORTS, "\n".join(where for where, _ in found)
