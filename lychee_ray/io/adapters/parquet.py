"""Canonical Parquet input: rows with :data:`~lychee_ray.core.conversation.CONVERSATION_SCHEMA`.

Rows go through the same cleaning and repairs as canonical JSONL lines
(:func:`~lychee_ray.io.adapters.base.canonical_item`).
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Iterator

import pyarrow.parquet as pq

from lychee_ray.core.conversation import conversation_object_from_row
from lychee_ray.io.adapters.adapter import Adapter, never
from lychee_ray.io.adapters.base import AdapterItem, InputIssue, canonical_item, list_input_files, open_input

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
        batches = pf.iter_batches(batch_size=64)
        while True:
            try:  # only reading is guarded: a corrupt row group ends this file, reported with its position
                rows = next(batches).to_pylist()
            except StopIteration:
                break
            except Exception as e:  # noqa: BLE001
                yield AdapterItem(f, row_no + 1, issues=[InputIssue(f, f"unreadable Parquet after row {row_no}: {e}", line=row_no + 1)])
                break
            for row in rows:
                row_no += 1
                yield canonical_item(conversation_object_from_row(row), f, row_no)


def count_parquet(path: str) -> int:
    """Rows of one Parquet file (a corrupt file counts one: the build reports it)."""
    try:
        return pq.ParquetFile(open_input(path)).metadata.num_rows
    except Exception:  # noqa: BLE001 — a corrupt file is reported by the build, not here
        return 1


ADAPTER = Adapter("parquet", "Parquet", SUFFIXES, read_parquet, never, count_parquet, magic=b"PAR1")
