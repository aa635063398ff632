"""Delta generations and queued appends (issue 28; io/store/deltas.py, ingest/increment/cache.py,
serve/encode_queue.py).

* queued appends, one turn each, then catch-up and flush: the store equals one build of the same
  turns (every table, row for row), ``verify`` ok after each step; a queued turn is searchable at once;
* each append writes a delta of its own rows only; a fold rewrites base + deltas as one base with
  the same tables; the garbage sweep keeps every live delta; erasure removes them all;
* a reader that loaded a conversation reads only the new deltas (same data as a full load);
* a writer killed mid-append or mid-fold: no mixed read, no acknowledged turn lost, the next
  writer goes on;
* the encode queue: catch-ups run in order, a full queue refuses, a busy conversation is retried.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import os
import threading
import time
from pathlib import Path

import pytest

from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.append import append_queued, append_turns
from lychee_ray.ingest.increment import AppendRequest, ConversationBusy, StoredCache
from lychee_ray.config import load_config
from lychee_ray.io.store import (
    StoreReader,
    StoreWriter,
    StoreLayout,
    conversation_key,
    erase_conversation,
    iter_markers,
    read_part,
)
from lychee_ray.io.store.gc import collect_garbage
from lychee_ray.io.verify import verify_store
from lychee_ray.memory import MemoryStore
from lychee_ray.serve.encode_queue import EncodeQueue
from tests.reliability.test_bad_input import HashEmbedder
from tests.ingest.test_incremental import CFG, TABLES, conv, ctx, reference, tables, turn_dicts  # noqa: F401 (fixtures)


def marker(root: Path, cid: str):
    return next(m for m in iter_markers(root) if m.conversation_id == cid)


def open_store(root: Path, *sets: str) -> MemoryStore:
    cfg = load_config(env={}, sets=list(sets)) if sets else CFG
    return MemoryStore.open(root, cfg, embedder=HashEmbedder(), llm="rules")


@pytest.mark.heavy
def test_queued_appends_then_catch_up_equal_one_build(tmp_path, conv, reference):
    ref, _ = reference
    cid, turns = conv.conversation_id, turn_dicts(conv)
    StoreWriter(tmp_path)
    store = open_store(tmp_path)
    first = store.append(cid, turns[:5], user_id=conv.user_id, queue=True)  # not stored yet: a normal append
    assert not first.encode_queued and first.created
    for i, t in enumerate(turns[5:45], start=5):
        r = store.append(cid, [t], queue=True)
        assert r.stored_turn_ids == [t["turn_id"]] and r.encode_queued and not r.segments_encoded
        assert r.open_turn_ids[-1] == t["turn_id"]
        m = marker(tmp_path, cid)
        assert m.unsegmented_turns == i - 4 and m.counts.turns == i + 1 and len(m.deltas) == i - 4
        if i % 10 == 0:
            assert verify_store(tmp_path)["ok"]
    # searchable at once as a raw turn, before anything encoded it
    hit = store.search(cid, turns[44]["content"][:60])
    assert any(turns[44]["turn_id"] in e.source_turn_ids for e in hit.evidence)
    caught = store.catch_up(cid)
    assert caught.segments_encoded and not caught.stored_turn_ids and not caught.encode_queued
    assert marker(tmp_path, cid).unsegmented_turns == 0 and verify_store(tmp_path)["ok"]
    store.flush(cid)  # a provisional tail: the appends below re-open it (kept as is while it stays open)
    for i, t in enumerate(turns[45:]):  # a mix: queued and caught up one by one, or left for the final flush
        store.append(cid, [t], queue=True)
        if i < 15:
            store.catch_up(cid)
    store.append(cid, [], flush=True)
    got = tables(tmp_path, cid)
    for t in TABLES:
        assert got[t].equals(ref[t]), t
    assert verify_store(tmp_path)["ok"]
    store.close()


def test_delta_rows_fold_gc_and_erase(tmp_path, conv, reference):
    ref, _ = reference
    cid, turns = conv.conversation_id, turn_dicts(conv)
    StoreWriter(tmp_path)
    # fold only by count, after 8 deltas
    store = open_store(tmp_path, "appends.delta_max_count=8", "appends.delta_fold_min_rows=100000")
    store.append(cid, turns[:30], user_id=conv.user_id)
    layout = StoreLayout(tmp_path)
    base = marker(tmp_path, cid)
    assert not base.deltas and base.base_rows > 30
    store.append(cid, [turns[30]], queue=True)
    m = marker(tmp_path, cid)
    assert m.generation == base.generation and len(m.deltas) == 1
    delta_turns = read_part(tmp_path, "turns", m.model_copy(update={"deltas": []}))
    assert delta_turns.num_rows == 30  # the base is untouched
    from lychee_ray.io.store.reader import read_delta

    d = read_delta(layout, m.key, m.deltas[0], ["turns", "records", "segments", "nodes"], 0, vectors=False)
    assert list(d) == ["turns"] and d["turns"].upserts.num_rows == 1  # one row written, nothing else
    folded_at = None
    for k in range(31, 76):
        store.append(cid, [turns[k]])
        m = marker(tmp_path, cid)
        if not m.deltas and folded_at is None:
            folded_at = k
        assert len(m.deltas) < 8
        assert sorted(layout.generation_paths(m.key)) == sorted(m.generations)  # nothing else left behind
    assert folded_at is not None  # the count bound folded
    assert collect_garbage(tmp_path, min_age_s=0).files_removed == 0  # every delta is live
    store.flush(cid)
    got = tables(tmp_path, cid)
    for t in TABLES:
        assert got[t].equals(ref[t]), t
    assert verify_store(tmp_path)["ok"]
    store.close()
    erase_conversation(tmp_path, cid)
    key = conversation_key(cid)
    assert not any(key in p.name for p in tmp_path.rglob("*") if p.is_file() and "_locks" not in p.parts)


def test_reader_reads_only_new_deltas(tmp_path, conv):
    cid, turns = conv.conversation_id, turn_dicts(conv)
    StoreWriter(tmp_path)
    store = open_store(tmp_path)
    store.append(cid, turns[:40], user_id=conv.user_id)
    reader = StoreReader(tmp_path)
    before = reader.load(cid)
    for t in turns[40:50]:
        store.append(cid, [t])
    reader.refresh()
    import lychee_ray.io.store.reader as rd

    calls = []
    real = rd._read_base
    rd._read_base = lambda *a: calls.append(a) or real(*a)
    try:
        inc = reader.load(cid, previous=before)
    finally:
        rd._read_base = real
    assert not calls  # the base was not read again
    full = StoreReader(tmp_path).load(cid)
    for t in TABLES:
        assert inc.tables[t].equals(full.tables[t]), t
    for name in ("records", "turns", "nodes"):
        a, b = inc.table_vectors(name), full.table_vectors(name)
        assert (a.rows == b.rows).all() and (a.vectors == b.vectors).all()
    assert inc.ids == full.ids
    store.close()


# -- crashes ---------------------------------------------------------------------------------------


def _die_mid_write(root: str, cid: str, turn: dict, what: str) -> None:
    """Child process: start an append (or a fold) and die (os._exit) after its first Parquet write."""
    import lychee_ray.io.store.writer as w

    real = w.write_parquet

    def dying(table, path):
        real(table, path)
        os._exit(17)  # killed mid-commit: files written, marker not

    w.write_parquet = dying
    cfg = load_config(env={})
    if what == "append":
        ctx = make_context(cfg, "rules", HashEmbedder(), batched=False)
        asyncio.run(append_queued(root, AppendRequest(conversation_id=cid, turns=[turn]), ctx, StoredCache(4)))
    else:
        StoreWriter(root, cfg.store).fold(cid)
    os._exit(0)


@pytest.mark.heavy
@pytest.mark.parametrize("what", ["append", "fold"])
def test_writer_killed_mid_append_or_fold_loses_nothing(tmp_path, conv, what):
    cid, turns = conv.conversation_id, turn_dicts(conv)
    StoreWriter(tmp_path)
    store = open_store(tmp_path)
    store.append(cid, turns[:30], user_id=conv.user_id)
    for t in turns[30:35]:
        assert store.append(cid, [t], queue=True).stored_turn_ids  # acknowledged
    before = marker(tmp_path, cid)
    assert len(before.deltas) == 5
    data_before = StoreReader(tmp_path).load(cid)
    p = multiprocessing.get_context("spawn").Process(target=_die_mid_write, args=(str(tmp_path), cid, turns[35], what))
    p.start()
    p.join(120)
    assert p.exitcode == 17
    after = marker(tmp_path, cid)
    assert after == before  # the marker was never replaced: readers see the last whole commit
    data = StoreReader(tmp_path).load(cid)
    for t in TABLES:
        assert data.tables[t].equals(data_before.tables[t]), t
    assert data.turns.column("turn_id").to_pylist() == [t["turn_id"] for t in turns[:35]]  # every acknowledged turn
    assert verify_store(tmp_path)["ok"]
    # the dead writer's files are garbage the sweep takes; the next writer goes on
    assert collect_garbage(tmp_path, min_age_s=0).files_removed >= 1
    r = store.append(cid, [turns[35]], queue=True)
    assert r.stored_turn_ids == [turns[35]["turn_id"]]
    StoreWriter(tmp_path).fold(cid)
    assert not marker(tmp_path, cid).deltas and verify_store(tmp_path)["ok"]
    assert StoreReader(tmp_path).load(cid).turns.num_rows == 36
    store.close()


# -- the encode queue ------------------------------------------------------------------------------


def test_encode_queue_order_bound_and_busy_retry():
    done: list[str] = []
    gate = threading.Event()
    busy_once = {"c": True}

    def catch_up(cid: str) -> None:
        gate.wait(10)
        if cid == "c" and busy_once["c"]:
            busy_once["c"] = False
            raise ConversationBusy(cid, 0.1)
        done.append(cid)

    q = EncodeQueue(catch_up, max_pending=2, retry_s=0.05)
    assert q.submit("a")
    time.sleep(0.1)  # "a" is running (blocked on the gate), the queue is empty again
    assert q.submit("b") and q.submit("b") and q.submit("c")  # "b" waits once
    assert not q.submit("d")  # full: the caller encodes inline
    gate.set()
    assert q.drain(10)
    time.sleep(0.3)  # the busy "c" is retried after retry_s
    assert q.drain(10)
    assert done == ["a", "b", "c"]
    st = q.stats()
    assert st["done"] == 3 and st["errors"] == 1 and st["pending"] == 0 and st["lag_p50_ms"] is not None
    q.stop()
    assert not q.submit("e")


class _SlowEncoder:
    """The rules encoder, slowed down: a background encoding then takes long enough to overlap appends."""

    def __init__(self, inner, delay_s: float, started: threading.Event) -> None:
        self.inner, self.delay_s, self.started = inner, delay_s, started
        self.backend, self.model = inner.backend, inner.model

    async def encode(self, request):
        self.started.set()
        await asyncio.sleep(self.delay_s)
        return await self.inner.encode(request)


@pytest.mark.heavy
def test_background_encoding_holds_no_write_lock_and_appends_go_on(tmp_path, conv, reference):
    """A catch-up encodes without the write lock: queued appends commit while it encodes (they do
    not wait for it), it then commits on top of them, and the store ends equal to one build."""
    ref, _ = reference
    cid, turns = conv.conversation_id, turn_dicts(conv)
    StoreWriter(tmp_path)
    store = open_store(tmp_path)
    store.append(cid, turns[:20], user_id=conv.user_id)
    for t in turns[20:50]:
        store.append(cid, [t], queue=True)
    started = threading.Event()
    slow = make_context(CFG, "rules", HashEmbedder(), batched=False)
    slow.encoder = _SlowEncoder(slow.encoder, 0.5, started)
    result: dict = {}

    def catch_up() -> None:
        result["r"] = append_turns(tmp_path, AppendRequest(conversation_id=cid, turns=[]), slow)

    th = threading.Thread(target=catch_up)
    th.start()
    assert started.wait(30)
    gens = []
    for t in turns[50:56]:  # while the catch-up encodes
        a = store.append(cid, [t], queue=True)
        assert a.stored_turn_ids and a.generation is not None
        gens.append(a.generation)
    assert th.is_alive()  # every append committed while the encoding was still running
    th.join(60)
    r = result["r"]
    assert r.segments_encoded and r.generation is not None
    deltas = marker(tmp_path, cid).deltas
    assert deltas.index(r.generation) > max(deltas.index(g) for g in gens)  # it committed on top of them
    m = marker(tmp_path, cid)
    assert m.unsegmented_turns == 6 and m.counts.turns == 56 and verify_store(tmp_path)["ok"]
    for t in turns[56:]:
        store.append(cid, [t], queue=True)
    store.flush(cid)
    got = tables(tmp_path, cid)
    for t in TABLES:
        assert got[t].equals(ref[t]), t
    store.close()


def test_kept_state_equals_a_fresh_read(tmp_path, conv):
    """What an appending process keeps between increments (ingest/increment/cache.py StoredCache) is what
    reading the store whole gives: records, segments, turns, vectors, the node index, the record
    guard's memory of the final segments (the rules backend skips the guard's checks, so the
    equality tests above cannot see a wrong memory: this one can)."""
    from lychee_ray.ingest.encode.guard import ConversationMemory
    from lychee_ray.ingest.nodes import build_nodes
    from lychee_ray.ingest.increment.stored import load_stored

    cid, turns = conv.conversation_id, turn_dicts(conv)
    StoreWriter(tmp_path)
    store = open_store(tmp_path)
    store.append(cid, turns[:10], user_id=conv.user_id)
    for i, t in enumerate(turns[10:70]):
        store.append(cid, [t], queue=i % 3 == 0)
        if i % 7 == 0:
            store.catch_up(cid)
    store.catch_up(cid)
    m = marker(tmp_path, cid)
    kept = store.appends.cache.take_stored(StoreLayout(tmp_path), m)
    assert kept.marker.same_commit(m) and kept.node_index is not None and kept.kept_memory is not None
    fresh = load_stored(StoreLayout(tmp_path), m)
    assert [r.record_id for r in kept.records] == [r.record_id for r in fresh.records]
    assert kept.records == fresh.records and kept.rows == fresh.rows
    assert kept.turns.equals(fresh.turns) and (kept.turn_vectors == fresh.turn_vectors).all()
    order = fresh.turns.column("turn_id").to_pylist()
    assert kept.node_index.nodes() == build_nodes(fresh.records, order, CFG.nodes)
    provisional = set(fresh.segstate.provisional)
    want = ConversationMemory()
    want.accept(r for r in fresh.records if r.segment_id not in provisional)
    assert kept.kept_memory == want
    from lychee_ray.ingest.pipeline import segments_quality

    final_rows = [r for r in fresh.rows if r.segment_id not in provisional]
    assert kept.final_segments == {r.segment_id for r in final_rows}
    assert kept.final_records == sum(r.segment_id not in provisional for r in fresh.records)
    assert kept.final_quality.report() == segments_quality(final_rows).report()
    assert m.quality == segments_quality(fresh.rows).report()
    assert kept.conversation().turn_rows() == fresh.conversation().turn_rows()
    store.close()


def test_queued_turns_keep_session_positions_after_an_empty_session(tmp_path, ctx, conv):
    """A built input may hold an empty session (its position is kept as a placeholder): turns a
    queued append adds get the session positions an inline append (and one build) gives them."""
    from tests.ingest.test_incremental import build

    cid = conv.conversation_id
    gap = conv.model_copy(update={"sessions": [conv.sessions[0], conv.sessions[1].model_copy(update={"turns": []}),
                                               conv.sessions[2]]})
    for sub in ("queued", "inline"):
        assert build(ctx, tmp_path / sub, gap).built == 1
    nxt = [dict(t, session_id="s-next", session_started_at="2023-08-01T10:00:00")
           for t in turn_dicts(conv.model_copy(update={"sessions": conv.sessions[3:4]}))][:3]
    for sub, queue in (("queued", True), ("inline", False)):
        store = open_store(tmp_path / sub)
        for t in nxt:
            store.append(cid, [t], queue=queue)
        store.close()
    q, i = tables(tmp_path / "queued", cid)["turns"], tables(tmp_path / "inline", cid)["turns"]
    assert q.equals(i)
    assert q.column("session_index").to_pylist()[-3:] == [3, 3, 3]  # after sessions 0, (empty) 1, 2


def test_merge_order_equals_the_row_by_row_merge():
    """apply_delta's merge order (Arrow kernels) is the row-by-row rule: a replaced row keeps its
    place, a replacement wins over a delete, new keys follow in upsert order."""
    import random

    import numpy as np
    import pyarrow as pa

    from lychee_ray.io.store.deltas import _merge_order, _merge_order_rows

    rng = random.Random(0)
    for _ in range(300):
        base = [f"k{i}" for i in rng.sample(range(60), rng.randint(0, 30))]
        new = [f"k{i}" for i in rng.sample(range(60), rng.randint(0, 20))]
        deletes = [f"k{i}" for i in rng.sample(range(60), rng.randint(0, 10))]
        got = _merge_order(pa.chunked_array([pa.array(base, pa.string())]), pa.array(new, pa.string()), deletes)
        assert np.array_equal(got, _merge_order_rows(base, new, deletes)), (base, new, deletes)
    # upserts repeating a key: merged as always (the last one replaces)
    assert _merge_order(pa.chunked_array([pa.array(["a", "b"])]), pa.array(["b", "c", "b"]), []).tolist() == [0, 4, 3]
