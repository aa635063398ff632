"""Canonical Parquet input: rows with :data:`~lychee_ray.models.CONVERSATION_SCHEMA`.

Rows go through the same cleaning and repairs as canonical JSONL lines
(:func:`~lychee_ray.adapters.base.canonical_item`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterator

import pyarrow.parquet as pq

from .base import AdapterItem, InputIssue, canonical_item, list_input_files, open_input

SUFFIXES = (".parquet",)


def _meta(v: Any) -> Any:
    """Meta columns hold JSON objects as strings; anything unreadable is left for validation."""
    if isinstance(v, str):
        try:
            return json.loads(v) if v else {}
        except json.JSONDecodeError:
            return v
    return {} if v is None else v


def row_to_object(row: dict[str, Any]) -> dict[str, Any]:
    """A Parquet row as a canonical conversation object (meta strings decoded)."""
    obj = dict(row)
    obj["meta"] = _meta(obj.get("meta"))
    sessions = obj.get("sessions")
    if isinstance(sessions, list):
        obj["sessions"] = [
            {**s, "turns": [{**t, "meta": _meta(t.get("meta"))} if isinstance(t, dict) else t for t in s["turns"]]}
            if isinstance(s, dict) and isinstance(s.get("turns"), list) else s
            for s in sessions
        ]
    return obj


def read_parquet(path: str | Path) -> Iterator[AdapterItem]:
    """Stream conversations row by row (``line`` = 1-based row number in the file)."""
    for file in list_input_files(path, SUFFIXES):
        f = str(file)
        try:
            pf = pq.ParquetFile(open_input(file))
        except Exception as e:  # noqa: BLE001 — a corrupt file is one error, the others still load
            yield AdapterItem(f, issues=[InputIssue(f, f"unreadable Parquet: {e}")])
            continue
        row_no = 0
        try:
            for batch in pf.iter_batches(batch_size=64):
                for row in batch.to_pylist():
                    row_no += 1
                    yield canonical_item(row_to_object(row), f, row_no)
        except Exception as e:  # noqa: BLE001 — a corrupt row group ends this file, reported with its position
            yield AdapterItem(f, row_no + 1, issues=[InputIssue(f, f"unreadable Parquet after row {row_no}: {e}", line=row_no + 1)])
