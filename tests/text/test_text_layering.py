"""``lychee_ray.text`` sits just above ``core``: it may import only config, core and itself."""

from __future__ import annotations

import ast
from pathlib import Path

import lychee_ray.text

TEXT_DIR = Path(lychee_ray.text.__file__).parent
ALLOWED = ("lychee_ray.config", "lychee_ray.core", "lychee_ray.text")


def _lychee_imports(path: Path) -> list[str]:
    """Every ``lychee_ray`` module a file imports, TYPE_CHECKING blocks and function bodies included."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            assert node.level == 0, f"{path}: relative import"
            found.append(node.module or "")
        elif isinstance(node, ast.Import):
            found.extend(a.name for a in node.names)
    return [m for m in found if m == "lychee_ray" or m.startswith("lychee_ray.")]


def test_text_imports_nothing_above_core():
    files = sorted(TEXT_DIR.rglob("*.py"))
    assert len(files) > 5
    bad = [
        f"{f.relative_to(TEXT_DIR)}: {m}"
        for f in files
        for m in _lychee_imports(f)
        if not any(m == a or m.startswith(a + ".") for a in ALLOWED)
    ]
    assert bad == []


def test_the_check_sees_upward_imports(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from lychee_ray.ingest.encode.base import RecordDraft\n")
    assert _lychee_imports(f) == ["lychee_ray.ingest.encode.base"]
