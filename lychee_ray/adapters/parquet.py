"""Canonical Parquet input: rows with :data:`~lychee_ray.models.CONVERSATION_SCHEMA`."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pyarrow.parquet as pq
from pydantic import ValidationError

from ..models import conversation_from_row
from .base import AdapterItem, InputIssue, issues_from_validation, list_input_files, open_input

SUFFIXES = (".parquet",)


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
        for batch in pf.iter_batches(batch_size=64):
            for row in batch.to_pylist():
                row_no += 1
                cid = row.get("conversation_id")
                try:
                    yield AdapterItem(f, row_no, conversation=conversation_from_row(row))
                except (ValidationError, KeyError, TypeError) as e:
                    issues = (
                        issues_from_validation(e, f, row_no, cid)
                        if isinstance(e, ValidationError)
                        else [InputIssue(f, f"bad row: {e}", line=row_no, conversation_id=cid)]
                    )
                    yield AdapterItem(f, row_no, issues=issues)
