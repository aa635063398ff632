"""A search view extended by appended turns, at the cost of the new turns (issue 28).

A queued append (build/queued.py) commits a delta of new turn rows only. Building the conversation's
:class:`~lychee_ray.query.recall.ConversationView` again from scratch for it costs the whole
conversation (columns, BM25, term sets, line token counts: ~2 s at 10,000 turns, on every replica,
for every appended turn). :func:`extend_with_turns` instead keeps the old view's records, nodes and
their indexes as they are, and adds the new turns to the turn columns, vectors and both BM25
indexes. The result equals :meth:`ConversationView.from_data` on the same data, field by field
(``tests/test_view_extend.py``).

Any other change (records, nodes or segments touched: an encoding, a flush) is not an extension;
the cache then builds the view again — or, with ``allow_lag``, takes the old view's records and
nodes with *all* turns of the new commit (a *lagging* view, ``ConversationView.lagging``) while it
rebuilds in the background (query/cache.py). A commit that changed or removed a turn the view
shows is never extended either way.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from lychee_ray.io.store import ConversationData
from lychee_ray.query.bm25 import doc_terms
from lychee_ray.query.recall import (
    ConversationView,
    day_ordinals,
    flat_vectors,
    turn_line,
    turn_novelty_terms,
    view_nbytes,
)

# tables a turns-only append leaves as they were (load_generation hands back the same objects)
_UNCHANGED = ("records", "nodes", "segments")
DERIVED_TABLES = frozenset(_UNCHANGED)  # what an encoding changes: a view needs building again


def appended_turns(view: ConversationView, data: ConversationData) -> int | None:
    """How many turns ``data`` adds after the ones ``view`` shows, when it keeps those as they are
    (None when it changed or removed one)."""
    old = view.source
    if old is None:
        return None
    n, turns = view.num_turns, data.turns
    if turns.num_rows < n or not turns.slice(0, n).equals(old.turns):
        return None
    return turns.num_rows - n


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
    trn = data.turns.slice(n).to_pydict()
    ids = [str(t) for t in trn["turn_id"]]
    if any(t in view.turn_pos for t in ids) or (exact and not view.missing_sources.isdisjoint(ids)):
        return None  # a repeated id, or a record citing a new turn: what from_data would link
    text = [str(c) for c in trn["content"]]
    speaker = [str(s) for s in trn["speaker"]]
    dates = [ts or ss for ts, ss in zip(trn["timestamp"], trn["session_started_at"])]
    lines = [turn_line(s, t) for s, t in zip(speaker, text)]
    tokens = [doc_terms(t) for t in lines]
    turn_pos = dict(view.turn_pos)
    turn_pos.update((t, n + i) for i, t in enumerate(ids))
    return dataclasses.replace(
        view,
        committed_at=committed_at,
        turn_ids=view.turn_ids + ids,
        turn_text=view.turn_text + text,
        turn_speaker=view.turn_speaker + speaker,
        turn_session=view.turn_session + list(trn["session_index"]),
        turn_session_date=view.turn_session_date + dates,
        turn_segment=view.turn_segment + [view.segment_of.get(t, -1) for t in ids],
        turn_vecs=np.concatenate([view.turn_vecs, flat_vectors(data.turn_index, k, data.dim, start=n)]),
        turn_index=data.turn_index,
        speakers=list(dict.fromkeys(view.speakers + speaker)),
        bm25=view.bm25.extended(lines, ["turn"] * k, ids, tokens),
        turn_bm25=view.turn_bm25.extended(lines, ["turn"] * k, ids, tokens),
        turn_pos=turn_pos,
        turn_records=view.turn_records + [[] for _ in ids],
        turn_terms=view.turn_terms + [turn_novelty_terms(s, t) for s, t in zip(speaker, text)],
        turn_said=np.concatenate([view.turn_said, day_ordinals(dates)]),
        # values derived per record / turn position: the old positions keep their meaning
        memo=dict(view.memo),
        nbytes=view_nbytes(data) + (0 if exact else view_nbytes(view.derived_from)),  # type: ignore[arg-type]
        source=data,
        derived_from=data if exact else view.derived_from,
    )


__all__ = ["DERIVED_TABLES", "appended_turns", "derived_unchanged", "extend_with_turns"]
