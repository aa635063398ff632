"""A cached search view extended by queued appends equals a view built from scratch (issue 28;
query/view_extend.py, the pure-append paths of io/store/deltas.py and reader.load_generation)."""

from __future__ import annotations

import dataclasses
import threading

import numpy as np
import pytest

from lychee_ray.io.store import StoreWriter
from lychee_ray.query.evidence import prime_line_tokens
from lychee_ray.query.view import ConversationView
from lychee_ray.query.view_extend import appended_turns, derived_unchanged, extend_with_turns
from tests.ingest.test_deltas import open_store
from tests.ingest.test_incremental import conv, turn_dicts  # noqa: F401 (fixture)

# compared apart: indexes by what they return, the memo by the counts it holds
_APART = {"record_index", "node_index", "turn_index", "passage_index", "bm25", "turn_bm25", "memo", "source", "derived_from"}
QD = "2023-08-01"  # searches give a date: the default (now) may change between two of them
QUERIES = ["What did Caroline say about the support group?", "painting camping with the kids",
           "Melanie pottery class", "When did she go to the LGBTQ conference?"]


def answer(result) -> dict:
    """A search result without its timings and generated id."""
    return result.model_dump(exclude={"timings_ms", "question_id"})


def assert_same_view(a: ConversationView, b: ConversationView) -> None:
    assert not a.lagging and not b.lagging
    for f in dataclasses.fields(ConversationView):
        if f.name in _APART:
            continue
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype and np.array_equal(x, y), f.name
        elif f.name == "node_records":
            assert len(x) == len(y) and all(np.array_equal(p, q) for p, q in zip(x, y)), f.name
        else:
            assert x == y, f.name
    for q in QUERIES:
        assert a.bm25.search(q, 50) == b.bm25.search(q, 50), q
        assert a.turn_bm25.search(q, 50) == b.turn_bm25.search(q, 50), q
    qv = np.ascontiguousarray(a.turn_vecs[::3][:5])
    for name in ("record_index", "node_index", "turn_index"):
        ia, ib = getattr(a, name), getattr(b, name)
        assert ia.ntotal == ib.ntotal, name
        if ia.ntotal and len(qv):
            k = min(10, ia.ntotal)
            da, ja = ia.search(qv if name == "turn_index" else np.ascontiguousarray(a.record_vecs[:2]), k)
            db, jb = ib.search(qv if name == "turn_index" else np.ascontiguousarray(a.record_vecs[:2]), k)
            assert np.array_equal(ja, jb) and np.array_equal(da, db), name
    if a.num_passages:  # (the passages of long turns)
        k = min(10, a.num_passages)
        da, ja = a.passage_index.search(qv, k)
        db, jb = b.passage_index.search(qv, k)
        assert np.array_equal(ja, jb) and np.array_equal(da, db), "passage_index"
    for v in (a, b):  # every setting: an extended view's carried-over counts are counted for all
        for ids in (False, True):
            for tags in (False, True):
                prime_line_tokens(v, ids, show_tags=tags)
    counts = lambda v: {k: n for k, n in v.memo.items() if k[0] in ("rec_tok", "turn_tok")}  # noqa: E731
    assert counts(a) == counts(b)


def two_stores(tmp_path, conv, *reader_sets: str):
    """A writer and a reader (a replica) on one store holding the conversation's first 20 turns,
    the reader's view of it loaded; (conversation id, turns, writer, reader)."""
    cid, turns = conv.conversation_id, turn_dicts(conv)
    StoreWriter(tmp_path)
    writer, reader = open_store(tmp_path), open_store(tmp_path, *reader_sets)
    writer.append(cid, turns[:20], user_id=conv.user_id)
    reader.reader.refresh()
    reader.search(cid, QUERIES[0], QD)
    return cid, turns, writer, reader


@pytest.mark.heavy
def test_queued_appends_extend_the_cached_view(tmp_path, conv):
    cid, turns, writer, reader = two_stores(tmp_path, conv)
    extended = reader.cache.extended
    for i, t in enumerate(turns[20:32]):
        writer.append(cid, [t], queue=True)
        reader.reader.refresh_conversation(cid)
        hits = reader.search(cid, t["content"][:60], QD)
        assert reader.cache.extended == extended + i + 1  # extended, not built again
        assert any(t["turn_id"] in e.source_turn_ids for e in hits.evidence)  # searchable at once
        fresh = open_store(tmp_path)
        assert answer(hits) == answer(fresh.search(cid, t["content"][:60], QD))  # what a replica loading it cold answers
        assert_same_view(reader.view(cid), ConversationView.from_data(fresh.reader.load(cid), committed_at=reader.view(cid).committed_at))
    # a catch-up that encodes segments changes records and nodes: the view is built again, equal too
    caught = writer.catch_up(cid)
    assert caught.segments_encoded
    reader.reader.refresh_conversation(cid)
    before = reader.cache.extended
    reader.search(cid, QUERIES[1], QD)
    assert reader.cache.extended == before
    fresh = open_store(tmp_path)
    assert_same_view(reader.view(cid), ConversationView.from_data(fresh.reader.load(cid), committed_at=reader.view(cid).committed_at))
    for q in QUERIES:
        assert answer(reader.search(cid, q, QD)) == answer(fresh.search(cid, q, QD))


def test_only_a_pure_turn_append_extends(tmp_path, conv):
    """Records, nodes or segments changed: no exact extension (a lagging one only when allowed);
    a stored turn changed or removed: no extension at all."""
    import pyarrow as pa

    cid, turns, writer, reader = two_stores(tmp_path, conv)
    view = reader.view(cid)
    writer.append(cid, turns[20:24], user_id=conv.user_id)
    assert writer.flush(cid).segments_encoded  # segments and records change as well
    reader.reader.refresh_conversation(cid)
    data = reader.reader.load(cid, previous=view.source)
    assert appended_turns(view, data) == 4 and not derived_unchanged(view, data)
    assert extend_with_turns(view, data, "x") is None
    lag = extend_with_turns(view, data, "x", allow_lag=True)
    assert lag is not None and lag.lagging and lag.num_turns == 24 and lag.record_ids == view.record_ids
    assert lag.derived_from is view.source and lag.source is data
    assert appended_turns(view, view.source) == 0  # the same tables: nothing to add
    # a stored turn's text changed: neither
    content = data.turns.column("content").to_pylist()
    edited = data.turns.set_column(data.turns.schema.get_field_index("content"), "content",
                                   pa.array(["edited"] + content[1:]))
    changed = dataclasses.replace(data, tables={**data.tables, "turns": edited})
    assert appended_turns(view, changed) is None and extend_with_turns(view, changed, "x", allow_lag=True) is None
    # the old view is never changed by an extension
    ids = list(view.turn_ids)
    writer.append(cid, [turns[24]], queue=True)
    reader.reader.refresh_conversation(cid)
    grown = reader.view(cid)
    assert view.turn_ids == ids and grown.turn_ids[: len(ids)] == ids


def test_background_rebuild_answers_from_a_lagging_view(tmp_path, conv):
    """appends.view_rebuild: background — after a commit that changed records, the first search is
    answered by the previous view plus the new turns (the appended turns searchable, the records
    not yet); once the background rebuild lands the view equals one built from scratch, also when
    more turns were appended while it ran."""
    cid, turns, writer, reader = two_stores(tmp_path, conv, "appends.view_rebuild=background",
                                            "appends.view_rebuild_background_min_rows=0")
    before = reader.view(cid)
    for t in turns[20:30]:
        writer.append(cid, [t], queue=True)
    assert writer.catch_up(cid).segments_encoded
    writer.append(cid, [turns[30]], queue=True)
    reader.reader.refresh_conversation(cid)
    hits = reader.search(cid, turns[30]["content"][:60], QD)
    assert any(turns[30]["turn_id"] in e.source_turn_ids for e in hits.evidence)
    assert reader.cache.lagged >= 1
    for t in turns[31:34]:  # appends while the rebuild may be running
        writer.append(cid, [t], queue=True)
        reader.reader.refresh_conversation(cid)
        reader.search(cid, t["content"][:60], QD)
    assert reader.cache.wait_idle(timeout=60)
    view = reader.view(cid)
    assert not view.lagging and view.num_records > before.num_records
    assert reader.cache.background_rebuilds >= 1 and reader.cache.stats()["rebuilds_pending"] == 0
    fresh = open_store(tmp_path)
    assert_same_view(view, ConversationView.from_data(fresh.reader.load(cid), committed_at=view.committed_at))
    for q in QUERIES:
        assert answer(reader.search(cid, q, QD)) == answer(fresh.search(cid, q, QD))
    reader.close()
    assert reader.cache.wait_idle(timeout=5)


def test_inline_rebuild_below_the_row_bound(tmp_path, conv):
    """Below appends.view_rebuild_background_min_rows (the default store sizes in tests) a changed
    conversation is rebuilt on the request: never lagging."""
    cid, turns, writer, reader = two_stores(tmp_path, conv, "appends.view_rebuild=background",
                                            "appends.view_rebuild_background_min_rows=100000")
    writer.append(cid, turns[20:30], user_id=conv.user_id)
    writer.flush(cid)
    reader.reader.refresh_conversation(cid)
    reader.search(cid, QUERIES[0], QD)
    assert not reader.view(cid).lagging and reader.cache.lagged == 0


def test_a_failed_background_rebuild_drops_the_lagging_view(tmp_path, conv):
    """A background rebuild that fails (here: its load raises) is logged and the lagging view is
    dropped, so the next search builds the conversation on the request, whole and current."""
    cid, turns, writer, reader = two_stores(tmp_path, conv, "appends.view_rebuild=background",
                                            "appends.view_rebuild_background_min_rows=0")
    for t in turns[20:30]:
        writer.append(cid, [t], queue=True)
    assert writer.catch_up(cid).segments_encoded
    real_load = reader.reader.load

    def load(conversation_id, previous=None, tables=None):
        if tables is None and threading.current_thread().name == "lychee-view-rebuild":
            raise OSError("disk gone")
        return real_load(conversation_id, previous=previous, tables=tables)

    reader.reader.load = load
    reader.reader.refresh_conversation(cid)
    reader.search(cid, QUERIES[0], QD)
    assert reader.cache.lagged == 1
    assert reader.cache.wait_idle(timeout=30)
    assert cid not in reader.cache and reader.cache.background_rebuilds == 0
    reader.reader.load = real_load
    view = reader.view(cid)
    assert not view.lagging
    fresh = open_store(tmp_path)
    assert_same_view(view, ConversationView.from_data(fresh.reader.load(cid), committed_at=view.committed_at))
