"""The store on object storage (issue 19 items 1–2), against a real S3-compatible server on 127.0.0.1
(moto, :mod:`lychee_ray.testing.s3_server`) reached through ``pyarrow.fs.S3FileSystem`` — the
production code path; only the endpoint (``AWS_ENDPOINT_URL``) differs.

* build → verify → search → delete on ``s3://``; the store equals a local build of the same input;
* incremental builds on ``s3://`` (old generations removed), the commit protocol after a writer that
  crashed half-way (readers keep the old generation; the garbage goes with the next commit);
* lease locks (object stores have no flock): exclusion (also with every core busy), expiry
  take-over, non-blocking refusal, and no commit by a writer whose lease may have lapsed;
* the bounded FAISS cache; no secret from the URI in any object written.

A hashing embedder keeps it fast (the store code does not care which embedder made the vectors).
"""

from __future__ import annotations

import json
import re
import threading
import time
from pathlib import Path

import pytest

from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build_items
from lychee_ray.ingest.increment.stored import load_stored
from lychee_ray.config import StoreConfig, load_config
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store import (
    StoreReader,
    StoreWriter,
    StoreLayout,
    compact,
    conversation_key,
    conversation_write_lock,
    erase_conversation,
    iter_markers,
    read_part,
)
from lychee_ray.io.store import fs as store_fs
from lychee_ray.io.store import index as store_index
from lychee_ray.io.store.fs import store_root
from lychee_ray.io.store.remote_path import StorePath, display_uri
from lychee_ray.io.store.gc import collect_garbage, garbage_paths
from lychee_ray.io.store.lease import acquire_lease, read_lease
from lychee_ray.io.store.locks import flock_path, release
from lychee_ray.io.store.tables import indexed_tables
from lychee_ray.io.verify import verify_store
from lychee_ray.memory import MemoryStore
from lychee_ray.testing.synthetic import synthetic_conversation
from tests.reliability.test_bad_input import HashEmbedder

CFG = load_config(env={})
TABLES = ("records", "nodes", "segments", "turns")
SECRET = "Zanzibarquill7731"


@pytest.fixture(scope="module")
def ctx():
    return make_context(CFG, "rules", HashEmbedder())


@pytest.fixture(scope="module")
def convs():
    out = []
    for i in range(3):
        c = synthetic_conversation(i, seed=5, sessions=2, topics_per_session=2)
        c.user_id = "u-b" if i == 2 else "u-a"
        out.append(c)
    out[1].sessions[0].turns[0].content += f" My code name is {SECRET}."
    return out


def build(ctx, out, convs, **kw):
    items = [AdapterItem(file="mem", line=i, conversation=c) for i, c in enumerate(convs)]
    return run_local_build_items(CFG, items, out, backend="rules", ctx=ctx, **kw)


def tables(root, cid: str) -> dict:
    m = next(x for x in iter_markers(root) if x.conversation_id == cid)
    return {t: read_part(root, t, m).drop_columns([c for c in ("created_at",) if c in read_part(root, t, m).column_names])
            for t in TABLES}


def object_bytes(s3, uri: str) -> dict[str, bytes]:
    fs = s3.filesystem()
    out = {}
    for key in s3.list_keys(uri):
        with fs.open_input_stream(key) as f:
            out[key] = f.read()
    return out


@pytest.fixture(scope="module")
def local_and_s3(tmp_path_factory, s3_server, ctx, convs):
    """The same three conversations built into a local directory and into ``s3://``."""
    local = tmp_path_factory.mktemp("objstore") / "local"
    assert build(ctx, local, convs).built == 3
    uri = s3_server.bucket("lychee-objstore") + "/store"
    s = build(ctx, uri, convs)
    assert (s.built, s.failed) == (3, 0)
    return local, uri


@pytest.mark.heavy
def test_s3_store_equals_local_build_and_verifies(local_and_s3, convs, s3_server):
    local, uri = local_and_s3
    assert isinstance(store_root(uri), StorePath)
    reader = StoreReader(uri)
    assert reader.conversation_ids() == sorted(c.conversation_id for c in convs)
    for c in convs:
        a, b = tables(local, c.conversation_id), tables(uri, c.conversation_id)
        for t in TABLES:
            assert a[t].equals(b[t]), f"{c.conversation_id} {t} differs between local and s3"
    report = verify_store(uri)
    assert report["ok"], report["problems"]
    assert report["conversations"] == 3
    keys = s3_server.list_keys(uri)
    assert any("/commits/" in k for k in keys) and any(k.endswith(".faiss") for k in keys)
    assert not any("/_staging/" in k or "/_claims/" in k for k in keys), "claims of a finished run are released"
    assert json.loads(next(v for k, v in object_bytes(s3_server, uri).items() if k.endswith("manifest.json")))["counts"][
        "conversations"] == 3


def test_search_on_s3_matches_local(local_and_s3, convs):
    local, uri = local_and_s3
    emb = HashEmbedder()
    q = convs[0].sessions[0].turns[2].content[:60]
    with MemoryStore.open(local, CFG, embedder=emb, llm="rules") as a, MemoryStore.open(uri, CFG, embedder=emb, llm="rules") as b:
        ra = a.search(convs[0].conversation_id, q)
        rb = b.search(convs[0].conversation_id, q)
    assert [e.id for e in ra.evidence] == [e.id for e in rb.evidence] and ra.evidence
    assert ra.context == rb.context


@pytest.mark.heavy
def test_incremental_append_and_old_generations_removed_on_s3(s3_server, ctx, convs, tmp_path):
    uri = s3_server.bucket("lychee-incr") + "/store"
    c = convs[0]
    half = c.model_copy(update={"sessions": c.sessions[:1]})
    assert build(ctx, uri, [half]).built == 1
    s = build(ctx, uri, [c])
    assert s.appended == 1
    local = tmp_path / "one"
    build(ctx, local, [c])
    a, b = tables(local, c.conversation_id), tables(uri, c.conversation_id)
    for t in ("records", "segments", "nodes"):
        assert a[t].equals(b[t]), t
    key = conversation_key(c.conversation_id)
    gens = {k.split(f"/index/{key}/")[1].split("/")[0] for k in s3_server.list_keys(uri) if f"/index/{key}/" in k}
    assert len(gens) == 1, f"old generations left behind: {gens}"
    assert verify_store(uri)["ok"]


@pytest.mark.heavy
@pytest.mark.parametrize("where", ["local", "s3"])
def test_crashed_writer_leaves_old_generation_visible_and_garbage_collected(where, s3_server, ctx, convs, monkeypatch,
                                                                            tmp_path):
    uri = s3_server.bucket("lychee-crash") + "/store" if where == "s3" else str(tmp_path / "store")
    c = convs[2]
    assert build(ctx, uri, [c]).built == 1
    before = tables(uri, c.conversation_id)
    marker = StoreReader(uri).markers[c.conversation_id]
    stored = load_stored(uri, marker)
    writer = StoreWriter(uri)

    # the writer dies after the generation's indexes and two of its Parquet parts are uploaded,
    # before the other parts and the marker
    from lychee_ray.io.store import writer as writer_module

    real_write_parquet = writer_module.write_parquet
    uploaded: list[str] = []

    def boom(table, path):
        if len(uploaded) == 2:
            raise KeyboardInterrupt("killed")
        real_write_parquet(table, path)
        uploaded.append(path.name)

    art = _artifacts_from(stored, c)
    monkeypatch.setattr("lychee_ray.io.store.writer.write_parquet", boom)
    monkeypatch.setattr(StoreWriter, "remove_old_generations", lambda *a, **k: 0)
    # simulate a hard kill: the writer's own clean-up does not run either
    monkeypatch.setattr("lychee_ray.io.store.writer.remove_tree", lambda p: None)
    with pytest.raises(KeyboardInterrupt):
        writer.commit(art)
    monkeypatch.undo()
    layout = StoreLayout(uri)
    key = conversation_key(c.conversation_id)
    assert len(layout.generation_paths(key)) == 2, "the crashed generation's parts are on the store"
    assert len(uploaded) == 2

    def by_gen(found):
        return {g: sorted(map(str, ps)) for g, ps in found.items()}
    # what a commit finds through index/<key>/ alone is all there is (no listing of the table directories)
    assert by_gen(layout.generation_paths(key, complete=False)) == by_gen(layout.generation_paths(key))
    after = tables(uri, c.conversation_id)  # readers trust the marker: the old generation, whole
    for t in TABLES:
        assert before[t].equals(after[t])
    assert verify_store(uri)["ok"]
    assert garbage_paths(uri) == [], "young files may be a writer committing right now: kept"
    swept = collect_garbage(uri, min_age_s=0)  # the sweep at the end of the next build run
    assert swept.files_removed >= 4 and all(marker.generation not in p for p in swept.paths)
    assert list(layout.generation_paths(key)) == [marker.generation]
    for t in TABLES:
        assert before[t].equals(tables(uri, c.conversation_id)[t])
    assert verify_store(uri)["ok"]
    uploaded.clear()
    with pytest.raises(KeyboardInterrupt):  # crash again; this time the conversation's next commit cleans up
        monkeypatch.setattr("lychee_ray.io.store.writer.write_parquet", boom)
        monkeypatch.setattr("lychee_ray.io.store.writer.remove_tree", lambda p: None)
        writer.commit(_artifacts_from(stored, c))
    monkeypatch.undo()
    new = writer.commit(_artifacts_from(stored, c))
    assert list(layout.generation_paths(key)) == [new.generation]


@pytest.mark.heavy
def test_per_conversation_work_lists_no_shared_directory(s3_server, ctx, convs):
    """On an object store a LIST of a directory every conversation writes into (``records/``,
    ``commits/``, ``segstate/`` ...) returns every conversation's objects, so listing one per
    conversation makes a build of N conversations cost O(N²) (a 1,000-conversation benchmark slowed
    from ~700 to ~170 LLM calls/min as the store grew). A build run lists those directories a fixed
    number of times (manifest, garbage sweep, compaction), whatever the number of conversations;
    a commit that replaces a generation lists only the conversation's own index directory."""
    bucket = "lychee-lists"
    uri = s3_server.bucket(bucket) + "/store"
    assert build(ctx, uri, convs[:1]).built == 1
    more = [synthetic_conversation(10 + i, seed=6, sessions=1, topics_per_session=1) for i in range(4)]

    def shared_lists(run: list) -> list[str]:
        s3_server.requests(clear=True)
        assert build(ctx, uri, run).built == len(run)
        own = {conversation_key(c.conversation_id) for c in run}
        return sorted(re.sub(r"_claims/[^/]+/", "_claims/<run>/", r.prefix)  # each run has its own id
                      for r in s3_server.requests() if r.bucket == bucket and r.kind == "LIST"
                      and not any(k in r.prefix for k in own) and "/_locks/" not in r.prefix)
    one, three = shared_lists(more[:1]), shared_lists(more[1:])
    assert one and one == three, (one, three)
    # a commit replacing a generation: its only listing is index/<key>/ (plus pyarrow's probes of
    # the very paths it writes or deletes)
    c = convs[0]
    stored = load_stored(uri, StoreReader(uri).markers[c.conversation_id])
    key = conversation_key(c.conversation_id)
    s3_server.requests(clear=True)
    new = StoreWriter(uri).commit(_artifacts_from(stored, c))
    lists = [r.prefix for r in s3_server.requests() if r.bucket == bucket and r.kind == "LIST"]
    assert f"store/index/{key}/" in lists
    assert all(key in p for p in lists if "/_locks/" not in p), lists
    assert list(StoreLayout(uri).generation_paths(key)) == [new.generation]


def _artifacts_from(stored, conv):
    """A commit of the same content (what a re-run would write)."""
    import numpy as np
    import pyarrow as pa

    from lychee_ray.io.store import ConversationArtifacts

    dim = HashEmbedder().dim
    return ConversationArtifacts(
        conversation_id=conv.conversation_id, user_id=conv.user_id or conv.conversation_id, records=stored.records,
        nodes=[], turns=stored.turns, segments=stored.rows,
        usage=pa.table({"stage": pa.array([], pa.string())}),
        record_vectors=np.zeros((len(stored.records), dim), np.float32), node_vectors=np.zeros((0, dim), np.float32),
        turn_vectors=np.zeros((stored.turns.num_rows, dim), np.float32), fingerprint="crash-test")


@pytest.mark.heavy
def test_compaction_and_erasure_on_s3(s3_server, ctx, convs):
    uri = s3_server.bucket("lychee-erase") + "/store"
    assert build(ctx, uri, convs).built == 3  # the build compacts at its end
    keys = s3_server.list_keys(uri)
    assert any("/records/compact-" in k for k in keys)
    assert any(SECRET.encode() in v for v in object_bytes(s3_server, uri).values())
    gone = convs[1].conversation_id
    report = erase_conversation(uri, gone)
    assert report.conversations == 1 and report.rows_removed["turns"] > 0 and report.files_rewritten > 0
    left = object_bytes(s3_server, uri)
    assert not any(SECRET.encode() in v for v in left.values()), "the erased conversation's text is still stored"
    assert not any(conversation_key(gone) in k for k in left), "an object of the erased conversation is left"
    reader = StoreReader(uri)
    assert reader.conversation_ids() == sorted(c.conversation_id for c in convs if c.conversation_id != gone)
    assert verify_store(uri)["ok"]
    assert json.loads(next(v for k, v in left.items() if k.endswith("manifest.json")))["counts"]["conversations"] == 2
    merged = compact(uri, 16)  # nothing left to merge; compaction on s3 is idempotent
    assert set(merged.values()) == {0}


@pytest.mark.heavy
def test_commit_state_changes_when_a_conversation_commits(s3_server, ctx, convs):
    uri = s3_server.bucket("lychee-state") + "/store"
    build(ctx, uri, convs[:1])
    layout = StoreLayout(uri)
    s0 = layout.commit_state()
    build(ctx, uri, convs[1:2])
    assert layout.commit_state() != s0


def _contend(layout, workers: int, join_s: float) -> tuple[list[int], int, list[str], float]:
    """``workers`` threads take the write lock of one conversation, each holding it 0.15 s; returns
    the order they got it in, the most holders seen at once, their errors and the elapsed time."""
    inside, overlaps, order, errors = [0], [0], [], []

    def worker(i: int) -> None:
        try:
            with conversation_write_lock(layout, "c-1"):
                inside[0] += 1
                overlaps[0] = max(overlaps[0], inside[0])
                order.append(i)
                time.sleep(0.15)
                inside[0] -= 1
        except Exception as e:  # noqa: BLE001 — reported to the caller
            errors.append(repr(e))

    threads = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(workers)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(join_s)
    return order, overlaps[0], errors, time.monotonic() - t0


@pytest.mark.heavy
def test_lease_lock_excludes_expires_and_refuses_when_nonblocking(s3_server):
    settings = StoreConfig(cache_dir=None, cache_max_bytes=1 << 20, lock_lease_s=3.0, lock_poll_s=0.02, lock_settle_s=0.05)
    uri = s3_server.bucket("lychee-lease") + "/store"
    layout = StoreWriter(uri, settings).layout
    order, overlaps, errors, _ = _contend(layout, 3, 30)
    assert not errors and sorted(order) == [0, 1, 2] and overlaps == 1, (errors, order, overlaps)
    path = layout.write_lock_path("c-2")
    assert path.settings is settings  # the lock path carries the store's settings, not a process-wide value
    held = flock_path(path)
    assert flock_path(path, blocking=False) is None  # held: refused at once
    release(held, path)
    assert read_lease(path) is None  # released: the lease object is gone
    # A crashed holder's expired lease is taken at once, not after a lease period of its own: a
    # long lease makes "at once" a bound that holds on a starved machine (a few slow round trips).
    long = StoreConfig(cache_dir=None, cache_max_bytes=1 << 20, lock_lease_s=60.0, lock_poll_s=0.02, lock_settle_s=0.05)
    dead = StoreWriter(uri, long).layout.write_lock_path("c-3")
    dead.write_text(json.dumps({"owner": "dead-writer", "expires_at": time.time() - 1}))
    t0 = time.monotonic()
    taken = acquire_lease(dead, blocking=True)
    assert taken is not None and time.monotonic() - t0 < long.lock_lease_s / 2
    assert read_lease(dead)["owner"] == taken.owner
    taken.release()


def _cpu_burners() -> list:
    """One busy loop per core (the CPU-starved run of issue 39 item 5); terminate them after."""
    import os
    import subprocess
    import sys

    return [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(os.cpu_count() or 2)]


@pytest.mark.subprocess
def test_lease_lock_excludes_while_every_core_is_busy(s3_server):
    """Issue 39 item 5: under CPU starvation (a busy loop on every core beside the moto server and
    the writers) the lock still excludes, every writer gets it in bounded time, and no lease expires
    while its holder is confirming it: the settle wait is capped at a renewal period."""
    settings = StoreConfig(cache_dir=None, cache_max_bytes=1 << 20, lock_lease_s=3.0, lock_poll_s=0.02, lock_settle_s=0.05)
    uri = s3_server.bucket("lychee-lease-busy") + "/store"
    layout = StoreWriter(uri, settings).layout
    burners = _cpu_burners()
    try:
        order, overlaps, errors, elapsed = _contend(layout, 4, 120)
    finally:
        for b in burners:
            b.terminate()
        for b in burners:
            b.wait(10)
    assert not errors and sorted(order) == [0, 1, 2, 3] and overlaps == 1, (errors, order, overlaps)
    assert elapsed < 120


@pytest.mark.heavy
def test_lease_lock_with_round_trips_slowed_down_as_under_starvation(s3_server, monkeypatch):
    """What made the lock test fail on a loaded machine, made deterministic: every lease read and
    write takes 0.3 s (the moto server and the writers starved of CPU). The read+write-based settle
    wait then outgrew the lease, so each writer's lease expired while it was being confirmed and
    was taken over — nobody ever held it. Capped at a renewal period (and renewed while confirmed),
    every writer gets it, one at a time."""
    from lychee_ray.io.store import lease as lease_module

    slow_s = 0.3
    real_read, real_write = lease_module.read_lease, lease_module._write

    def slow_read(path):
        time.sleep(slow_s)
        return real_read(path)

    def slow_write(path, owner, lease_s):
        time.sleep(slow_s)
        real_write(path, owner, lease_s)

    monkeypatch.setattr(lease_module, "read_lease", slow_read)
    monkeypatch.setattr(lease_module, "_write", slow_write)
    settings = StoreConfig(cache_dir=None, cache_max_bytes=1 << 20, lock_lease_s=3.0, lock_poll_s=0.02, lock_settle_s=0.05)
    layout = StoreWriter(s3_server.bucket("lychee-lease-slow") + "/store", settings).layout
    order, overlaps, errors, _ = _contend(layout, 3, 60)
    assert not errors and sorted(order) == [0, 1, 2] and overlaps == 1, (errors, order, overlaps)


@pytest.mark.heavy
def test_a_writer_whose_lease_may_have_lapsed_does_not_commit(s3_server, ctx, convs):
    """A holder whose renewals fell behind (its process starved: the renewer thread late) or whose
    lease another writer took over refuses to commit — LeaseLost, the marker unchanged, the new
    generation's files removed — instead of overwriting the rival's commit."""
    from lychee_ray.io.store.lease import LeaseLost, check_held

    uri = s3_server.bucket("lychee-lease-fence") + "/store"
    assert build(ctx, uri, convs[:1]).built == 1
    c = convs[0]
    writer = StoreWriter(uri)
    layout = writer.layout
    key = conversation_key(c.conversation_id)
    before = layout.read_marker(key)
    stored = load_stored(uri, before)
    lock = layout.write_lock_path(key)
    for lapse in ("starved", "taken_over"):
        with conversation_write_lock(layout, c.conversation_id):
            from lychee_ray.io.store.lease import _HELD  # the lease this process holds for the lock

            lease = _HELD[str(lock)]
            check_held(lock)  # healthy: no error
            if lapse == "starved":  # no renewal for two thirds of the lease: it may expire any moment
                lease.renewed -= layout.settings.lock_lease_s * 0.7
            else:  # a rival saw it expired and wrote its own
                lock.write_text(json.dumps({"owner": "rival", "expires_at": time.time() + 60}))
            with pytest.raises(LeaseLost) as e:
                writer.commit(_artifacts_from(stored, c), locked=True)
            assert e.value.kind == "lease_lost"
        assert layout.read_marker(key) == before  # nothing published
        assert list(layout.generation_paths(key)) == [before.generation]  # its files went
        if lapse == "taken_over":
            assert read_lease(lock)["owner"] == "rival"  # the holder did not remove the rival's lease
            lock.unlink()
    assert verify_store(uri)["ok"]
    assert writer.commit(_artifacts_from(stored, c)).generation != before.generation  # a fresh lock commits


def _starve_leases(monkeypatch, times: int | None) -> list[str]:
    """Make a lease's commit-time check find it starved (renewal two thirds of a lease old), as a
    holder's whose renewer thread fell behind does: the first ``times`` checks per lock (None: every
    check). Returns the lock paths found starved, one entry per check."""
    from lychee_ray.io.store.lease import Lease

    real = Lease.check
    starved: list[str] = []

    def check(self):
        if times is None or starved.count(str(self.path)) < times:
            starved.append(str(self.path))
            self.renewed -= self.path.settings.lock_lease_s * 0.7
        return real(self)

    monkeypatch.setattr(Lease, "check", check)
    return starved


@pytest.mark.heavy
@pytest.mark.parametrize("path", ["new", "grown"])
def test_a_build_whose_lease_lapsed_before_its_commit_commits_again_under_a_fresh_lock(path, s3_server, ctx, convs,
                                                                                       monkeypatch, tmp_path):
    """A builder starved long enough that its lease may have expired refuses to commit (LeaseLost);
    the build then takes the lock again and commits the same work, since nothing else committed the
    conversation meanwhile — every conversation built once (new ones on the build route, grown ones on
    the increment route: one commit step), a warning row says so, the store equals a clean build."""
    uri = s3_server.bucket(f"lychee-recommit-{path}") + "/store"
    grown = convs[:2]
    if path == "grown":
        halves = [c.model_copy(update={"sessions": c.sessions[:1]}) for c in grown]
        assert build(ctx, uri, halves).built == 2
    starved = _starve_leases(monkeypatch, times=1)
    s = build(ctx, uri, grown)
    assert (s.built, s.failed, s.appended) == (2, 0, 2 if path == "grown" else 0), s.errors
    assert len(starved) == 2  # each conversation's first commit was refused once
    said = [w for w in s.warnings if "committed again under a fresh write lock" in w["message"]]
    assert sorted(w["conversation_id"] for w in said) == sorted(c.conversation_id for c in grown)
    monkeypatch.undo()
    local = tmp_path / "clean"
    build(ctx, local, grown)
    for c in grown:
        a, b = tables(local, c.conversation_id), tables(uri, c.conversation_id)
        for t in ("records", "segments", "nodes", "turns"):
            assert a[t].equals(b[t]), (c.conversation_id, t)
    assert verify_store(uri)["ok"]


@pytest.mark.heavy
def test_a_build_whose_lease_keeps_lapsing_fails_at_commit_publishes_nothing_and_a_rerun_builds_it(
        s3_server, ctx, convs, monkeypatch):
    """Refused again on every fresh lock (``store.commit_lease_retries`` more tries): the conversation
    is quarantined at stage ``commit`` with the LeaseLost message, nothing of it is published, and
    the same build run again commits it."""
    uri = s3_server.bucket("lychee-recommit-fails") + "/store"
    c = convs[0]
    starved = _starve_leases(monkeypatch, times=None)
    s = build(ctx, uri, [c])
    assert (s.built, s.failed) == (0, 1)
    assert len(starved) == 1 + CFG.store.commit_lease_retries
    err = s.errors[0]
    assert err["stage"] == "commit" and err["message"].startswith("LeaseLost:"), err
    assert not list(iter_markers(uri)) and not s3_server.list_keys(uri + "/records")
    monkeypatch.undo()
    again = build(ctx, uri, [c])
    assert (again.built, again.failed) == (1, 0)
    assert verify_store(uri)["ok"]


def test_recommit_after_a_lost_lease_only_onto_the_commit_the_work_was_built_on(tmp_path, ctx, convs, monkeypatch):
    """The commit step commits under a fresh lock after a lost lease only while the conversation's
    marker is still the one the work was built on; when another writer committed meanwhile it
    commits nothing (None: the conversation is decided again)."""
    import asyncio

    from lychee_ray.ingest import commit as commit_step
    from lychee_ray.io.store.lease import LeaseLost

    root = tmp_path / "store"
    c = convs[0]
    assert build(ctx, root, [c]).built == 1
    writer = StoreWriter(root)
    key = conversation_key(c.conversation_id)
    first = writer.layout.read_marker(key)
    art = _artifacts_from(load_stored(root, first), c)
    lost = LeaseLost(StorePath.from_uri(str(root / "lock")), "a test")  # a label: no store is reached
    real, refused = commit_step.Held.commit, []

    def lose_once(held, a, based_on):
        if not refused:
            refused.append(based_on)
            raise lost
        return real(held, a, based_on)

    monkeypatch.setattr(commit_step.Held, "commit", lose_once)
    # built as a new conversation, but one is committed now: nothing committed
    assert asyncio.run(commit_step.commit_decided(writer, c.conversation_id, art, None)) is None
    assert writer.layout.read_marker(key) == first and not refused
    # built on the current commit: refused once (the lease), then committed as the next generation
    # of the same lineage under a fresh lock, saying so
    done = asyncio.run(commit_step.commit_decided(writer, c.conversation_id, art, first))
    m = done.marker
    assert refused == [first] and done.lost is lost and "fresh write lock" in done.warnings()[0]
    assert m.generation != first.generation and m.lineage == first.lineage
    # built on a commit that is no longer current: nothing committed
    assert asyncio.run(commit_step.commit_decided(writer, c.conversation_id, art, first)) is None
    assert writer.layout.read_marker(key) == m


def test_index_cache_is_bounded_and_reused(local_and_s3, tmp_path, monkeypatch):
    _, uri = local_and_s3
    reader = StoreReader(uri, StoreConfig(cache_dir=str(tmp_path / "cache"), cache_max_bytes=1))
    for cid in reader.conversation_ids():
        reader.load(cid)
    cached = list((tmp_path / "cache").iterdir())
    assert len(cached) == 1, "beyond the bound only the file just read stays"
    reader = StoreReader(uri, StoreConfig(cache_dir=str(tmp_path / "cache2"), cache_max_bytes=1 << 30))
    cid = reader.conversation_ids()[0]
    reader.load(cid)
    files = {p: p.stat().st_mtime_ns for p in (tmp_path / "cache2").iterdir()}
    assert len(files) == len(indexed_tables())  # records, nodes, turns, passages
    calls = []
    orig = store_index.cached_copy

    def counting(path):
        calls.append(path)
        return orig(path)

    monkeypatch.setattr(store_index, "cached_copy", counting)
    reader.load(cid)
    assert {p.name for p in (tmp_path / "cache2").iterdir()} == {p.name for p in files}
    assert len(calls) == len(indexed_tables())


def test_memory_store_open_uses_the_given_config_store_settings(local_and_s3, tmp_path, monkeypatch):
    """Issue 30: ``MemoryStore.open(path, cfg)`` from library code (no CLI, no configure call) uses
    ``cfg.store`` — its index cache here — and two stores opened in one process with different
    settings keep their own."""
    _, uri = local_and_s3
    monkeypatch.setenv("LYCHEE_CACHE_DIR", str(tmp_path / "default"))  # where the packaged default would cache
    cfg_a = load_config(env={}, sets=[f"store.cache_dir={tmp_path / 'a'}"])
    cfg_b = load_config(env={}, sets=[f"store.cache_dir={tmp_path / 'b'}"])
    a = MemoryStore.open(uri, cfg_a, embedder=HashEmbedder(), llm="rules")
    b = MemoryStore.open(uri, cfg_b, embedder=HashEmbedder(), llm="rules")
    try:
        cid = a.reader.conversation_ids()[0]
        a.reader.load(cid)
        assert len(list((tmp_path / "a").iterdir())) == len(indexed_tables())  # records, nodes, turns, passages indexes
        assert not (tmp_path / "b").exists() and not (tmp_path / "default").exists()
        b.reader.load(cid)
        assert len(list((tmp_path / "b").iterdir())) == len(indexed_tables())
        assert not (tmp_path / "default").exists()
        assert a.reader.layout.settings.cache_dir == str(tmp_path / "a")
        assert StoreLayout(uri).settings == StoreConfig()  # a root opened without settings: packaged defaults
    finally:
        a.close()
        b.close()


@pytest.mark.heavy
def test_no_secret_from_the_uri_is_written_or_shown(s3_server, ctx, convs, caplog):
    s3_server.bucket("lychee-secret")
    host = s3_server.endpoint.removeprefix("http://")
    # credentials in the URI's user info (pyarrow accepts them there), the endpoint in its query
    uri = f"s3://{s3_server.ACCESS_KEY}:SEKRIT-{SECRET}@lychee-secret/store?endpoint_override={host}&scheme=http"
    assert SECRET not in display_uri(uri) and SECRET not in str(store_root(uri))
    assert SECRET not in display_uri(f"gs://b/p?token={SECRET}&x=1")
    s = build(ctx, uri, convs[:1])
    assert s.built == 1
    blobs = object_bytes(s3_server, "s3://lychee-secret/store")
    assert blobs and not any(f"SEKRIT-{SECRET}".encode() in v for v in blobs.values())
    assert f"SEKRIT-{SECRET}" not in caplog.text
    assert verify_store(uri)["ok"]


def test_local_roots_stay_plain_paths(tmp_path):
    assert isinstance(store_root(tmp_path), Path)
    assert store_root(f"file://{tmp_path}") == tmp_path
    assert store_fs.root_string(tmp_path / "x") == str((tmp_path / "x").resolve())
