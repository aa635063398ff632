"""Benchmark results: printed, and written as JSON where the benchmark was told to."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def write_result(result: dict[str, Any], path: str | Path) -> None:
    """Print ``result`` as indented JSON and write it to ``path`` (parent folders created)."""
    text = json.dumps(result, indent=1)
    print(text)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)


__all__ = ["write_result"]
