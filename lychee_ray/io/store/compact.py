"""Compaction: per-conversation Parquet parts merged into a few files per table."""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path

import pyarrow.parquet as pq

from lychee_ray.io.store.layout import TABLES, StoreLayout, atomic_write_text


def compact(root: str | Path, conversations_per_file: int) -> dict[str, int]:
    """Merge per-conversation Parquet parts into few files per table (one row group each).

    Markers are repointed one by one (atomically) before any part is deleted, so readers always
    find their rows; compacted files no marker refers to any more are removed at the end.
    Run it when no build is writing to the store (the build job's final step does).
    Returns the number of parts merged per table.
    """
    layout = StoreLayout(root)
    markers = list(layout.iter_markers())
    merged: dict[str, int] = {}
    done_parts: list[Path] = []
    for table in TABLES:
        todo = [m for m in markers if table not in (m.get("location") or {})]
        merged[table] = len(todo)
        for start in range(0, len(todo), conversations_per_file):
            chunk = todo[start : start + conversations_per_file]
            name = f"compact-{uuid.uuid4().hex[:12]}.parquet"
            tmp = layout.table_dir(table) / f".{name}.tmp"
            parts = [pq.read_table(layout.part_path(table, m["key"])) for m in chunk]
            with pq.ParquetWriter(tmp, parts[0].schema) as w:
                for part in parts:
                    w.write_table(part.cast(parts[0].schema), row_group_size=max(1, part.num_rows))
            os.replace(tmp, layout.table_dir(table) / name)
            for i, m in enumerate(chunk):
                m.setdefault("location", {})[table] = {"file": name, "row_group": i}
                done_parts.append(layout.part_path(table, m["key"]))
    for m in markers:
        atomic_write_text(layout.marker_path(m["key"]), json.dumps(m, indent=1, sort_keys=True))
    for f in done_parts:
        f.unlink(missing_ok=True)
    referenced = {(t, loc["file"]) for m in layout.iter_markers() for t, loc in (m.get("location") or {}).items()}
    for table in TABLES:
        for f in layout.table_dir(table).glob("compact-*.parquet"):
            if (table, f.name) not in referenced:
                f.unlink(missing_ok=True)
    return merged
