"""Writing a store: one atomic commit per conversation, error parts and the manifest."""

from __future__ import annotations

import json
import os
import shutil
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lychee_ray.core.conversation import TURN_SCHEMA
from lychee_ray.core.records import (
    ERROR_SCHEMA,
    EvidenceNode,
    MemoryRecord,
    SegmentRow,
    nodes_table,
    records_table,
    segments_table,
)
from lychee_ray.io.store.index import build_flat_index
from lychee_ray.io.store.layout import (
    INDEXES,
    STORE_VERSION,
    TABLES,
    StoreLayout,
    atomic_write_text,
    conversation_key,
    iter_markers,
)


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
        self.layout = StoreLayout(root)
        self.root = self.layout.root
        self.layout.create()

    def commit_marker(self, conversation_id: str) -> dict[str, Any] | None:
        """The committed marker of a conversation, or None when it is not (fully) committed."""
        return self.layout.read_marker(conversation_key(conversation_id))

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
        path = self.layout.claim_path(run_id, conversation_key(conversation_id))
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
        shutil.rmtree(self.layout.claims_dir(run_id), ignore_errors=True)

    def commit(self, art: ConversationArtifacts) -> dict[str, Any]:
        """Stage, then atomically publish one conversation; returns the commit marker."""
        key = conversation_key(art.conversation_id)
        stage = self.layout.staging_dir / f"{key}.{uuid.uuid4().hex}"
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
            marker_path = self.layout.marker_path(key)
            marker_path.unlink(missing_ok=True)  # invisible from here until the new marker lands
            for name in TABLES:
                os.replace(stage / f"{name}.parquet", self.layout.part_path(name, key))
            final_index = self.layout.index_dir(key)
            if final_index.exists():
                shutil.rmtree(final_index)
            os.replace(stage / "index", final_index)
            atomic_write_text(marker_path, json.dumps(marker, indent=1, sort_keys=True))
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
        path = self.layout.errors_dir / f"{run_id or 'run'}-{uuid.uuid4().hex[:8]}.parquet"
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
        atomic_write_text(self.layout.manifest_path, json.dumps(manifest, indent=1, sort_keys=True))
        return manifest
