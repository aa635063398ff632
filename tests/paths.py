"""Locations of the shared data sets (never copied into the repo)."""

from __future__ import annotations

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SHARED_DATA = (REPO.parent / "shared" / "data").resolve()
LOCOMO_DIR = SHARED_DATA / "locomo"
LONGMEMEVAL_FILE = SHARED_DATA / "longmemeval" / "longmemeval_s_single.json"
TIAGE_FILE = SHARED_DATA / "segmentation" / "tiage.json"


def need(path: Path) -> Path:
    """Skip when a shared data file is absent (it is never copied into the repo)."""
    if not path.exists():
        pytest.skip(f"shared data not found: {path}")
    return path
