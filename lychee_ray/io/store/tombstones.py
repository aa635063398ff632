"""Tombstones: what a forget removed from a conversation, so that no later commit writes it back.

A forget (io/store/forget.py) removes records from the conversation's current generation. The
turns they came from may stay (the user's conversation; ``redact_turns`` blanks them too), so a
later write that encodes those turns again — an append that extends the open tail segment and
re-encodes it, a catch-up, an incremental or full rebuild — could produce the same records anew.
Every commit (:meth:`StoreWriter.commit`, :meth:`StoreWriter.commit_delta`) therefore drops the
records a conversation's tombstones name, under its write lock, before writing anything.

A tombstone names a record by its id and by the SHA-256 of its normalised text (records are
deterministic: the same turns and the same encoder output give the same id and text) — never by the
text itself: ``forgotten/<key>.json`` holds ids and hashes only. A re-encoding that words a record
differently is a new record (docs/erasure.md, "Forgetting": redact the turns to rule that out).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import EvidenceNode, MemoryRecord, SegmentRow
from lychee_ray.io.store.artifacts import ConversationArtifacts, ConversationDelta, TableDelta, TableVectors
from lychee_ray.io.store.layout import StoreLayout, atomic_write_text


def text_hash(text: str) -> str:
    """The tombstone hash of a record's text (case and runs of whitespace do not matter)."""
    return hashlib.sha256(" ".join(text.split()).casefold().encode("utf-8")).hexdigest()


@dataclass
class Tombstones:
    """Forgotten records of one conversation: their ids and text hashes."""

    record_ids: set[str] = field(default_factory=set)
    text_sha256: set[str] = field(default_factory=set)

    def __bool__(self) -> bool:
        return bool(self.record_ids or self.text_sha256)

    def add(self, record_id: str, text: str) -> None:
        self.record_ids.add(record_id)
        self.text_sha256.add(text_hash(text))

    def hits(self, record_id: str, text: str) -> bool:
        """True when a record with this id or text was forgotten."""
        return record_id in self.record_ids or text_hash(text) in self.text_sha256


def read_tombstones(layout: StoreLayout, key: str) -> Tombstones:
    """Conversation ``key``'s tombstones (none when it never had a record forgotten)."""
    path = layout.forgotten_path(key)
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return Tombstones()
    return Tombstones(set(doc.get("record_ids") or []), set(doc.get("text_sha256") or []))


def write_tombstones(layout: StoreLayout, key: str, tombs: Tombstones) -> None:
    """Write conversation ``key``'s tombstones (atomically; the caller holds its write lock)."""
    path = layout.forgotten_path(key)
    if not layout.remote:
        path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_text(path, json.dumps({"record_ids": sorted(tombs.record_ids),
                                        "text_sha256": sorted(tombs.text_sha256)}))


def drop_from_nodes(nodes: list[EvidenceNode], dead: set[str]) -> tuple[list[EvidenceNode], list[int]]:
    """``nodes`` without the ``dead`` record ids, and the positions of the nodes kept. A node left
    without records goes; an event frame that held a dead record goes whole (its text and vector
    are made of its records' text)."""
    out, kept = [], []
    for i, n in enumerate(nodes):
        if not dead.intersection(n.record_ids):
            out.append(n)
            kept.append(i)
            continue
        rest = [r for r in n.record_ids if r not in dead]
        if rest and n.kind != "event_frame":
            out.append(n.model_copy(update={"record_ids": rest}))
            kept.append(i)
    return out, kept


def forget_in_segments(rows: list[dict[str, Any]], dead_per_segment: Counter[str]) -> list[dict[str, Any]]:
    """Segment rows with their forgotten records counted as such: ``num_records`` and the quality
    ``records`` count go down, ``rejected_forgotten`` up (drafts = records + rejected holds)."""
    out = []
    for r in rows:
        n = dead_per_segment.get(r["segment_id"], 0)
        if n:
            q = QualityCounts.from_flat(r.get("quality"))
            if q.drafts:
                q.records -= n
                q.reject("forgotten", n)
            r = {**r, "num_records": max(0, (r.get("num_records") or 0) - n), "quality": list(q.to_flat().items())
                 if q.drafts else r.get("quality")}
        out.append(r)
    return out


def _without_links(r: MemoryRecord, dead: set[str]) -> MemoryRecord:
    """``r`` with no supersedes / conflicts link to a dead record."""
    if not dead.intersection(r.supersedes) and not dead.intersection(r.conflicts_with):
        return r
    return r.model_copy(update={"supersedes": [x for x in r.supersedes if x not in dead],
                                "conflicts_with": [x for x in r.conflicts_with if x not in dead]})


def filter_artifacts(art: ConversationArtifacts, tombs: Tombstones) -> ConversationArtifacts:
    """``art`` without the records ``tombs`` names (their vectors, node entries and links with them)."""
    if not tombs:
        return art
    dead = {r.record_id for r in art.records if tombs.hits(r.record_id, r.text)}
    if not dead:
        return art
    keep = [i for i, r in enumerate(art.records) if r.record_id not in dead]
    records = [_without_links(art.records[i], dead) for i in keep]
    rv = np.asarray(art.record_vectors)
    record_vectors = rv[keep] if rv.ndim == 2 and len(rv) == len(art.records) else rv
    nodes, kept_nodes = drop_from_nodes(art.nodes, dead)
    nv = np.asarray(art.node_vectors)
    vrows = list(range(len(art.nodes))) if art.node_vector_rows is None else list(art.node_vector_rows)
    new_pos = {old: new for new, old in enumerate(kept_nodes)}
    pick = [j for j, row in enumerate(vrows) if row in new_pos]
    node_vectors = nv[pick] if nv.ndim == 2 and len(nv) == len(vrows) else nv
    node_vector_rows = [new_pos[vrows[j]] for j in pick]
    per_seg = Counter(r.segment_id for r in art.records if r.record_id in dead)
    segments = [SegmentRow.model_validate(r) for r in forget_in_segments([s.model_dump() for s in art.segments], per_seg)]
    return dataclasses.replace(art, records=records, record_vectors=record_vectors, nodes=nodes, segments=segments,
                               node_vectors=node_vectors,
                               node_vector_rows=None if art.node_vector_rows is None and len(pick) == len(nodes)
                               else node_vector_rows)


def _take(td: TableDelta, keep: np.ndarray) -> TableDelta:
    """``td``'s upserts at the ``keep`` mask (their vectors follow)."""
    up = td.upserts.filter(pa.array(keep)) if td.upserts.num_rows else td.upserts
    vecs = td.vectors
    if vecs is not None:
        has = keep[vecs.rows] if len(vecs.rows) else np.zeros(0, dtype=bool)
        new_pos = np.cumsum(keep) - 1
        vecs = TableVectors(new_pos[vecs.rows[has]].astype(np.int64), vecs.vectors[has])
    return TableDelta(up, vecs, td.deletes)


def filter_delta(delta: ConversationDelta, tombs: Tombstones) -> ConversationDelta:
    """``delta`` without upserts of the records ``tombs`` names, nor node entries for them."""
    rec = delta.tables.get("records")
    if not tombs or rec is None or rec.upserts.num_rows == 0:
        return delta
    ids = rec.upserts.column("record_id").to_pylist()
    texts = rec.upserts.column("text").to_pylist()
    dead = {i for i, t in zip(ids, texts, strict=True) if tombs.hits(i, t)}
    if not dead:
        return delta
    tables = dict(delta.tables)
    keep = ~np.asarray(pc.is_in(rec.upserts.column("record_id"), value_set=pa.array(sorted(dead))).to_numpy(
        zero_copy_only=False), dtype=bool)
    tables["records"] = _take(rec, keep)
    nd = tables.get("nodes")
    if nd is not None and nd.upserts.num_rows:
        nodes = [EvidenceNode.model_validate(r) for r in nd.upserts.to_pylist()]
        rest, kept = drop_from_nodes(nodes, dead)
        mask = np.zeros(len(nodes), dtype=bool)
        mask[kept] = True
        td = _take(nd, mask)
        if rest:
            td = TableDelta(pa.Table.from_pylist([n.to_row() for n in rest], schema=nd.upserts.schema), td.vectors,
                            td.deletes)
        tables["nodes"] = td
    seg = tables.get("segments")
    if seg is not None and seg.upserts.num_rows:
        per_seg = Counter(s for i, s in zip(ids, rec.upserts.column("segment_id").to_pylist(), strict=True) if i in dead)
        rows = forget_in_segments(seg.upserts.to_pylist(), per_seg)
        tables["segments"] = TableDelta(pa.Table.from_pylist(rows, schema=seg.upserts.schema), seg.vectors, seg.deletes)
    counts = delta.counts.model_copy(update={"records": max(0, delta.counts.records - len(dead))})
    return dataclasses.replace(delta, tables=tables, counts=counts)


__all__ = ["Tombstones", "drop_from_nodes", "forget_in_segments", "filter_artifacts", "filter_delta", "read_tombstones", "text_hash",
           "write_tombstones"]
