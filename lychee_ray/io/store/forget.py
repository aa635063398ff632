"""Forgetting, the store side: one conversation's generation without some of its records.

The operation (which records, locks, the commit) is ``lychee_ray/ingest/forget.py``; this module
holds what it does to the rows, so that it stays plain Arrow work:

* :func:`without_records` — the conversation's tables and vectors without the records (and their
  vectors), their entries in nodes (an event frame holding one goes whole: its text and vector are
  made of its records' text; a node left without records goes), links to them from other records'
  ``supersedes`` / ``conflicts_with`` (records rewritten in part, turns redacted: :mod:`.rewrite`);
* :func:`filter_rows` — a table's rows at a mask, with their vectors renumbered;
* :func:`drop_old_rows` — the rows the conversation's previous commit had in shared compacted files,
  rewritten away (as erasure does: io/store/erase.py);
* :func:`log_forget` — the manifest: counts recomputed, one ``forgets`` entry (hashes, never ids
  or content).
"""

from __future__ import annotations

import hashlib
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lychee_ray.core.records import NODE_SCHEMA, EvidenceNode
from lychee_ray.io.store.artifacts import TableVectors
from lychee_ray.io.store.erase import _COMPUTED, _ID_HASH_CHARS, _rewrite_compacted, _Tally
from lychee_ray.io.store.layout import StoreLayout
from lychee_ray.io.store.marker import CommitMarker, MarkerCounts
from lychee_ray.io.store.reader import ConversationData
from lychee_ray.io.store.tables import indexed_tables
from lychee_ray.io.store.tombstones import drop_from_nodes, forget_in_segments
from lychee_ray.io.store.writer import StoreWriter

# what a redacted turn's content becomes (the turn stays: its id, speaker and time hold the
# conversation's shape, which segments and records of other turns refer to)
REDACTED = "[forgotten]"


@dataclass
class Removed:
    """What :func:`without_records` took out of one conversation."""

    records: int = 0
    nodes_removed: int = 0
    nodes_changed: int = 0
    sources: set[str] = field(default_factory=set)  # the removed records' source turns


def filter_rows(table: pa.Table, vectors: TableVectors | None, keep: np.ndarray) -> tuple[pa.Table, TableVectors | None]:
    """Rows at the ``keep`` mask, and their vectors (renumbered to the new row positions)."""
    out = table.filter(pa.array(keep, type=pa.bool_())) if table.num_rows else table
    if vectors is None:
        return out, None
    has = keep[vectors.rows] if len(vectors.rows) else np.zeros(0, dtype=bool)
    new_pos = np.cumsum(keep) - 1
    return out, TableVectors(new_pos[vectors.rows[has]].astype(np.int64), vectors.vectors[has])


def without_records(data: ConversationData, dead: set[str]
                    ) -> tuple[dict[str, pa.Table], dict[str, TableVectors], Removed]:
    """``data``'s tables and indexed tables' vectors without the ``dead`` records (module doc);
    :attr:`Removed.sources` names their source turns."""
    tables = dict(data.tables)
    vectors = {s.name: data.table_vectors(s.name) for s in indexed_tables()}
    removed = Removed()
    rec = tables["records"]
    hit = np.asarray(pc.fill_null(pc.is_in(rec.column("record_id"), value_set=pa.array(sorted(dead), pa.string())),
                                  False).to_numpy(zero_copy_only=False), dtype=bool)
    removed.records = int(hit.sum())
    removed.sources = {t for ts in rec.filter(pa.array(hit)).column("source_turn_ids").to_pylist() for t in (ts or [])}
    per_seg = Counter(rec.filter(pa.array(hit)).column("segment_id").to_pylist())
    seg = tables["segments"]
    tables["segments"] = pa.Table.from_pylist(forget_in_segments(seg.to_pylist(), per_seg), schema=seg.schema)
    rec, vectors["records"] = filter_rows(rec, vectors["records"], ~hit)  # type: ignore[assignment]  # indexed
    rows = rec.to_pylist()
    for r in rows:  # links to a forgotten record go with it
        for col in ("supersedes", "conflicts_with"):
            if r.get(col) and dead.intersection(r[col]):
                r[col] = [x for x in r[col] if x not in dead]
    tables["records"] = pa.Table.from_pylist(rows, schema=rec.schema) if rows else rec

    node_rows = tables["nodes"].to_pylist()
    nodes = [EvidenceNode.model_validate({**n, "record_ids": n.get("record_ids") or []}) for n in node_rows]
    rest, kept = drop_from_nodes(nodes, dead)
    keep = np.zeros(len(nodes), dtype=bool)
    keep[kept] = True
    _, vectors["nodes"] = filter_rows(tables["nodes"], vectors["nodes"], keep)  # type: ignore[assignment]  # indexed
    removed.nodes_removed = len(nodes) - len(rest)
    removed.nodes_changed = sum(1 for i, n in zip(kept, rest, strict=True) if n.record_ids != nodes[i].record_ids)
    tables["nodes"] = pa.Table.from_pylist([n.to_row() for n in rest], schema=tables["nodes"].schema) if rest \
        else NODE_SCHEMA.empty_table().cast(tables["nodes"].schema)

    return tables, vectors, removed


def counts_after(marker: CommitMarker, tables: dict[str, pa.Table]) -> MarkerCounts:
    """``marker``'s counts with the records and nodes of ``tables``."""
    return marker.counts.model_copy(update={"records": tables["records"].num_rows, "nodes": tables["nodes"].num_rows})


def drop_old_rows(layout: StoreLayout, old: CommitMarker) -> int:
    """Rewrite away the rows ``old`` (a commit of a conversation replaced since by a new base
    generation) had in shared compacted files; the caller holds the store lock. Returns the number
    of files rewritten or removed."""
    if not old.location:
        return 0
    tally = _Tally()
    journal: dict[str, Any] = {"location": {t: loc.model_dump() for t, loc in old.location.items()}}
    _rewrite_compacted(layout, [journal], set(), tally)
    return tally.files_rewritten + tally.files_removed


def log_forget(layout: StoreLayout, at: str, selector: str, ident: str, records: int, rewritten: int = 0,
               turns: int = 0) -> None:
    """Counts recomputed from the markers; one ``forgets`` entry in the manifest (time, selector,
    records removed, records rewritten, turns redacted, a hash of what was named — never an id or
    any content)."""
    old = layout.read_manifest()
    log = list(old.get("forgets") or [])
    log.append({"at": at, "selector": selector, "records": records, "rewritten": rewritten, "turns": turns,
                "id_sha256": hashlib.sha256(ident.encode("utf-8")).hexdigest()[:_ID_HASH_CHARS]})
    info = {k: v for k, v in old.items() if k not in _COMPUTED}
    info["forgets"] = log
    StoreWriter(layout).write_manifest(info)


__all__ = ["REDACTED", "Removed", "counts_after", "drop_old_rows", "filter_rows", "log_forget", "without_records"]
