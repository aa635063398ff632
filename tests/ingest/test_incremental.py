"""Incremental builds and appends (issue 18; docs/incremental.md).

* a LoCoMo conversation built in k increments (split at any turn, mid-session included) equals
  one build: segments, records and nodes tables identical (rules backend), ``verify`` ok after
  every step; the same through ``MemoryStore.append`` in chunks plus a final flush;
* rewritten histories: ``conflict`` (changed / removed / reordered), ``on_conflict="rebuild"``;
* appends: idempotency, conflict, owner mismatch, creation rules, flush, raw-turn search at once;
* two writers (threads and processes) on one conversation lose nothing; a reader polling during
  appends only ever sees one whole generation; old generations are removed;
* compacted conversations and stores without a saved segmenter state are appendable.

A hashing embedder keeps this fast (the equivalence holds for any embedder that gives a text the
same vector whatever it is batched with; benchmarks/append.py checks it with MiniLM).
"""

from __future__ import annotations

import json
import multiprocessing
import threading
from pathlib import Path

import pytest

from lychee_ray.ingest.increment import (
    ConfigMismatch,
    ConversationBusy,
    HistoryConflict,
    InvalidTurns,
    OwnerMismatch,
    UnknownConversationError,
    UserIdRequired,
)
from lychee_ray.io.store.locks import write_lock
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build_items
from lychee_ray.config import load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.io.adapters import AdapterItem, read_input
from lychee_ray.io.store import StoreReader, StoreWriter, StoreLayout, conversation_key, iter_markers, read_part
from lychee_ray.io.store.locks import ConversationDeleting
from lychee_ray.io.verify import verify_store
from lychee_ray.memory import MemoryStore
from tests.paths import LOCOMO_DIR, need
from tests.reliability.test_bad_input import HashEmbedder


CFG = load_config(env={})
TABLES = ("records", "segments", "nodes", "turns")


@pytest.fixture(scope="module")
def ctx():
    return make_context(CFG, "rules", HashEmbedder())


@pytest.fixture(scope="module")
def conv() -> Conversation:
    """LoCoMo conversation 26, first four sessions (76 turns, two speakers)."""
    c = next(iter(read_input("locomo", need(LOCOMO_DIR / "26.json")))).conversation
    return c.model_copy(update={"sessions": c.sessions[:4]})


def prefix(conv: Conversation, k: int) -> Conversation:
    """The conversation's first ``k`` turns (a session cut mid-way keeps its first turns)."""
    sessions, left = [], k
    for s in conv.sessions:
        if left <= 0:
            break
        sessions.append(s.model_copy(update={"turns": s.turns[:left]}))
        left -= len(s.turns)
    return conv.model_copy(update={"sessions": sessions})


def build(ctx, out: Path, *convs: Conversation, **kw):
    items = [AdapterItem(file="mem", line=i, conversation=c) for i, c in enumerate(convs)]
    return run_local_build_items(CFG, items, out, backend="rules", ctx=ctx, **kw)


def tables(root: Path, cid: str) -> dict:
    m = next(x for x in iter_markers(root) if x.conversation_id == cid)
    return {t: read_part(root, t, m) for t in TABLES}


def turn_dicts(conv: Conversation) -> list[dict]:
    return [dict(turn_id=t.turn_id, role=t.role, speaker=t.speaker, content=t.content, timestamp=t.timestamp,
                 session_id=s.session_id, session_started_at=s.started_at, meta=t.meta) for _, s, _, t in conv.iter_turns()]


@pytest.fixture(scope="module")
def reference(tmp_path_factory, ctx, conv):
    """One build of the whole conversation."""
    root = tmp_path_factory.mktemp("full")
    s = build(ctx, root, conv)
    assert s.built == 1 and s.appended == 0
    return tables(root, conv.conversation_id), s


# splits: turn 1 (one speaker so far), mid-session, session boundaries (18, 35), near the end
@pytest.mark.parametrize("cuts", [(1, 30, 76), (9, 18, 47, 76), (35, 60, 75, 76)])
def test_k_increments_equal_one_build_and_verify_after_each(tmp_path, ctx, conv, reference, cuts):
    ref, full = reference
    for i, k in enumerate(cuts):
        s = build(ctx, tmp_path, prefix(conv, k))
        assert (s.built, s.failed, s.appended) == (1, 0, int(i > 0)), s.errors
        rep = verify_store(tmp_path)
        assert rep["ok"], (k, rep["problems"])
    got = tables(tmp_path, conv.conversation_id)
    for t in TABLES:
        assert got[t].equals(ref[t]), t
    assert build(ctx, tmp_path, conv).skipped == 1  # unchanged now: skipped as before
    # only what is new is encoded: the last increment's encode calls are a few, not all segments
    last = next(iter_markers(tmp_path)).last_increment
    assert last is not None and 0 < last.segments_encoded < ref["segments"].num_rows


def test_appends_in_chunks_then_flush_equal_one_build(tmp_path, ctx, conv, reference):
    ref, _ = reference
    StoreWriter(tmp_path)
    store = MemoryStore.open(tmp_path, CFG, embedder=HashEmbedder(), llm="rules")
    turns = turn_dicts(conv)
    opened = 0
    for a, b in ((0, 7), (7, 40), (40, 76)):
        r = store.append(conv.conversation_id, turns[a:b], user_id=conv.user_id)
        assert r.stored_turn_ids == [t["turn_id"] for t in turns[a:b]] and r.generation is not None
        assert r.open_turn_ids, "the tail stays open without flush"
        opened = len(r.open_turn_ids)
        assert verify_store(tmp_path)["ok"]
    r = store.flush(conv.conversation_id)
    assert r.segments_encoded and not r.open_turn_ids and opened
    got = tables(tmp_path, conv.conversation_id)
    for t in TABLES:
        assert got[t].equals(ref[t]), t
    assert store.flush(conv.conversation_id).generation is None  # nothing open: nothing written


def test_rewritten_history_is_a_conflict_unless_rebuild(tmp_path, ctx, conv):
    cid = conv.conversation_id
    build(ctx, tmp_path, prefix(conv, 20))
    s0 = turn_dicts(conv)
    changed = prefix(conv, 30)
    changed.sessions[0].turns[3] = changed.sessions[0].turns[3].model_copy(update={"content": "something else"})
    removed = prefix(conv, 30)
    del removed.sessions[0].turns[5]
    swapped = prefix(conv, 30)
    t = swapped.sessions[0].turns
    t[1], t[2] = t[2], t[1]
    for bad, kind, turn in ((changed, "changed", s0[3]["turn_id"]), (removed, "removed", s0[5]["turn_id"]),
                            (swapped, "reordered", s0[1]["turn_id"])):
        s = build(ctx, tmp_path, bad)
        assert s.failed == 1 and s.errors[0]["stage"] == "conflict", s.errors
        assert turn in s.errors[0]["message"] and cid in s.errors[0]["message"] and kind != ""
    errs = StoreReader(tmp_path).errors()
    assert errs.column("stage").to_pylist().count("conflict") == 3
    assert tables(tmp_path, cid)["turns"].num_rows == 20  # the stored conversation is untouched
    s = build(ctx, tmp_path, changed, on_conflict="rebuild")
    assert s.built == 1 and s.failed == 0 and s.appended == 0
    assert "something else" in tables(tmp_path, cid)["turns"].column("content").to_pylist()
    assert verify_store(tmp_path)["ok"]


def test_on_conflict_reaches_every_runner():
    import inspect

    from lychee_ray.api import build_memory
    from lychee_ray.cli.main import build_parser
    from lychee_ray.ray.build_job import run_ray_build

    args = build_parser().parse_args(["build", "--input", "x", "--out", "y", "--on-conflict", "rebuild"])
    assert args.on_conflict == "rebuild"
    assert build_parser().parse_args(["build", "--input", "x", "--out", "y"]).on_conflict is None  # config decides
    for fn in (build_memory, run_ray_build, run_local_build_items):
        assert "on_conflict" in inspect.signature(fn).parameters
    assert CFG.build.on_conflict == "error"


def test_check_history_names_the_kind(tmp_path, ctx, conv):
    from lychee_ray.ingest.increment.stored import load_stored
    from lychee_ray.ingest.increment.turns import check_history

    build(ctx, tmp_path, prefix(conv, 10))
    stored = load_stored(tmp_path, next(iter_markers(tmp_path))).turn_log()
    assert check_history(stored, prefix(conv, 15)) == 10
    # an older copy (its turns open the stored ones, which go on): how many of its turns are stored
    assert check_history(stored, prefix(conv, 8)) == 8
    gap = prefix(conv, 15)
    del gap.sessions[0].turns[5]
    with pytest.raises(HistoryConflict) as e:
        check_history(stored, gap)
    assert (e.value.kind, e.value.conflict, e.value.conversation_id) == ("history_conflict", "removed", conv.conversation_id)
    assert e.value.turn_id == turn_dicts(conv)[5]["turn_id"]
    with pytest.raises(OwnerMismatch):
        check_history(stored, prefix(conv, 15).model_copy(update={"user_id": "someone-else"}))


def test_an_older_log_of_a_grown_conversation_is_skipped_with_a_warning_and_its_turns_kept(tmp_path, ctx, conv):
    """A log re-imported after appends grew its conversation (the store holds turns after the log's
    last): skipped, one warning naming the turns kept, nothing written — not a conflict."""
    cid = conv.conversation_id
    build(ctx, tmp_path, prefix(conv, 10))
    store = MemoryStore.open(tmp_path, CFG, embedder=HashEmbedder(), llm="rules")
    extra = turn_dicts(conv)[10:12]
    assert store.append(cid, extra).stored_turn_ids == [t["turn_id"] for t in extra]
    before = next(iter_markers(tmp_path))
    s = build(ctx, tmp_path, prefix(conv, 10))
    assert (s.skipped, s.failed, s.built) == (1, 0, 0), s.errors
    (w,) = s.warnings
    assert w["conversation_id"] == cid and "2 turn(s) after this input's last" in w["message"]
    assert all(repr(t["turn_id"]) in w["message"] for t in extra)
    after = next(iter_markers(tmp_path))
    assert after.same_commit(before) and after.counts.turns == 12  # the appended turns kept, nothing written
    assert StoreReader(tmp_path).errors().column("stage").to_pylist() == ["warning"]
    assert verify_store(tmp_path)["ok"]


def test_append_idempotent_conflict_owner_create_and_search(tmp_path, ctx):
    StoreWriter(tmp_path)
    store = MemoryStore.open(tmp_path, CFG, embedder=HashEmbedder(), llm="rules")
    t1 = {"turn_id": "a1", "role": "user", "speaker": "Ana", "content": "I adopted a grey cat named Pixel yesterday."}
    t2 = {"turn_id": "a2", "role": "assistant", "speaker": "Bot", "content": "Congratulations on adopting Pixel!"}
    with pytest.raises(UserIdRequired):
        store.append("c-new", [t1])
    with pytest.raises(UnknownConversationError):
        MemoryStore.open(tmp_path, load_config(env={}, sets=["appends.create=false"]), embedder=HashEmbedder(),
                         llm="rules").append("c-new", [t1], user_id="u1")
    r = store.append("c-new", [t1, t2], user_id="u1")
    assert r.created and r.stored_turn_ids == ["a1", "a2"] and r.generation
    hits = store.search("c-new", "What is the name of the cat?").evidence
    assert any(e.id == "a1" for e in hits)  # the raw-turn channel finds it before any segment closed
    again = store.append("c-new", [t1, t2], user_id="u1")
    assert again.duplicate_turn_ids == ["a1", "a2"] and not again.stored_turn_ids and again.generation is None
    with pytest.raises(HistoryConflict) as e:
        store.append("c-new", [{**t1, "content": "I adopted a dog."}])
    assert e.value.turn_id == "a1" and e.value.conflict == "changed"
    with pytest.raises(OwnerMismatch):
        store.append("c-new", [{**t1, "turn_id": "a3"}], user_id="u2")
    with pytest.raises(InvalidTurns) as e:
        store.append("c-new", [{"turn_id": "a4", "role": "robot", "content": "x"}])
    assert e.value.kind == "invalid_turns" and "role" in (e.value.field or "")
    with pytest.raises(HistoryConflict):  # a turn for a session that is not the last one
        store.append("c-new", [{"turn_id": "a5", "content": "late", "session_id": "s0"},
                               {"turn_id": "a6", "content": "later", "session_id": "s1"}])
    f = store.flush("c-new", user_id="u1")
    assert f.segments_encoded and f.records_written > 0 and not f.open_turn_ids
    # the flushed records are searchable: a record is shown, or it lifted its source turn (issue 27's turn units
    # carry the record channels that found them; before the flush only the raw-turn channels could)
    assert any(e.kind == "record" or {"records", "nodes"} & set(e.channels)
               for e in store.search("c-new", "What is the name of the cat?").evidence)
    assert verify_store(tmp_path)["ok"]


def _append_worker(root: str, prefix_: str, n: int, ready=None, go=None) -> None:
    store = MemoryStore.open(root, CFG, embedder=HashEmbedder(), llm="rules")
    if ready is not None:  # a process: start appending together with the threads
        ready.set()
        go.wait()
    for i in range(n):
        store.append("c-shared", [{"turn_id": f"{prefix_}{i}", "content": f"{prefix_} says thing number {i} about rivers."}],
                     user_id="u1")


@pytest.mark.heavy
def test_concurrent_appenders_lose_nothing_and_readers_see_whole_generations(tmp_path):
    StoreWriter(tmp_path)
    _append_worker(str(tmp_path), "seed", 1)
    stop, seen, errors = threading.Event(), set(), []

    def reader() -> None:
        r = StoreReader(tmp_path)
        while not stop.is_set():
            r.refresh()
            try:
                d = r.load("c-shared")  # one generation's files, or a fresh marker's if that one was replaced
            except Exception as e:  # noqa: BLE001 — reported by the test, not lost in the thread
                errors.append(repr(e))
                continue
            m = r.markers["c-shared"]
            ok = (d.turns.num_rows == d.turn_index.ntotal == m.counts.turns and d.ids["turns"] ==
                  d.turns.column("turn_id").to_pylist() and d.records.num_rows == m.counts.records)
            if not ok:
                errors.append(m.generation)
            seen.add(m.generations[-1])  # the newest generation: a base or a delta on it

    mp = multiprocessing.get_context("spawn")  # a separate process: the lock must hold across processes
    ready, go = mp.Event(), mp.Event()
    procs = [mp.Process(target=_append_worker, args=(str(tmp_path), "pa", 5, ready, go))]
    procs[0].start()
    assert ready.wait(60)
    t_read = threading.Thread(target=reader)
    t_read.start()
    threads = [threading.Thread(target=_append_worker, args=(str(tmp_path), p, 5)) for p in ("ta", "tb")]
    go.set()
    for w in threads:
        w.start()
    for w in threads + procs:
        w.join()
    stop.set()
    t_read.join()
    assert all(p.exitcode == 0 for p in procs)
    ids = set(tables(tmp_path, "c-shared")["turns"].column("turn_id").to_pylist())
    assert ids == {"seed0"} | {f"{p}{i}" for p in ("ta", "tb", "pa") for i in range(5)}
    assert not errors and len(seen) > 1
    assert verify_store(tmp_path)["ok"]
    # only the current commit's generations (its base and deltas) have files
    layout = StoreLayout(tmp_path)
    marker = next(iter_markers(tmp_path))
    assert sorted(layout.generation_paths(marker.key)) == sorted(marker.generations)


def test_busy_or_deleting_conversation_refuses_appends_with_typed_errors(tmp_path):
    StoreWriter(tmp_path)
    store = MemoryStore.open(tmp_path, load_config(env={}, sets=["appends.lock_timeout_s=0.2"]),
                             embedder=HashEmbedder(), llm="rules")
    with write_lock(tmp_path, "c-busy"):
        with pytest.raises(ConversationBusy) as e:
            store.append("c-busy", [{"turn_id": "x", "content": "hello"}], user_id="u")
    assert e.value.kind == "conversation_busy"
    assert store.append("c-busy", [{"turn_id": "x", "content": "hello"}], user_id="u").created
    # an erasure of the conversation is running: the append is refused, not lost or written back
    flag = StoreLayout(tmp_path).deleting_path(conversation_key("c-busy"))
    flag.write_text("{}")
    with pytest.raises(ConversationDeleting):
        store.append("c-busy", [{"turn_id": "y", "content": "again"}], user_id="u")
    flag.unlink()
    assert tables(tmp_path, "c-busy")["turns"].column("turn_id").to_pylist() == ["x"]


def test_compacted_conversations_of_older_stores_are_appendable(tmp_path, ctx, conv, reference):
    ref, _ = reference
    build(ctx, tmp_path, prefix(conv, 30))  # the run compacts its parts
    marker = next(iter_markers(tmp_path))
    assert set(marker.location) == {"records", "nodes", "turns", "segments", "usage", "passages"}
    # ... and make it look like a store written before generations: fixed index paths, no state
    layout = StoreLayout(tmp_path)
    for f in layout.marker_index_dir(marker).iterdir():
        f.rename(layout.index_dir(marker.key) / f.name)
    layout.marker_index_dir(marker).rmdir()
    layout.marker_segstate_path(marker).unlink()
    v1 = json.loads(marker.to_json())  # a version-1 marker: no version field, no generation
    del v1["version"], v1["generation"]
    layout.marker_path(marker.key).write_text(json.dumps(v1))
    # version 2 reads no fixed paths: the store opens and says what to do; the append migrates it
    assert verify_store(tmp_path)["problems"][conv.conversation_id][0].startswith("needs_migration")
    store = MemoryStore.open(tmp_path, CFG, embedder=HashEmbedder(), llm="rules")
    r = store.append(conv.conversation_id, turn_dicts(conv)[30:50])
    assert r.stored_turn_ids and r.rebuilt == "no_segmenter_state" and verify_store(tmp_path)["ok"]
    assert list(layout.generation_paths(marker.key)) == [r.generation]  # the old fixed paths are gone
    s = build(ctx, tmp_path, conv)
    assert s.appended == 1 and next(iter_markers(tmp_path)).last_increment.rebuilt is None
    got = tables(tmp_path, conv.conversation_id)
    for t in ("records", "segments", "nodes"):
        assert got[t].equals(ref[t]), t
    assert verify_store(tmp_path)["ok"]


def test_iter_turns_from_equals_skipping_turn_by_turn(conv):
    """Conversation.iter_turns_from(k) is iter_turns() without its first k turns (sessions skipped
    whole), for every k, and past the end."""
    import itertools

    whole = list(conv.iter_turns())
    for k in [0, 1, 5, len(conv.sessions[0].turns), len(conv.sessions[0].turns) + 1, len(whole) - 1, len(whole), len(whole) + 3]:
        assert list(conv.iter_turns_from(k)) == list(itertools.islice(iter(whole), k, None)), k



def test_store_built_in_pair_units_is_rebuilt_in_turn_units(tmp_path, ctx, conv, reference):
    """A store whose two-human chat was segmented in pair units (``auto_without_roles: pair``, the default
    before issue 38's last step) was built with other settings: an API append refuses it with a typed
    error (nothing written), and the next build rebuilds it whole, exactly as a fresh build in turn units."""
    pair_cfg = load_config(env={}, sets=["segmenter.auto_without_roles=pair"])
    items = [AdapterItem(file="mem", line=0, conversation=prefix(conv, 30))]
    run_local_build_items(pair_cfg, items, tmp_path, backend="rules", ctx=make_context(pair_cfg, "rules", HashEmbedder()))
    layout = StoreLayout(tmp_path)
    marker = next(iter_markers(tmp_path))
    assert json.loads(layout.marker_segstate_path(marker).read_text())["segmenter"]["mode"] == "pair"
    store = MemoryStore.open(tmp_path, CFG, embedder=HashEmbedder(), llm="rules")
    with pytest.raises(ConfigMismatch) as e:
        store.append(conv.conversation_id, turn_dicts(conv)[30:50])
    assert e.value.kind == "config_mismatch" and next(iter_markers(tmp_path)) == marker
    s = build(ctx, tmp_path, conv)
    assert s.built == 1 and s.appended == 0
    marker = next(iter_markers(tmp_path))
    assert json.loads(layout.marker_segstate_path(marker).read_text())["segmenter"]["mode"] == "turn"
    got = tables(tmp_path, conv.conversation_id)
    for t in ("records", "segments", "nodes"):
        assert got[t].equals(reference[0][t]), t
    assert verify_store(tmp_path)["ok"]
