"""The package's shape: layers import downward only, Ray stays in its package, files stay small."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[2] / "lychee_ray"

# Lower rank = lower layer. A module may import its own package and packages of a LOWER rank only
# (docs/architecture.md lists what each package owns).
LAYERS: dict[str, int] = {
    "names": -1,
    "config": 0, "logs": 0, "progress": 0,
    "core": 1,
    "text": 2,
    "llm": 3, "embed": 3,
    "io": 4,
    "ingest": 5,
    "query": 6,
    "serve": 7, "eval": 7, "testing": 7,
    "inspector": 8,
    "ray": 9,
    "memory": 10,
    "api": 11,
    "cli": 12,
}
RAY_ALLOWED = {"ray", "cli"}
# Inside eval/, the same rule by subpackage (docs/architecture.md, "The eval package"): setup, metrics
# and baselines import no other eval subpackage, reports may import metrics and setup, runners all.
EVAL_LAYERS: dict[str, int] = {"setup": 0, "metrics": 0, "baselines": 0, "reports": 1, "runners": 2}
# Inside ingest/, the same rule by top-level module or subpackage (docs/architecture.md, "Levels inside
# ingest/"): data at the bottom, steps in the middle, the write path's commit / decide / construct
# above them, runners on top. A unit imports units of a LOWER level only.
INGEST_LEVELS: dict[str, int] = {
    # data: types and the pure helpers every step shares
    "resume_point": 0, "passages": 0, "vectors": 0, "text_links": 0, "value_slots": 0, "nodes": 0,
    "outcomes": 1,
    # steps: one conversation segmented, encoded, constructed; an increment; a build run's stages
    "segment": 2, "encode": 2,
    "supersede": 3, "forget_parts": 3,
    "pipeline": 4,
    "increment": 5, "stages": 5,
    # the write path: commit (locks, the re-decision, fenced commits), then decide and construct
    "commit": 6,
    "decide": 7, "construct": 7,
    # runners: appends, a build run, a forget
    "append": 8, "local_stages": 8, "forget": 8, "context": 8, "dryrun": 8, "run_progress": 8,
    "runner": 9, "runner_choice": 9,
}
MAX_LINES = 450


def _modules() -> list[Path]:
    return sorted(p for p in PKG.rglob("*.py") if "__pycache__" not in p.parts)


def _package_of(path: Path) -> str | None:
    rel = path.relative_to(PKG).with_suffix("")
    return rel.parts[0] if rel.parts[0] != "__init__" else None


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every imported module name (absolute; relative imports resolved), at any depth of the file."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    rel = path.relative_to(PKG).with_suffix("").parts
    here = ["lychee_ray", *rel[:-1]] if rel[-1] != "__init__" else ["lychee_ray", *rel[:-1]]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here[: len(here) - (node.level - 1)]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.append((node.lineno, name))
            if name == "lychee_ray":  # `from lychee_ray import x`: x may be a subpackage
                out += [(node.lineno, f"lychee_ray.{a.name}") for a in node.names]
    return out


def test_every_module_is_in_a_known_layer():
    unknown = {_package_of(p) for p in _modules()} - set(LAYERS) - {None}
    assert not unknown, f"packages without a layer (add them to LAYERS and docs/architecture.md): {unknown}"


def test_only_the_ray_package_and_the_cli_import_ray():
    bad = [f"{p.relative_to(PKG)}:{line} imports {name}" for p in _modules()
           for line, name in _imports(p)
           if (name == "ray" or name.startswith("ray.")) and _package_of(p) not in RAY_ALLOWED]
    assert not bad, "\n".join(bad)


def test_no_library_module_imports_the_cli():
    bad = [f"{p.relative_to(PKG)}:{line} imports {name}" for p in _modules()
           for line, name in _imports(p)
           if (name == "lychee_ray.cli" or name.startswith("lychee_ray.cli.")) and _package_of(p) != "cli"]
    assert not bad, "\n".join(bad)


def test_imports_point_down_the_layers():
    bad = []
    for p in _modules():
        mine = _package_of(p)
        if mine is None:
            continue
        for line, name in _imports(p):
            parts = name.split(".")
            if parts[0] != "lychee_ray" or len(parts) < 2 or parts[1] not in LAYERS or parts[1] == mine:
                continue
            if LAYERS[parts[1]] >= LAYERS[mine]:
                bad.append(f"{p.relative_to(PKG)}:{line} ({mine}, layer {LAYERS[mine]}) imports {name} "
                           f"(layer {LAYERS[parts[1]]})")
    assert not bad, "\n".join(bad)


def test_eval_subpackages_import_one_way():
    eval_dir = PKG / "eval"
    assert [p.name for p in eval_dir.glob("*.py")] == ["__init__.py"], "eval/ modules live in its subpackages"
    assert {p.name for p in eval_dir.iterdir() if p.is_dir() and p.name != "__pycache__"} == set(EVAL_LAYERS)
    bad = []
    for p in _modules():
        rel = p.relative_to(PKG).parts
        if rel[0] != "eval":
            continue
        mine = rel[1] if len(rel) > 2 else None  # None: eval/__init__.py, which imports nothing of eval
        for line, name in _imports(p):
            parts = name.split(".")
            if parts[:2] != ["lychee_ray", "eval"]:
                continue
            theirs = parts[2] if len(parts) > 2 else None
            if theirs == mine and mine is not None:
                continue
            if mine is None or theirs not in EVAL_LAYERS or EVAL_LAYERS[theirs] >= EVAL_LAYERS[mine]:
                bad.append(f"{p.relative_to(PKG)}:{line} ({mine}) imports {name}")
    assert not bad, "\n".join(bad)


def _ingest_unit(path: Path) -> str | None:
    """The ingest/ unit a module belongs to: its top-level module or subpackage (None: ingest/__init__)."""
    rel = path.relative_to(PKG / "ingest").with_suffix("").parts
    return None if rel == ("__init__",) else rel[0]


def _ingest_graph() -> dict[str, set[str]]:
    """Every ingest/ module (dotted, relative to ingest/) -> the ingest/ modules it imports (any depth of
    the file, TYPE_CHECKING blocks included; a name resolves to the longest module it starts with)."""
    mods = {}
    for p in _modules():
        if p.relative_to(PKG).parts[0] == "ingest":
            rel = p.relative_to(PKG / "ingest").with_suffix("").parts
            mods[".".join(rel[:-1] if rel[-1] == "__init__" else rel)] = p
    graph: dict[str, set[str]] = {}
    for mod, p in mods.items():
        out = set()
        for _, name in _imports(p):
            parts = name.split(".")
            if parts[:2] != ["lychee_ray", "ingest"]:
                continue
            for k in range(len(parts), 2, -1):
                target = ".".join(parts[2:k])
                if target in mods:
                    if target != mod:
                        out.add(target)
                    break
        graph[mod] = out
    return graph


def test_ingest_units_import_down_their_levels():
    units = {_ingest_unit(p) for p in _modules() if p.relative_to(PKG).parts[0] == "ingest"} - {None}
    assert units == set(INGEST_LEVELS), "every ingest/ module or subpackage has a level (INGEST_LEVELS, docs/architecture.md)"
    bad = []
    for p in _modules():
        if p.relative_to(PKG).parts[0] != "ingest":
            continue
        mine = _ingest_unit(p)
        for line, name in _imports(p):
            parts = name.split(".")
            if parts[:2] != ["lychee_ray", "ingest"]:
                continue
            theirs = parts[2] if len(parts) > 2 else None
            if theirs == mine and mine is not None:
                continue
            if mine is None or theirs not in INGEST_LEVELS or INGEST_LEVELS[theirs] >= INGEST_LEVELS[mine]:
                bad.append(f"{p.relative_to(PKG)}:{line} ({mine}) imports {name}")
    assert not bad, "an arrow back up inside ingest/:\n" + "\n".join(bad)


def test_ingest_modules_import_no_circle():
    graph = _ingest_graph()
    state: dict[str, int] = {}  # 1: on the path, 2: done
    circles = []

    def visit(mod: str, path: list[str]) -> None:
        state[mod] = 1
        for nxt in sorted(graph[mod]):
            if state.get(nxt) == 1:
                circles.append(" -> ".join([*path[path.index(nxt):], nxt]))
            elif nxt not in state:
                visit(nxt, [*path, nxt])
        state[mod] = 2

    for mod in sorted(graph):
        if mod not in state:
            visit(mod, [mod])
    assert not circles, "import circles inside ingest/:\n" + "\n".join(circles)


# The write side's one commit step (docs/architecture.md, "The write path"): outside io/store/, only this
# module takes a conversation's write or encode lock, reads a marker to build on (current_marker: a
# version-1 one migrated) and calls the writer's fenced commits.
COMMIT_STEP = Path("ingest/commit.py")
LOCKS = {"write_lock", "async_write_lock", "conversation_write_lock"}
WRITER_CALLS = {"commit", "commit_delta", "fold", "current_marker"}


def test_one_module_takes_a_conversations_write_lock_and_commits():
    bad = []
    for p in _modules():
        rel = p.relative_to(PKG)
        if rel.parts[:2] == ("io", "store") or rel == COMMIT_STEP:
            continue
        tree = ast.parse(p.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("lychee_ray.io.store"):
                bad += [f"{rel}:{node.lineno} imports {a.name}" for a in node.names if a.name in LOCKS]
            elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITER_CALLS
                  and (node.func.attr == "current_marker" or any(k.arg in ("locked", "based_on") for k in node.keywords))):
                bad.append(f"{rel}:{node.lineno} calls .{node.func.attr}(...)")
    assert not bad, "only ingest/commit.py locks a conversation and commits on the write side:\n" + "\n".join(bad)
    text = (PKG / COMMIT_STEP).read_text(encoding="utf-8")
    assert "async_write_lock(" in text and "based_on=based_on" in text  # the checker looks at the right module


@pytest.mark.subprocess
def test_importing_the_package_imports_no_ray_and_no_model():
    import subprocess
    import sys

    code = ("import sys, lychee_ray as L; L.LycheeConfig; L.Conversation; "
            "print(sorted(m for m in ('ray', 'torch', 'sentence_transformers', 'faiss') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(PKG)))
def test_modules_stay_small(path):
    n = sum(1 for _ in path.open(encoding="utf-8"))
    assert n <= MAX_LINES, f"{path.relative_to(PKG)} has {n} lines (split it by concern)"


def test_public_api():
    import lychee_ray as L

    for name in L.__all__:
        assert getattr(L, name) is not None
    for name in ("LycheeConfig", "load_config", "Conversation", "Session", "Turn", "MemoryRecord", "MemoryStore",
                 "SearchResult", "QueryResult", "build_memory", "BuildSummary"):
        assert name in L.__all__
    with pytest.raises(AttributeError):
        L.not_a_public_name  # noqa: B018


def test_comments_carry_no_issue_numbers():
    """Comments explain the code as it is; its history (issue numbers) lives in git and the docs."""
    import re

    pattern = re.compile(r"issue [0-9]", re.IGNORECASE)
    roots = [PKG, PKG.parent / "configs"]
    bad = [f"{p.relative_to(PKG.parent)}:{i}" for root in roots for p in sorted(root.rglob("*"))
           if p.is_file() and p.suffix in (".py", ".yaml", ".js", ".html", ".css") and "__pycache__" not in p.parts
           for i, line in enumerate(p.read_text(encoding="utf-8").splitlines(), 1) if pattern.search(line)]
    assert not bad, "issue numbers in comments:\n" + "\n".join(bad)
