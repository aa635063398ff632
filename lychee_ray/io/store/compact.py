"""Compaction: per-conversation Parquet parts merged into a few files per table."""

from __future__ import annotations

import functools
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar
from collections.abc import Callable

import pyarrow as pa

from lychee_ray.io.store.fs import parquet_writer, replace, temp_sibling
from lychee_ray.io.store.remote_path import StorePath
from lychee_ray.io.store.layout import StoreLayout, as_layout
from lychee_ray.io.store.tables import table_names
from lychee_ray.io.store.marker import CommitMarker, TableLocation
from lychee_ray.io.store.locks import ConversationDeleting, conversation_write_lock, store_lock
from lychee_ray.io.store.reader import read_base_part

T = TypeVar("T")


def compact(root: str | Path | StorePath | StoreLayout, conversations_per_file: int) -> dict[str, int]:
    """Merge per-conversation Parquet parts into few files per table (one row group each).

    Each marker is repointed (atomically) under its conversation's write lock, and only when the
    conversation was not committed again meanwhile (an append's newer generation wins; its rows
    in the new file are then never referenced). A part is deleted only after its marker was
    repointed, so readers always find their rows; compacted files no marker refers to any more
    are removed at the end. Holds the store lock (erasure rewrites compacted files too).
    Returns the number of parts merged per table.
    """
    layout = as_layout(root)
    with store_lock(layout):
        markers = list(layout.iter_markers())
        merged: dict[str, int] = {}
        moved: dict[str, dict[str, TableLocation]] = {}  # key -> table -> location
        for table in table_names():
            todo = [m for m in markers if table not in m.location]
            merged[table] = len(todo)
            for start in range(0, len(todo), conversations_per_file):
                chunk, parts = [], []
                group = todo[start : start + conversations_per_file]
                for m, part in zip(group, _map(layout, functools.partial(_read, layout, table), group), strict=False):
                    if part is None:  # an append committed a newer generation meanwhile: next time
                        merged[table] -= 1
                    else:
                        parts.append(part)
                        chunk.append(m)
                if not parts:
                    continue
                name = f"compact-{uuid.uuid4().hex[:12]}.parquet"
                final = layout.table_dir(table) / name
                tmp = temp_sibling(final, "new")  # a fresh name no marker refers to yet: visible whole or not at all
                with parquet_writer(tmp, parts[0].schema) as w:
                    for part in parts:
                        w.write_table(part.cast(parts[0].schema), row_group_size=max(1, part.num_rows))
                replace(tmp, final)
                for i, m in enumerate(chunk):
                    moved.setdefault(m.key, {})[table] = TableLocation(file=name, row_group=i)
        todo_markers = [m for m in markers if m.key in moved]
        _map(layout, lambda m: _repoint(layout, m, moved[m.key]), todo_markers)
        referenced = {(t, loc.file) for m in layout.iter_markers() for t, loc in m.location.items()}
        for table in table_names():
            for f in layout.table_dir(table).glob("compact-*.parquet"):
                if (table, f.name) not in referenced:
                    f.unlink(missing_ok=True)
    return merged


def _read(layout: StoreLayout, table: str, marker: CommitMarker) -> pa.Table | None:
    """A conversation's own part of ``table`` (None: gone, a newer generation replaced it)."""
    try:
        return read_base_part(layout, table, marker)  # (a part older than a column: the column as nulls)
    except FileNotFoundError:
        return None


def _map(layout: StoreLayout, fn: Callable[[Any], T], items: list[Any]) -> list[T]:
    """``fn`` over ``items``: in order locally; ``store.io_threads`` at a time on an object store,
    where each read, lease and marker write is a round trip of tens of milliseconds."""
    if not layout.remote or len(items) < 2:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(max_workers=min(layout.settings.io_threads, len(items))) as pool:
        return list(pool.map(fn, items))


def _repoint(layout: StoreLayout, seen: CommitMarker, locations: dict[str, TableLocation]) -> bool:
    """Point one conversation's marker at its compacted row groups, then delete its own parts;
    False (nothing changed) when it was committed again or is being erased since ``seen`` was read."""
    try:
        with conversation_write_lock(layout, seen.conversation_id):
            current = layout.read_marker(seen.key)
            if current is None or not seen.same_commit(current):
                return False
            layout.write_marker(current.with_location(locations))
    except ConversationDeleting:
        return False
    for table in locations:
        layout.marker_part_path(table, seen).unlink(missing_ok=True)
    return True
