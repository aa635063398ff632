"""Memory store: Parquet tables + per-conversation FAISS indexes, committed atomically.

Layout (DESIGN §2)::

    ROOT/manifest.json
    ROOT/records/<key>.parquet   nodes/  turns/  segments/  usage/     one part per conversation
    ROOT/errors/<run>-<n>.parquet                                     quarantined inputs / stages
    ROOT/index/<key>/{records,nodes,turns}.faiss + ids.json           IndexIDMap2(IndexFlatIP)
    ROOT/commits/<key>.json                                           commit marker (last write)

A conversation is visible to readers only through its commit marker. A commit stages every file,
removes the old marker, moves the files into place and writes the new marker last, so a reader
never sees half a conversation and a crash leaves at worst an invisible, re-buildable one.
FAISS ids are row positions in the matching Parquet part; ``ids.json`` repeats the string ids so
that the mapping can be checked.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from .models import TURN_SCHEMA
from .records import (
    ERROR_SCHEMA,
    NODE_SCHEMA,
    RECORD_SCHEMA,
    SEGMENT_SCHEMA,
    EvidenceNode,
    MemoryRecord,
    SegmentRow,
    nodes_table,
    records_table,
    segments_table,
)

STORE_VERSION = 1
TABLES = ("records", "nodes", "turns", "segments", "usage")
INDEXES = ("records", "nodes", "turns")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def conversation_key(conversation_id: str) -> str:
    """File-system-safe, collision-free name for a conversation id."""
    digest = hashlib.sha1(conversation_id.encode("utf-8")).hexdigest()[:10]
    return f"{_UNSAFE.sub('_', conversation_id)[:80]}-{digest}"


def _atomic_write_text(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def build_flat_index(vectors: np.ndarray, dim: int):
    """``IndexIDMap2(IndexFlatIP)`` with ids = row positions (exact inner product on unit vectors)."""
    import faiss

    index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
    if len(vectors):
        index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), np.arange(len(vectors), dtype=np.int64))
    return index


@dataclass
class ConversationArtifacts:
    """Everything one conversation build produces, ready to commit."""

    conversation_id: str
    user_id: str
    records: list[MemoryRecord]
    nodes: list[EvidenceNode]
    turns: pa.Table
    segments: list[SegmentRow]
    usage: pa.Table
    record_vectors: np.ndarray
    node_vectors: np.ndarray
    turn_vectors: np.ndarray
    fingerprint: str
    extra: dict[str, Any] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        return {
            "turns": self.turns.num_rows,
            "segments": len(self.segments),
            "failed_segments": sum(s.status == "failed" for s in self.segments),
            "records": len(self.records),
            "nodes": len(self.nodes),
        }


class MemoryStoreWriter:
    """Writes conversations into a store directory, one atomic commit each."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        for d in (*TABLES, "errors", "index", "commits", "_staging"):
            (self.root / d).mkdir(parents=True, exist_ok=True)

    def commit_marker(self, conversation_id: str) -> dict[str, Any] | None:
        """The committed marker of a conversation, or None when it is not (fully) committed."""
        p = self.root / "commits" / f"{conversation_key(conversation_id)}.json"
        try:
            return json.loads(p.read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def is_committed(self, conversation_id: str, fingerprint: str | None = None) -> bool:
        m = self.commit_marker(conversation_id)
        return m is not None and (fingerprint is None or m.get("fingerprint") == fingerprint)

    def commit(self, art: ConversationArtifacts) -> dict[str, Any]:
        """Stage, then atomically publish one conversation; returns the commit marker."""
        key = conversation_key(art.conversation_id)
        stage = self.root / "_staging" / f"{key}.{uuid.uuid4().hex}"
        (stage / "index").mkdir(parents=True)
        try:
            tables = {
                "records": records_table(art.records),
                "nodes": nodes_table(art.nodes),
                "turns": art.turns.cast(TURN_SCHEMA),
                "segments": segments_table(art.segments),
                "usage": art.usage,
            }
            for name, table in tables.items():
                pq.write_table(table, stage / f"{name}.parquet")
            self._write_indexes(stage / "index", art)
            marker = {
                "conversation_id": art.conversation_id,
                "user_id": art.user_id,
                "key": key,
                "fingerprint": art.fingerprint,
                "committed_at": datetime.now(timezone.utc).isoformat(),
                "counts": art.counts(),
                **art.extra,
            }
            marker_path = self.root / "commits" / f"{key}.json"
            marker_path.unlink(missing_ok=True)  # invisible from here until the new marker lands
            for name in TABLES:
                os.replace(stage / f"{name}.parquet", self.root / name / f"{key}.parquet")
            final_index = self.root / "index" / key
            if final_index.exists():
                shutil.rmtree(final_index)
            os.replace(stage / "index", final_index)
            _atomic_write_text(marker_path, json.dumps(marker, indent=1, sort_keys=True))
            return marker
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    def _write_indexes(self, dest: Path, art: ConversationArtifacts) -> None:
        import faiss

        dim = int(art.turn_vectors.shape[1]) if art.turn_vectors.ndim == 2 else 0
        ids = {
            "records": [r.record_id for r in art.records],
            "nodes": [n.node_id for n in art.nodes],
            "turns": art.turns.column("turn_id").to_pylist(),
        }
        vecs = {"records": art.record_vectors, "nodes": art.node_vectors, "turns": art.turn_vectors}
        for name in INDEXES:
            if len(vecs[name]) != len(ids[name]):
                raise ValueError(f"{name}: {len(vecs[name])} vectors for {len(ids[name])} rows")
            faiss.write_index(build_flat_index(vecs[name], dim), str(dest / f"{name}.faiss"))
        (dest / "ids.json").write_text(json.dumps({"dim": dim, **ids}), encoding="utf-8")

    def write_errors(self, rows: list[dict[str, Any]], run_id: str | None = None) -> Path | None:
        """Append error rows (conversation_id, stage, message, file, line) as one Parquet part."""
        if not rows:
            return None
        now = datetime.now(timezone.utc).isoformat()
        full = [{"time": now, "file": None, "line": None, "conversation_id": None, **r} for r in rows]
        path = self.root / "errors" / f"{run_id or 'run'}-{uuid.uuid4().hex[:8]}.parquet"
        pq.write_table(pa.Table.from_pylist(full, schema=ERROR_SCHEMA), path)
        return path

    def write_manifest(self, info: dict[str, Any]) -> dict[str, Any]:
        """Summarise every committed conversation into ``manifest.json`` (plus ``info``)."""
        markers = list(iter_markers(self.root))
        totals: dict[str, int] = {}
        tokens: dict[str, dict[str, int]] = {}
        for m in markers:
            for k, v in m.get("counts", {}).items():
                totals[k] = totals.get(k, 0) + int(v)
            for stage, t in (m.get("tokens") or {}).items():
                agg = tokens.setdefault(stage, {})
                for k, v in t.items():
                    agg[k] = agg.get(k, 0) + int(v)
        manifest = {
            "version": STORE_VERSION,
            "written_at": datetime.now(timezone.utc).isoformat(),
            **info,
            "counts": {"conversations": len(markers), **totals},
            "tokens": tokens,
        }
        _atomic_write_text(self.root / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
        return manifest


def iter_markers(root: str | Path) -> Iterator[dict[str, Any]]:
    """Commit markers of all visible conversations, in key order."""
    for p in sorted((Path(root) / "commits").glob("*.json")):
        try:
            yield json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, FileNotFoundError):
            continue  # a marker being replaced right now; it is not visible yet


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

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        if not (self.root / "commits").is_dir():
            raise FileNotFoundError(f"not a memory store (no commits/): {self.root}")
        self.refresh()

    def refresh(self) -> None:
        """Re-scan commit markers (picks up conversations added by a later build)."""
        self.markers = {m["conversation_id"]: m for m in iter_markers(self.root)}
        self.by_user: dict[str, list[str]] = {}
        for cid, m in self.markers.items():
            self.by_user.setdefault(m.get("user_id") or cid, []).append(cid)

    @property
    def manifest(self) -> dict[str, Any]:
        p = self.root / "manifest.json"
        return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}

    def conversation_ids(self) -> list[str]:
        return sorted(self.markers)

    def load(self, conversation_id: str) -> ConversationData:
        """Open one conversation's tables and indexes; KeyError when it is not committed."""
        import faiss

        m = self.markers.get(conversation_id)
        if m is None:
            raise KeyError(conversation_id)
        key = m["key"]
        tables = {name: pq.read_table(self.root / name / f"{key}.parquet") for name in ("records", "nodes", "turns", "segments")}
        idx_dir = self.root / "index" / key
        ids = json.loads((idx_dir / "ids.json").read_text(encoding="utf-8"))
        idx = {name: faiss.read_index(str(idx_dir / f"{name}.faiss")) for name in INDEXES}
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
        parts = [pq.read_table(self.root / name / f"{m['key']}.parquet") for m in self.markers.values()]
        schema = {"records": RECORD_SCHEMA, "nodes": NODE_SCHEMA, "turns": TURN_SCHEMA, "segments": SEGMENT_SCHEMA}.get(name)
        if not parts:
            return schema.empty_table() if schema is not None else pa.table({})
        return pa.concat_tables(parts)

    def errors(self) -> pa.Table:
        files = sorted((self.root / "errors").glob("*.parquet"))
        return pa.concat_tables([pq.read_table(f) for f in files]) if files else ERROR_SCHEMA.empty_table()
