"""Reading a store: visible conversations (by commit marker), one conversation at a time."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from lychee_ray.core.conversation import TURN_SCHEMA
from lychee_ray.core.records import ERROR_SCHEMA, NODE_SCHEMA, RECORD_SCHEMA, SEGMENT_SCHEMA
from lychee_ray.io.store.fs import StorePath, parquet_file, read_parquet
from lychee_ray.io.store.index import read_index
from lychee_ray.config.store import StoreConfig
from lychee_ray.io.store.layout import INDEXES, NotAStoreError, StoreLayout, as_layout, conversation_key


def read_part(root: str | Path | StorePath | StoreLayout, table: str, marker: dict[str, Any],
              columns: list[str] | None = None) -> pa.Table:
    """One conversation's rows of ``table``: its own part, or its row group in a compacted file."""
    layout = as_layout(root)
    loc = (marker.get("location") or {}).get(table)
    if loc is None:
        return read_parquet(layout.marker_part_path(table, marker), columns=columns)
    return parquet_file(layout.table_dir(table) / loc["file"]).read_row_group(loc["row_group"], columns=columns)


def read_segstate(root: str | Path | StorePath | StoreLayout, marker: dict[str, Any]) -> dict[str, Any] | None:
    """The segmenter resume point saved with the marker's generation (None when it has none:
    stores written before incremental builds, or a generation committed without one)."""
    path = as_layout(root).marker_segstate_path(marker)
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


@dataclass
class ConversationData:
    """One committed conversation: its tables and FAISS indexes, loaded on demand."""

    conversation_id: str
    user_id: str
    records: pa.Table
    nodes: pa.Table
    turns: pa.Table
    segments: pa.Table
    record_index: Any
    node_index: Any
    turn_index: Any
    ids: dict[str, Any]

    @property
    def dim(self) -> int:
        return int(self.ids["dim"])

    def nbytes(self) -> int:
        """Approximate resident size (tables + flat index vectors)."""
        vec = 4 * self.dim * (self.records.num_rows + self.nodes.num_rows + self.turns.num_rows)
        return self.records.nbytes + self.nodes.nbytes + self.turns.nbytes + self.segments.nbytes + vec


class MemoryStoreReader:
    """Read side of a store: the manifest, the visible conversations, one conversation at a time."""

    def __init__(self, root: str | Path | StorePath | StoreLayout, settings: StoreConfig | None = None) -> None:
        """``settings``: the ``store`` config section (see :class:`StoreLayout`)."""
        self.layout = as_layout(root, settings)
        self.root = self.layout.root
        if not self.layout.is_store():
            raise NotAStoreError(self.root)
        self.refresh()

    def refresh(self) -> None:
        """Re-scan commit markers (picks up conversations added by a later build)."""
        # Built aside and swapped in whole: threads querying meanwhile never see a half-built map.
        markers = {m["conversation_id"]: m for m in self.layout.iter_markers()}
        by_user: dict[str, list[str]] = {}
        for cid, m in markers.items():
            by_user.setdefault(m.get("user_id") or cid, []).append(cid)
        self.markers, self.by_user = markers, by_user

    def refresh_conversation(self, conversation_id: str) -> dict[str, Any] | None:
        """Re-read one conversation's commit marker (after this process committed it: cheaper than
        :meth:`refresh`); returns it, or None when the conversation is not committed."""
        m = self.layout.read_marker(conversation_key(conversation_id))
        markers, by_user = dict(self.markers), {u: list(c) for u, c in self.by_user.items()}
        old = markers.pop(conversation_id, None)
        if old is not None:
            by_user[old.get("user_id") or conversation_id].remove(conversation_id)
        if m is not None:
            markers[conversation_id] = m
            by_user.setdefault(m.get("user_id") or conversation_id, []).append(conversation_id)
        self.markers, self.by_user = markers, {u: c for u, c in by_user.items() if c}
        return m

    @property
    def manifest(self) -> dict[str, Any]:
        return self.layout.read_manifest()

    def conversation_ids(self) -> list[str]:
        return sorted(self.markers)

    def load(self, conversation_id: str) -> ConversationData:
        """Open one conversation's tables and indexes; KeyError when it is not committed.

        Everything comes from the generation one marker names. When a file of it is gone (a newer
        commit replaced that generation after this reader read the marker), the marker is read
        again and the load repeated on the newer generation; a file missing from the current
        generation is an error.
        """
        m = self.markers.get(conversation_id)
        if m is None:
            raise KeyError(conversation_id)
        while True:
            try:
                return self._load(conversation_id, m)
            except (OSError, RuntimeError):  # RuntimeError: faiss cannot open a missing index file
                fresh = self.layout.read_marker(m["key"])
                if fresh is None or fresh.get("committed_at") == m.get("committed_at"):
                    raise
                self.markers = {**self.markers, conversation_id: fresh}
                m = fresh

    def _load(self, conversation_id: str, m: dict[str, Any]) -> ConversationData:
        tables = {name: read_part(self.layout, name, m) for name in ("records", "nodes", "turns", "segments")}
        idx_dir = self.layout.marker_index_dir(m)
        ids = json.loads((idx_dir / "ids.json").read_text(encoding="utf-8"))
        idx = {name: read_index(idx_dir / f"{name}.faiss") for name in INDEXES}
        return ConversationData(
            conversation_id=conversation_id,
            user_id=m.get("user_id") or conversation_id,
            record_index=idx["records"],
            node_index=idx["nodes"],
            turn_index=idx["turns"],
            ids=ids,
            **tables,
        )

    def read_table(self, name: str) -> pa.Table:
        """A whole table across visible conversations (for reports and checks, not for serving)."""
        parts = [read_part(self.layout, name, m) for m in self.markers.values()]
        schema = {"records": RECORD_SCHEMA, "nodes": NODE_SCHEMA, "turns": TURN_SCHEMA, "segments": SEGMENT_SCHEMA}.get(name)
        if not parts:
            return schema.empty_table() if schema is not None else pa.table({})
        return pa.concat_tables(parts)

    def errors(self) -> pa.Table:
        files = sorted(self.layout.errors_dir.glob("*.parquet"))
        return pa.concat_tables([read_parquet(f) for f in files]) if files else ERROR_SCHEMA.empty_table()
