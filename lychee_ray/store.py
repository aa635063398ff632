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


def build_flat_index(vectors: np.ndarray, dim: int, ids: list[int] | None = None):
    """``IndexIDMap2(IndexFlatIP)``; ids are row positions in the Parquet part (all rows by default)."""
    import faiss

    index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
    if len(vectors):
        row_ids = np.arange(len(vectors), dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
        index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), row_ids)
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
    # Rows of ``nodes`` that have a vector (in node_vectors order); None = every node.
    node_vector_rows: list[int] | None = None
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

    def claim(self, conversation_id: str, run_id: str, where: str) -> str | None:
        """Claim a conversation id for this run; returns the earlier claimant's location when the
        id was already claimed in this run from another input location (a duplicate), else None.

        A claim from the same location is the same input retried (e.g. Ray re-running a task after
        an actor died) and is granted again. Claims of other (earlier, possibly killed) runs do not
        matter, so resume still works. The check-and-create is atomic (``O_EXCL``), so two
        builders racing on one id cannot both win.
        """
        path = self.root / "_claims" / run_id / f"{conversation_key(conversation_id)}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            try:
                first = json.loads(path.read_text(encoding="utf-8")).get("where", "?")
            except (json.JSONDecodeError, OSError):
                first = "?"
            return None if first == where else first
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(json.dumps({"conversation_id": conversation_id, "where": where}))
        return None

    def release_claims(self, run_id: str) -> None:
        """Forget a finished run's claims."""
        shutil.rmtree(self.root / "_claims" / run_id, ignore_errors=True)

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
        rows = {"records": None, "nodes": art.node_vector_rows, "turns": None}
        for name in INDEXES:
            expected = len(ids[name]) if rows[name] is None else len(rows[name])
            if len(vecs[name]) != expected:
                raise ValueError(f"{name}: {len(vecs[name])} vectors for {expected} rows")
            if rows[name] is not None and any(not 0 <= r < len(ids[name]) for r in rows[name]):
                raise ValueError(f"{name}: vector row ids out of range")
            faiss.write_index(build_flat_index(vecs[name], dim, rows[name]), str(dest / f"{name}.faiss"))
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
        def one_or_all(key: str) -> Any:
            vals = sorted({str(m[key]) for m in markers if m.get(key) is not None})
            return vals[0] if len(vals) == 1 else (vals or None)

        manifest = {
            "version": STORE_VERSION,
            "written_at": datetime.now(timezone.utc).isoformat(),
            # what the committed conversations were built with (a list when they differ)
            "backend": one_or_all("backend"),
            "models": {"llm": one_or_all("model"), "embedding": one_or_all("embedder")},
            "embedding_dim": one_or_all("embedding_dim"),
            "fingerprint": one_or_all("fingerprint"),
            **info,
            "counts": {"conversations": len(markers), **totals},
            "tokens": tokens,
        }
        if isinstance(manifest["embedding_dim"], str):
            manifest["embedding_dim"] = int(manifest["embedding_dim"])
        _atomic_write_text(self.root / "manifest.json", json.dumps(manifest, indent=1, sort_keys=True))
        return manifest


def iter_markers(root: str | Path) -> Iterator[dict[str, Any]]:
    """Commit markers of all visible conversations, in key order."""
    for p in sorted((Path(root) / "commits").glob("*.json")):
        try:
            yield json.loads(p.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, FileNotFoundError):
            continue  # a marker being replaced right now; it is not visible yet


def read_part(root: str | Path, table: str, marker: dict[str, Any]) -> pa.Table:
    """One conversation's rows of ``table``: its own part, or its row group in a compacted file."""
    loc = (marker.get("location") or {}).get(table)
    if loc is None:
        return pq.read_table(Path(root) / table / f"{marker['key']}.parquet")
    return pq.ParquetFile(Path(root) / table / loc["file"]).read_row_group(loc["row_group"])


def compact(root: str | Path, conversations_per_file: int) -> dict[str, int]:
    """Merge per-conversation Parquet parts into few files per table (one row group each).

    Markers are repointed one by one (atomically) before any part is deleted, so readers always
    find their rows; compacted files no marker refers to any more are removed at the end.
    Run it when no build is writing to the store (the build job's final step does).
    Returns the number of parts merged per table.
    """
    root = Path(root)
    markers = list(iter_markers(root))
    merged: dict[str, int] = {}
    done_parts: list[Path] = []
    for table in TABLES:
        todo = [m for m in markers if table not in (m.get("location") or {})]
        merged[table] = len(todo)
        for start in range(0, len(todo), conversations_per_file):
            chunk = todo[start : start + conversations_per_file]
            name = f"compact-{uuid.uuid4().hex[:12]}.parquet"
            tmp = root / table / f".{name}.tmp"
            parts = [pq.read_table(root / table / f"{m['key']}.parquet") for m in chunk]
            with pq.ParquetWriter(tmp, parts[0].schema) as w:
                for part in parts:
                    w.write_table(part.cast(parts[0].schema), row_group_size=max(1, part.num_rows))
            os.replace(tmp, root / table / name)
            for i, m in enumerate(chunk):
                m.setdefault("location", {})[table] = {"file": name, "row_group": i}
                done_parts.append(root / table / f"{m['key']}.parquet")
    for m in markers:
        _atomic_write_text(root / "commits" / f"{m['key']}.json", json.dumps(m, indent=1, sort_keys=True))
    for f in done_parts:
        f.unlink(missing_ok=True)
    referenced = {(t, loc["file"]) for m in iter_markers(root) for t, loc in (m.get("location") or {}).items()}
    for table in TABLES:
        for f in (root / table).glob("compact-*.parquet"):
            if (table, f.name) not in referenced:
                f.unlink(missing_ok=True)
    return merged


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
        # Built aside and swapped in whole: threads querying meanwhile never see a half-built map.
        markers = {m["conversation_id"]: m for m in iter_markers(self.root)}
        by_user: dict[str, list[str]] = {}
        for cid, m in markers.items():
            by_user.setdefault(m.get("user_id") or cid, []).append(cid)
        self.markers, self.by_user = markers, by_user

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
        tables = {name: read_part(self.root, name, m) for name in ("records", "nodes", "turns", "segments")}
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
        parts = [read_part(self.root, name, m) for m in self.markers.values()]
        schema = {"records": RECORD_SCHEMA, "nodes": NODE_SCHEMA, "turns": TURN_SCHEMA, "segments": SEGMENT_SCHEMA}.get(name)
        if not parts:
            return schema.empty_table() if schema is not None else pa.table({})
        return pa.concat_tables(parts)

    def errors(self) -> pa.Table:
        files = sorted((self.root / "errors").glob("*.parquet"))
        return pa.concat_tables([pq.read_table(f) for f in files]) if files else ERROR_SCHEMA.empty_table()
