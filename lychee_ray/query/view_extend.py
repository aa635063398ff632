"""A search view extended by appended turns, at the cost of the new turns.

A queued append (ingest/append/queued.py) commits a delta of new turn rows only. Building the conversation's
:class:`~lychee_ray.query.view.ConversationView` again from scratch for it costs the whole
conversation (columns, BM25, term sets, line token counts: ~2 s at 10,000 turns, on every replica,
for every appended turn). :func:`extend_with_turns` instead keeps the old view's records, nodes and
their indexes as they are, and adds the new turns to the turn columns, vectors and both BM25
indexes (and the passages of the new turns that are long: query/view_passages.py). The result
equals :meth:`ConversationView.from_data` on the same data, field by field
(``tests/query/test_view_extend.py``).

Any other change (records, nodes or segments touched: an encoding, a flush) is not an extension;
the cache then builds the view again — or, with ``allow_lag``, takes the old view's records and
nodes with *all* turns of the new commit (a *lagging* view, ``ConversationView.lagging``) while it
rebuilds in the background (query/cache.py). A commit that changed or removed a turn the view
shows is never extended either way, nor one of another lineage (the id was erased and re-created:
its records must never be shown with the erased conversation's).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pyarrow as pa

from lychee_ray.core.passages import PASSAGE_SCHEMA
from lychee_ray.io.store import ConversationData
from lychee_ray.query.view import ConversationView, TurnColumns, flat_vectors, view_nbytes
from lychee_ray.query.view_passages import PassageColumns, lexical_units

# tables a turns-only append leaves as they were (load_generation hands back the same objects)
_UNCHANGED = ("records", "nodes", "segments")
DERIVED_TABLES = frozenset(_UNCHANGED)  # what an encoding changes: a view needs building again


def appended_turns(view: ConversationView, data: ConversationData) -> int | None:
    """How many turns ``data`` adds after the ones ``view`` shows, when it keeps those as they are
    (None when it changed or removed one)."""
    old = view.source
    if old is None or not _same_lineage(old, data):
        return None
    n, turns = view.num_turns, data.turns
    if turns.num_rows < n or not turns.slice(0, n).equals(old.turns):
        return None
    return turns.num_rows - n


def appended_passages(view: ConversationView, data: ConversationData) -> pa.Table | None:
    """The passage rows ``data`` adds after the ones ``view`` shows (None when it changed or removed one)."""
    table = data.tables.get("passages")
    m = view.num_passages
    if table is None:
        return PASSAGE_SCHEMA.empty_table() if m == 0 else None
    if table.num_rows < m or table.column("passage_id").slice(0, m).to_pylist() != view.passages.ids:
        return None
    return table.slice(m)


def _same_lineage(old: ConversationData, new: ConversationData) -> bool:
    """Whether two loads are of one conversation history: an id erased and re-created since (another
    lineage) shares nothing with the view, even when its first turns are the same."""
    return old.marker is not None and new.marker is not None and new.marker.same_lineage(old.marker)


def derived_unchanged(view: ConversationView, data: ConversationData) -> bool:
    """Whether ``data`` has the records, nodes and segments ``view`` was built from (the same
    objects: load_generation hands back a table no delta touched as it was)."""
    old = view.source
    return (old is not None and not view.lagging
            and all(name in data.tables and data.tables[name] is old.tables.get(name) for name in _UNCHANGED))


def extend_with_turns(view: ConversationView, data: ConversationData, committed_at: str | None, *,
                      allow_lag: bool = False) -> ConversationView | None:
    """``view`` with the turns ``data`` appends to it (see the module docstring), or None when
    ``data`` changes more than that; with ``allow_lag`` a changed records/nodes/segments part is
    allowed too and kept from ``view`` (the result is lagging). ``view`` itself is not changed
    (searches may be using it)."""
    k = appended_turns(view, data)
    if k is None:
        return None
    exact = derived_unchanged(view, data)
    if not exact and not allow_lag:
        return None
    n = view.num_turns
    new_passages = appended_passages(view, data)
    if new_passages is None:
        return None
    split = frozenset(new_passages.column("turn_id").to_pylist())
    tc = TurnColumns.of(data.turns.slice(n).to_pydict(), view.segment_of, split=split)
    if any(t in view.turn_pos for t in tc.ids) or (exact and not view.missing_sources.isdisjoint(tc.ids)):
        return None  # a repeated id, or a record citing a new turn: what from_data would link
    turn_pos = dict(view.turn_pos)
    turn_pos.update((t, n + i) for i, t in enumerate(tc.ids))
    if any(turn_pos.get(t, -1) < n for t in split):
        return None  # a new passage of an old turn: not an extension
    m = view.num_passages
    pc = view.passages + PassageColumns.of(new_passages, turn_pos, view.turn_text + tc.text, view.turn_speaker + tc.speaker)
    turn_passages = {**view.turn_passages, **pc.by_turn(m)}
    kinds, ids, tokens = lexical_units(view.turn_ids + tc.ids, [[] for _ in range(n)] + tc.tokens, pc, turn_passages, n)
    pas_index = data.indexes.get("passages") if new_passages.num_rows else view.passage_index
    return dataclasses.replace(
        view,
        committed_at=committed_at,
        turn_ids=view.turn_ids + tc.ids,
        turn_text=view.turn_text + tc.text,
        turn_speaker=view.turn_speaker + tc.speaker,
        turn_role=view.turn_role + tc.role,
        turn_tool=view.turn_tool + tc.tool,
        turn_session=view.turn_session + tc.session,
        turn_session_date=view.turn_session_date + tc.dates,
        turn_segment=view.turn_segment + tc.segment,
        turn_vecs=np.concatenate([view.turn_vecs, flat_vectors(data.turn_index, k, data.dim, start=n)]),
        turn_index=data.turn_index,
        speakers=list(dict.fromkeys(view.speakers + tc.speaker)),
        bm25=view.bm25.extended(None, kinds, ids, tokens),
        turn_bm25=view.turn_bm25.extended(None, kinds, ids, tokens),
        passages=pc,
        passage_vecs=(np.concatenate([view.passage_vecs.reshape(-1, data.dim),
                                      flat_vectors(pas_index, new_passages.num_rows, data.dim, start=m)])
                      if new_passages.num_rows else view.passage_vecs),
        passage_index=pas_index,
        passage_pos={**view.passage_pos, **{p: m + i for i, p in enumerate(pc.ids[m:])}},
        turn_passages=turn_passages,
        turn_pos=turn_pos,
        turn_records=view.turn_records + [[] for _ in tc.ids],
        turn_terms=view.turn_terms + tc.terms,
        turn_said=np.concatenate([view.turn_said, tc.said]),
        # values derived per record / turn position: the old positions keep their meaning
        memo=dict(view.memo),
        nbytes=view_nbytes(data) + (0 if exact else view_nbytes(view.derived_from)),  # type: ignore[arg-type]  # not exact: derived_from is set
        source=data,
        derived_from=data if exact else view.derived_from,
    )


__all__ = ["DERIVED_TABLES", "appended_passages", "appended_turns", "derived_unchanged", "extend_with_turns"]
