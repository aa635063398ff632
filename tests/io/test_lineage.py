"""Lineage (issue 39 item 1): a conversation's commits carry the random id its first commit stamped;
an erased and re-created id gets a new one, and every writer, cache and view that read the erased
conversation is fenced by it. The delete / re-create race through the service is
``tests/reliability/test_erasure_race.py``."""

from __future__ import annotations

import threading
import time

import pytest

from lychee_ray.serve.encode_queue import EncodeQueue
from lychee_ray.ingest.increment import StoredCache
from lychee_ray.config import load_config
from lychee_ray.io.store import (
    ConversationReplaced,
    StoreReader,
    StoreWriter,
    StoreLayout,
    conversation_key,
    erase_conversation,
)
from lychee_ray.io.store.marker import MARKER_VERSION
from lychee_ray.io.store.reader import load_generation
from lychee_ray.io.store.writer import artifacts_delta
from lychee_ray.memory import MemoryStore
from tests.stores import RECORDS, conversation_spec, make_store
from tests.io.test_store import artifacts

pytestmark = pytest.mark.reliability  # listed in docs/reliability.md (issue 39)


def test_first_commit_stamps_a_lineage_every_later_commit_carries_and_recreation_changes(tmp_path):
    w = StoreWriter(tmp_path)
    first = w.commit(artifacts("a"), based_on=None)
    assert first.lineage and len(first.lineage) == 32 and first.version == MARKER_VERSION
    again = w.commit(artifacts("a", n_rec=2), based_on=first)
    assert again.lineage == first.lineage and again.same_lineage(first) and not again.same_commit(first)
    delta = artifacts_delta(load_generation(tmp_path, again), artifacts("a", n_rec=4))
    d = w.commit_delta(delta, based_on=again)
    assert d.lineage == first.lineage and d.extends(again)
    folded = w.fold("a")
    assert folded is not None and folded.lineage == first.lineage
    assert w.commit(artifacts("b")).lineage != first.lineage  # each conversation its own

    erase_conversation(tmp_path, "a")
    recreated = w.commit(artifacts("a"), based_on=None)
    assert recreated.lineage != first.lineage
    # nothing of the erased history counts as the new one's
    assert not recreated.same_lineage(folded) and not recreated.extends(folded) and not recreated.same_commit(folded)


def test_a_write_based_on_an_erased_conversation_is_refused_and_writes_nothing(tmp_path):
    w = StoreWriter(tmp_path)
    old = w.commit(artifacts("a"), based_on=None)
    delta = artifacts_delta(load_generation(tmp_path, old), artifacts("a", n_rec=5))
    erase_conversation(tmp_path, "a")
    with pytest.raises(ConversationReplaced) as e:  # erased, not re-created: no commit to build on
        w.commit_delta(delta, based_on=old)
    assert e.value.kind == "conversation_replaced" and e.value.conversation_id == "a"
    assert w.commit_marker("a") is None

    new = w.commit(artifacts("a", n_rec=1), based_on=None)
    files = sorted(p for p in tmp_path.rglob("*") if p.is_file() and "_locks" not in p.parts)
    for attempt in (lambda: w.commit_delta(delta, based_on=old),  # the race of issue 39: the erased one's delta
                    lambda: w.commit(artifacts("a", n_rec=5), based_on=old),
                    lambda: w.commit(artifacts("a", n_rec=5), based_on=None)):  # "started from nothing": one exists now
        with pytest.raises(ConversationReplaced):
            attempt()
    assert w.commit_marker("a") == new  # untouched
    assert sorted(p for p in tmp_path.rglob("*") if p.is_file() and "_locks" not in p.parts) == files  # nothing left behind
    assert StoreReader(tmp_path).load("a").records.num_rows == 1


def test_markers_without_a_lineage_keep_working_and_get_one_at_their_next_commit(tmp_path):
    w = StoreWriter(tmp_path)
    m = w.commit(artifacts("a"))
    layout = StoreLayout(tmp_path)
    legacy = m.model_copy(update={"lineage": None, "version": 3})
    layout.write_marker(legacy)  # as code before issue 39 wrote it
    read = layout.read_marker(conversation_key("a"))
    assert read is not None and read.lineage is None and read.version == 3
    assert StoreReader(tmp_path).load("a").records.num_rows == 3
    nxt = w.commit(artifacts("a", n_rec=2), based_on=read)  # the legacy lineage is its own: accepted
    assert nxt.lineage and not nxt.same_lineage(read)
    with pytest.raises(ConversationReplaced):  # ... and now a writer that read the legacy marker is fenced
        w.commit(artifacts("a", n_rec=4), based_on=read)
    # an older marker migrated under the write lock gets one too
    layout.write_marker(nxt.model_copy(update={"lineage": None, "version": 3}))
    migrated = w.current_marker("a")
    assert migrated is not None and migrated.version == MARKER_VERSION and migrated.lineage


def test_stored_cache_never_hands_an_erased_conversations_state_to_a_recreated_id(tmp_path):
    w = StoreWriter(tmp_path)
    layout = StoreLayout(tmp_path)
    old = w.commit(artifacts("a"), based_on=None)
    cache = StoredCache(4)
    cache.put(cache.turn_log(layout, old))
    erase_conversation(tmp_path, "a")
    new = w.commit(artifacts("a", n_rec=1), based_on=None)
    # same-looking generation sequence, other lineage: read afresh, never extended
    fake = new.model_copy(update={"generation": old.generation, "location": old.location, "deltas": old.deltas,
                                  "committed_at": old.committed_at})
    assert not fake.same_commit(old) and not fake.extends(old)
    log = cache.turn_log(layout, new)
    assert log.marker == new
    cache.put(log)
    cache.forget(new.key)
    assert cache.turn_log(layout, new).marker == new  # read again after forget


def test_a_replicas_view_never_lags_into_a_recreated_id(tmp_path, embedder):
    """A replica caches X's view; X is erased elsewhere and re-created with the same first turns but
    other records before this replica saw its marker vanish. Its next search must not show the erased
    records (a *lagging* view would: it keeps the old records while it rebuilds in the background)."""
    root = make_store(tmp_path / "store", embedder, [conversation_spec("x", "u-1")])
    cfg = load_config(env={}, sets=["appends.view_rebuild=background", "appends.view_rebuild_background_min_rows=0"])
    store = MemoryStore.open(root, cfg, embedder=embedder, llm="rules")
    try:
        q = "When did Caroline give a speech at a school?"
        before = store.search("x", q)
        erased_text = RECORDS[4][1]  # "Caroline gave a speech at a school ..." (a record only the erased X has)
        assert any(e.text == erased_text for e in before.evidence)
        erase_conversation(root, "x")
        make_store(root, embedder, [conversation_spec("x", "u-1", records=RECORDS[:3])])  # same turns, fewer records
        store.reader.refresh_conversation("x")  # what the per-request marker check does when the marker changed
        after = store.search("x", q)
        assert all(e.text != erased_text for e in after.evidence), [e.text for e in after.evidence]
        view = store.view("x")
        assert not view.lagging and view.num_records == 3
        assert store.cache.stats()["lagged"] == 0
    finally:
        store.close()


def test_encode_queue_cancel_drops_a_waiting_conversation():
    ran: list[str] = []
    hold = threading.Event()

    def catch_up(cid: str) -> None:
        if cid == "busy":
            hold.wait(30)
        ran.append(cid)

    q = EncodeQueue(catch_up, max_pending=8, retry_s=1.0)
    assert q.submit("busy")
    deadline = time.monotonic() + 30
    while "busy" in q._pending and time.monotonic() < deadline:  # the worker took it: now it runs
        time.sleep(0.01)
    assert q.submit("erased") and q.submit("kept")
    assert q.cancel("erased") and not q.cancel("erased") and not q.cancel("unknown")
    hold.set()
    assert q.drain(30)
    assert ran == ["busy", "kept"]
    q.stop()
