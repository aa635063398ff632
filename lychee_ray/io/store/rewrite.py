"""Forgetting part of a row, the store side: records rewritten without an entity's clauses, turns
with them redacted, segment notes without them.

:mod:`.forget` removes whole records; this module changes rows in place, for a forget that names an
entity (``lychee_ray/ingest/forget.py`` decides what the new texts are, :mod:`lychee_ray.text.mentions`
how they are cut):

* :func:`rewrite_records` — each rewritten record's row replaced by its new row (a new id: the id is
  made of the text) and its vector by the new text's; links to it (``supersedes``,
  ``conflicts_with``) follow the new id; in nodes, the new id stands where the old one did in the
  nodes the new record still belongs to (its entities, topics, their pairs, its time, its event
  frame) and the old one goes from the rest (a node left empty goes, with its vector); an event
  frame's text, made of its records' texts, is made again and re-embedded;
* :func:`edit_turns` — turns' content replaced (the redacted text), ``meta`` cleared where asked,
  vectors replaced (zero for a turn redacted whole), and the turn's passages replaced by those of
  the new text;
* :func:`scrub_segments` — segments' ``resolution_state`` and ``error`` notes passed through a
  function (the names the encoder carried from segment to segment);
* :func:`scrub_segstate` — the segmenter's state (the open segment's pending turn texts, its recent
  content words), its texts passed through a function and the words a predicate names dropped; its
  settings (``config``, ``calibration``, modes) are left as they are.

Every function works on the ``tables`` / ``vectors`` dicts a forget publishes as a new base generation
(``Held.rewrite``), changing them in place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lychee_ray.core.keys import normalise_key
from lychee_ray.core.passages import Passage
from lychee_ray.io.store.artifacts import TableVectors
from lychee_ray.io.store.forget import filter_rows

Embed = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class TurnEdit:
    """A turn's new content: ``vector`` None for a turn redacted whole (its vector is zeroed),
    ``passages`` (and their ``passage_vectors``) those of the new text, if it is long."""

    content: str
    clear_meta: bool
    vector: np.ndarray | None
    passages: Sequence[Passage] = ()
    passage_vectors: np.ndarray | None = None


@dataclass
class Rewritten:
    """What :func:`rewrite_records` changed."""

    records: int = 0
    nodes_removed: int = 0
    nodes_changed: int = 0
    new_ids: dict[str, str] = field(default_factory=dict)  # old id -> new id


def _set_vectors(tv: TableVectors, rows: list[int], new: np.ndarray) -> TableVectors:
    """``tv`` with the vectors of ``rows`` replaced by ``new`` (added where a row had none)."""
    if not rows:
        return tv
    vrows, vecs = list(tv.rows.tolist()), tv.vectors.copy()
    at = {r: k for k, r in enumerate(vrows)}
    extra_rows, extra = [], []
    for r, v in zip(rows, np.asarray(new, dtype=np.float32), strict=True):
        if r in at:
            vecs[at[r]] = v
        else:
            extra_rows.append(r)
            extra.append(v)
    if extra:
        vrows += extra_rows
        vecs = np.vstack([vecs, np.asarray(extra, dtype=np.float32)])
        order = np.argsort(np.asarray(vrows), kind="stable")
        return TableVectors(np.asarray(vrows, dtype=np.int64)[order], vecs[order])
    return TableVectors(tv.rows, vecs)


def _belongs(node: dict[str, Any], rec: dict[str, Any]) -> bool:
    """Whether the record ``rec`` still belongs to ``node`` (a time node or event frame: yes; an
    entity, topic or pair node: when the record still has that entity / topic)."""
    kind = node["kind"]
    if kind in ("time", "event_frame"):
        return True
    ents = {normalise_key(e) for e in rec.get("entities") or []}
    tops = {normalise_key(t) for t in rec.get("topics") or []}
    if kind == "entity":
        return node["key"] in ents
    if kind == "topic":
        return node["key"] in tops
    if kind == "entity_topic":
        e, _, t = node["key"].partition("|")
        return e in ents and t in tops
    return True


def _frame_text(old_text: str, old_members: list[str], new_members: list[str]) -> str:
    """An event frame's text made again from its records' texts (cut where the old one was cut)."""
    joined_old = " ".join(old_members)
    joined = " ".join(new_members)
    return joined[: len(old_text)] if len(joined_old) > len(old_text) else joined


def rewrite_records(tables: dict[str, pa.Table], vectors: dict[str, TableVectors],
                    rewrites: dict[str, dict[str, Any]], embed: Embed) -> Rewritten:
    """Replace the records ``rewrites`` names (old id -> new record row) — module doc."""
    out = Rewritten()
    rec = tables["records"]
    rows = rec.to_pylist()
    old_text = {r["record_id"]: r["text"] for r in rows}
    new_ids = {old: new["record_id"] for old, new in rewrites.items() if old in old_text}
    if not new_ids:
        return out
    positions: list[int] = []
    for i, r in enumerate(rows):
        if r["record_id"] in new_ids:
            rows[i] = r = dict(rewrites[r["record_id"]])
            positions.append(i)
        for col in ("supersedes", "conflicts_with"):
            if r.get(col) and new_ids.keys() & set(r[col]):
                r[col] = [new_ids.get(x, x) for x in r[col]]
    tables["records"] = pa.Table.from_pylist(rows, schema=rec.schema)
    by_new = {rows[i]["record_id"]: rows[i] for i in positions}
    text = {r["record_id"]: r["text"] for r in rows}

    nodes = tables["nodes"].to_pylist()
    keep = np.ones(len(nodes), dtype=bool)
    frames: list[int] = []
    for j, n in enumerate(nodes):
        ids = list(n.get("record_ids") or [])
        if not new_ids.keys() & set(ids):
            continue
        now = [new_ids.get(x, x) for x in ids if x not in new_ids or _belongs(n, by_new[new_ids[x]])]
        if not now:
            keep[j] = False
            continue
        if n["kind"] == "event_frame":
            n["text"] = _frame_text(n["text"], [old_text.get(x, "") for x in ids], [text.get(x, "") for x in now])
            frames.append(j)
        n["record_ids"] = now
        out.nodes_changed += 1
    out.nodes_removed = int((~keep).sum())
    node_schema = tables["nodes"].schema
    new_pos = np.cumsum(keep) - 1
    tables["nodes"], node_vectors = filter_rows(pa.Table.from_pylist(nodes, schema=node_schema), vectors["nodes"], keep)
    assert node_vectors is not None  # nodes are an indexed table
    vectors["nodes"] = node_vectors
    framed = [int(new_pos[j]) for j in frames if keep[j]]
    has_vector = set(vectors["nodes"].rows.tolist())
    framed = [j for j in framed if j in has_vector]  # a frame too small to be embedded stays without one

    texts = [rows[i]["text"] for i in positions]
    frame_texts = tables["nodes"].column("text").to_pylist()
    fresh = np.asarray(embed(texts + [frame_texts[j] for j in framed]), dtype=np.float32)
    vectors["records"] = _set_vectors(vectors["records"], positions, fresh[: len(positions)])
    vectors["nodes"] = _set_vectors(vectors["nodes"], framed, fresh[len(positions):])
    out.records = len(positions)
    out.new_ids = new_ids
    return out


def edit_turns(tables: dict[str, pa.Table], vectors: dict[str, TableVectors], edits: dict[str, TurnEdit],
               dim: int) -> list[str]:
    """Apply ``edits`` (turn id -> its new content) — module doc; returns the turn ids changed."""
    turns = tables["turns"]
    if not edits or not turns.num_rows:
        return []
    rows = turns.to_pylist()
    changed: list[int] = []
    for i, r in enumerate(rows):
        e = edits.get(r["turn_id"])
        if e is None:
            continue
        r["content"] = e.content
        if e.clear_meta and "meta" in r:
            r["meta"] = None
        changed.append(i)
    tables["turns"] = pa.Table.from_pylist(rows, schema=turns.schema)
    ids = [rows[i]["turn_id"] for i in changed]
    zero = np.zeros(dim, dtype=np.float32)
    vectors["turns"] = _set_vectors(vectors["turns"], changed, np.asarray(
        [edits[t].vector if edits[t].vector is not None else zero for t in ids], dtype=np.float32).reshape(-1, dim))
    p = tables.get("passages")
    if p is not None:
        gone = np.isin(np.asarray(p.column("turn_id").to_pylist(), dtype=object), np.asarray(ids, dtype=object))
        kept, kept_vecs = filter_rows(p, vectors.get("passages"), ~gone) if p.num_rows else (p, vectors.get("passages"))
        new = [q for t in ids for q in edits[t].passages]
        if new:
            vecs = np.concatenate([np.asarray(edits[t].passage_vectors, dtype=np.float32).reshape(-1, dim)
                                   for t in ids if edits[t].passages])
            added = pa.Table.from_pylist([q.row() for q in new], schema=p.schema)
            base = kept_vecs if kept_vecs is not None else TableVectors.empty(dim)
            kept_vecs = TableVectors(np.concatenate([base.rows, np.arange(len(new), dtype=np.int64) + kept.num_rows]),
                                     np.vstack([base.vectors, vecs]))
            kept = pa.concat_tables([kept, added])
        tables["passages"] = kept
        if kept_vecs is not None:
            vectors["passages"] = kept_vecs
    return ids


def scrub_segments(tables: dict[str, pa.Table], fix: Callable[[str], str]) -> int:
    """Segments' ``resolution_state`` and ``error`` through ``fix``; returns the rows changed."""
    seg = tables["segments"]
    rows = seg.to_pylist()
    n = 0
    for r in rows:
        before = (r.get("resolution_state"), r.get("error"))
        for col in ("resolution_state", "error"):
            if r.get(col):
                r[col] = fix(r[col])
        n += (r.get("resolution_state"), r.get("error")) != before
    if n:
        tables["segments"] = pa.Table.from_pylist(rows, schema=seg.schema)
    return n


# the segmenter state's keys that hold its settings, not text of the conversation
_SEGSTATE_SETTINGS = frozenset({"config", "calibration", "method", "encoding", "mode", "fixed_mode", "version"})


def _scrub(value: Any, fix: Callable[[str], str], drop: Callable[[str], bool]) -> Any:
    if isinstance(value, str):
        return fix(value)
    if isinstance(value, list):
        return [_scrub(v, fix, drop) for v in value if not (isinstance(v, str) and drop(v))]
    if isinstance(value, dict):
        return {k: _scrub(v, fix, drop) for k, v in value.items()}
    return value


def scrub_segstate(state: dict[str, Any] | None, fix: Callable[[str], str], drop: Callable[[str], bool]
                   ) -> dict[str, Any] | None:
    """``state`` (a conversation's segmenter state) with its texts through ``fix`` and the words
    ``drop`` names left out (module doc)."""
    if not state or not isinstance(state.get("segmenter"), dict):
        return state
    seg = {k: v if k in _SEGSTATE_SETTINGS else _scrub(v, fix, drop) for k, v in state["segmenter"].items()}
    return {**state, "segmenter": seg}


__all__ = ["Embed", "Rewritten", "TurnEdit", "edit_turns", "rewrite_records", "scrub_segments", "scrub_segstate"]
