"""Crash and resume: builds killed at random points, then re-run.

After every crash a reader opened at that moment sees only whole conversations (each visible one
passes ``verify`` and equals what the finished store holds for it), and the re-run completes with
every conversation committed exactly once (a conversation visible after a crash is never rebuilt:
its commit marker is unchanged at the end) and nothing lost (the final store holds every input).

* every file operation of the build's commits, compaction and manifest (in process, no Ray);
* the Ray job's driver (``lychee-ray build`` joined to the session's Ray), SIGKILLed right after its
  first commit and then at seeded random points in a loop of runs on one store, while a reader
  polls the store;
* one build-stage actor (``BuildStage``) and the rate limiter actor killed with ``ray.kill`` mid-run.

``LYCHEE_RELIABILITY_ROUNDS`` (default 2) sets the loop sizes CI runs; the ``slow`` variants (run
with ``LYCHEE_SLOW=1``) loop longer.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

import pytest

from lychee_ray.config import load_config
from lychee_ray.io.store import StoreReader, iter_markers
from lychee_ray.testing.fake_llm import encoder_reply
from lychee_ray.testing.openai_server import OpenAIServer
from lychee_ray.testing.recording import CHAT_PATH
from lychee_ray.testing.synthetic import synthetic_conversation
from lychee_ray.io.verify import verify_conversation

pytestmark = pytest.mark.reliability

ROUNDS = max(1, int(os.environ.get("LYCHEE_RELIABILITY_ROUNDS", "2")))
SEED = int(os.environ.get("LYCHEE_RELIABILITY_SEED", "20240909"))
BUILDER_CLASS = "MapWorker(MapBatches(BuildStage))"
COMMIT_CLASS = "MapWorker(MapBatches(CommitStage))"
# one conversation per batch from the build stage on: commits stream one by one, so a kill lands mid-run
STREAMING_SETS = [f"ray.stages.{st}.batch_size=1" for st in ("build", "embed_memory", "commit")]
LATENCY_S = 0.4  # the fake LLM's reply time: keeps a run long enough to be killed mid-way


def write_input(path: Path, n: int, seed: int) -> dict[str, tuple[str, ...]]:
    """``n`` synthetic conversations as JSONL; returns conversation id -> its turn ids."""
    convs = [synthetic_conversation(i, seed=seed, sessions=1, topics_per_session=2) for i in range(n)]
    path.write_text("\n".join(c.model_dump_json() for c in convs) + "\n")
    return {c.conversation_id: tuple(t.turn_id for s in c.sessions for t in s.turns) for c in convs}


# ------------------------------------------------------------------------------------------------
# what a reader sees
# ------------------------------------------------------------------------------------------------


def visible_state(root: Path) -> dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]]:
    """Open a reader now: every visible conversation must be whole.
    Returns cid -> (commit time, sorted record ids, turn ids)."""
    if not (root / "commits").is_dir():
        return {}
    r = StoreReader(root)
    out = {}
    for cid in r.conversation_ids():
        assert verify_conversation(r, cid) == [], cid
        d = r.load(cid)
        m = r.markers[cid]
        counts = m.counts
        assert (d.records.num_rows, d.turns.num_rows, d.segments.num_rows) == (
            counts.records, counts.turns, counts.segments), cid
        assert d.record_index.ntotal == d.records.num_rows and d.turn_index.ntotal == d.turns.num_rows
        out[cid] = (m.committed_at, tuple(sorted(d.records.column("record_id").to_pylist())),
                    tuple(d.turns.column("turn_id").to_pylist()))
    return out


def assert_exactly_once(snapshots: list[dict], final: dict, expected: dict[str, tuple[str, ...]]) -> None:
    """Nothing lost (every input conversation is in the final store with all its turns) and nothing
    committed twice (what a reader saw after a crash is exactly what the final store holds: the same
    commit, the same records)."""
    assert sorted(final) == sorted(expected)
    for cid, (_, records, turns) in final.items():
        assert records and turns == expected[cid], cid
    for snap in snapshots:
        for cid, state in snap.items():
            assert final[cid] == state, f"{cid} was rebuilt or changed after it was visible"


class PollingReader(threading.Thread):
    """Opens readers in a loop while a build runs; every visible conversation must be whole."""

    def __init__(self, root: Path) -> None:
        super().__init__(daemon=True)
        self.root, self.stop, self.errors, self.polls, self.seen = root, threading.Event(), [], 0, 0

    def run(self) -> None:
        while not self.stop.is_set():
            for attempt in range(2):
                try:
                    self.seen = max(self.seen, len(visible_state(self.root)))
                    self.polls += 1
                    break
                except FileNotFoundError:  # compaction removed a part after this reader read its marker
                    if attempt:
                        self.errors.append("part missing after a fresh marker read")
                except AssertionError as e:
                    self.errors.append(f"partial conversation visible: {e}")
                    break
            time.sleep(0.2)


def visible_state_now(root: Path) -> dict[str, tuple[str, tuple[str, ...]]]:
    """:func:`visible_state` while a build may be compacting (a part can vanish under an old marker)."""
    try:
        return visible_state(root)
    except FileNotFoundError:
        return visible_state(root)


# ------------------------------------------------------------------------------------------------
# 1. a crash at each file operation of commit / compaction / manifest (in process)
# ------------------------------------------------------------------------------------------------


class Crash(BaseException):
    """The process 'dies' here (BaseException: no library handler catches it)."""


@contextmanager
def crash_at(root: Path, k: int | None) -> Iterator[list[int]]:
    """Count os.replace / os.unlink calls on files under ``root``; the ``k``-th one crashes.
    Like a SIGKILL, nothing cleans up afterwards (the commit's staging directory stays)."""
    import shutil  # the store removes directory trees with shutil.rmtree (io/store/fs.remove_tree)

    calls = [0]
    real_replace, real_unlink, real_rmtree = os.replace, os.unlink, shutil.rmtree
    prefix = str(root)

    crashed = [False]

    def counted(fn):
        def wrapper(*args, **kwargs):
            if str(args[0]).startswith(prefix):
                if calls[0] == k:
                    crashed[0] = True
                    raise Crash(f"crash at file operation {k}: {fn.__name__}({args[0]})")
                calls[0] += 1
            return fn(*args, **kwargs)
        return wrapper

    def rmtree(path, *a, **kw):  # skipped once crashed (a dead process does not clean up)
        if not crashed[0]:
            return real_rmtree(path, *a, **kw)

    os.replace, os.unlink = counted(real_replace), counted(real_unlink)
    shutil.rmtree = rmtree
    try:
        yield calls
    finally:
        os.replace, os.unlink, shutil.rmtree = real_replace, real_unlink, real_rmtree


class MemoEmbedder:
    """The session embedder with a memo: the crash loop re-embeds the same texts many times."""

    def __init__(self, inner: Any) -> None:
        self.inner, self.name, self.dim = inner, inner.name, inner.dim
        self.memo: dict[str, Any] = {}
        self.lock = threading.Lock()

    def encode(self, texts: Any) -> Any:
        import numpy as np

        texts = list(texts)
        with self.lock:
            todo = list(dict.fromkeys(t for t in texts if t not in self.memo))
        if todo:
            for t, v in zip(todo, self.inner.encode(todo)):
                with self.lock:
                    self.memo[t] = v
        with self.lock:
            return np.stack([self.memo[t] for t in texts]) if texts else self.inner.encode([])


def _local_build(src: Path, out: Path, embedder) -> Any:
    from lychee_ray.ingest.context import make_context
    from lychee_ray.ingest.runner import run_local_build

    cfg = load_config(env={}, sets=["build.compact_conversations_per_file=2", "build.conversations_in_flight=2"])
    return run_local_build(cfg, "jsonl", src, out, backend="rules", ctx=make_context(cfg, "rules", embedder=embedder))


def _crash_every_step(tmp_path: Path, embedder, sample: int | None) -> None:
    n = 3
    src = tmp_path / "in.jsonl"
    ids = write_input(src, n, seed=5)
    embedder = MemoEmbedder(embedder)
    clean = tmp_path / "clean"
    with crash_at(clean, None) as calls:
        s = _local_build(src, clean, embedder)
    total = calls[0]
    assert s.built == n and total >= n * 7  # each commit alone: marker removal + 5 tables + index + marker
    reference = {cid: st[1:] for cid, st in visible_state(clean).items()}
    points = list(range(total))
    if sample is not None and sample < total:
        rng = random.Random(SEED)
        points = sorted({0, total - 1, *rng.sample(points, sample)})
    for k in points:
        out = tmp_path / f"crash-{k}"
        with pytest.raises(Crash):
            with crash_at(out, k):
                _local_build(src, out, embedder)
        seen = visible_state(out)  # a reader opened right after the crash
        assert {cid: st[1:] for cid, st in seen.items()} == {c: reference[c] for c in seen}, k
        again = _local_build(src, out, embedder)
        assert (again.built, again.skipped, again.failed) == (n - len(seen), len(seen), 0), k
        final = visible_state(out)
        assert_exactly_once([seen], final, ids)
        assert {cid: st[1:] for cid, st in final.items()} == reference
        assert len(list((out / "commits").glob("*.json"))) == n


@pytest.mark.heavy
def test_crash_at_sampled_file_operations_then_resume(tmp_path, embedder):
    _crash_every_step(tmp_path, embedder, sample=4 * ROUNDS)


@pytest.mark.slow
def test_crash_at_every_file_operation_then_resume(tmp_path, embedder):
    _crash_every_step(tmp_path, embedder, sample=None)


# ------------------------------------------------------------------------------------------------
# Ray: the driver killed in a loop; one actor killed
# ------------------------------------------------------------------------------------------------


def _actors(class_name: str, alive_only: bool = True) -> dict[str, dict[str, Any]]:
    from ray._private import state

    return {aid: a for aid, a in state.actors().items() if a.get("ActorClassName") == class_name
            and (not alive_only or a.get("State") != "DEAD")}


def _wait_no_actors(class_name: str, timeout: float = 60.0) -> None:
    """A killed driver's actors die with it (no zombie builder may commit after the kill)."""
    deadline = time.time() + timeout
    while _actors(class_name) and time.time() < deadline:
        time.sleep(0.2)
    assert not _actors(class_name), f"{class_name} actors outlived their job"


def _kill_actor(actor_id: str, no_restart: bool) -> None:
    """``ray.kill`` an actor we hold no handle to (Ray Data owns the pool's actors)."""
    import ray

    handle = ray._private.worker.global_worker.core_worker.get_actor_handle(ray.ActorID.from_hex(actor_id))
    ray.kill(handle, no_restart=no_restart)


def _commits(root: Path) -> int:
    return len(list((root / "commits").glob("*.json"))) if (root / "commits").is_dir() else 0


def _driver_kill_loop(ray_session, tmp_path: Path, rounds: int) -> None:
    """A first run killed right after its first commit (with something committed and something not),
    then ``rounds`` runs killed at seeded random points, then the resume."""
    from lychee_ray.ray.build_job import run_ray_build

    n = 6
    src = tmp_path / "in.jsonl"
    ids = write_input(src, n, seed=2)
    out = tmp_path / "store"
    rng = random.Random(SEED)
    snapshots: list[dict] = []
    kills = 0
    with OpenAIServer(handler=encoder_reply, latency_s=0.3) as srv:
        env = {**os.environ, "RAY_ADDRESS": ray_session.get_runtime_context().gcs_address,
               "LYCHEE_LLM_BASE_URL": srv.base_url, "OPENAI_API_KEY": "test"}
        cmd = [sys.executable, "-m", "lychee_ray.cli.main", "build", "--input", str(src), "--format", "jsonl", "--out", str(out),
               "--llm", "openai", "--set", "build.conversations_in_flight=2", "--set", "ray.stages.build.max_concurrency=0",
               *(f"--set={kv}" for kv in STREAMING_SETS)]
        poller = PollingReader(out)
        poller.start()
        try:
            for r in range(1 + rounds):
                before = _commits(out)
                if before >= n:
                    break
                if r == 0:  # the first run dies right after its first commit
                    target, extra = 1, 0.0
                else:  # seeded kill point: after 0-2 more commits, then a random delay (start-up, encode, commit, ...)
                    target = min(n - 1, before + rng.randint(0, 2))
                    extra = rng.uniform(0.0, 1.0)
                proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
                deadline = time.time() + 180
                while proc.poll() is None and _commits(out) < target and time.time() < deadline:
                    time.sleep(0.05)
                time.sleep(extra)
                finished = proc.poll() is not None
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                kills += not finished
                if r == 0:
                    assert not finished and 1 <= _commits(out) < n, "the first run must be killed mid-run"
                _wait_no_actors(BUILDER_CLASS)
                _wait_no_actors("RateLimiterActor")
                snapshots.append(visible_state(out))
            assert kills >= 1, "no run was killed mid-way"
            cfg = load_config(sets=["llm.base_url=" + srv.base_url, "llm.api_key=test", "build.conversations_in_flight=2"], env={})
            summary = run_ray_build(cfg, "jsonl", src, out, backend="openai", progress=False)
        finally:
            poller.stop.set()
            poller.join(10)
    last = snapshots[-1]
    assert (summary.inputs, summary.failed) == (n, 0)
    assert summary.skipped == len(last) and summary.built == n - len(last)
    final = visible_state(out)
    assert_exactly_once(snapshots, final, ids)
    all_ids = [i for _, records, _ in final.values() for i in records]
    assert len(all_ids) == len(set(all_ids))
    assert not poller.errors, poller.errors[:3]
    assert poller.polls > 0


@pytest.mark.ray
def test_driver_killed_at_random_points_then_resume(ray_session, tmp_path):
    _driver_kill_loop(ray_session, tmp_path, ROUNDS)


@pytest.mark.ray
@pytest.mark.slow
def test_driver_killed_at_random_points_long_loop(ray_session, tmp_path):
    _driver_kill_loop(ray_session, tmp_path, 10)


class ActorKiller(threading.Thread):
    """After the first commit (or ``ready()``) + a seeded random delay, ``ray.kill`` one alive actor of ``cls``."""

    def __init__(self, out: Path, cls: str, no_restart: bool, seed: str, ready: Any = None) -> None:
        super().__init__(daemon=True)
        self.out, self.cls, self.no_restart, self.rng = out, cls, no_restart, random.Random(seed)
        self.ready = ready or (lambda: _commits(self.out) >= 1)
        self.killed: list[str] = []
        self.snapshot: dict = {}

    def run(self) -> None:
        deadline = time.time() + 180
        while not self.ready() and time.time() < deadline:
            time.sleep(0.05)
        time.sleep(self.rng.uniform(0.0, 0.3))
        alive = [aid for aid, a in _actors(self.cls).items() if a.get("State") == "ALIVE"]
        if alive:
            _kill_actor(alive[0], self.no_restart)
            self.killed.append(alive[0])
            self.snapshot = visible_state_now(self.out)


def _encoding_started(srv: OpenAIServer) -> Any:
    """Ready once a builder's first LLM call is in flight: the builder then still holds work, whatever
    the load. (Waiting for the first commit instead let a starved commit stage fall so far behind that
    every build had finished before the kill, and the kill interrupted nothing.)"""
    return lambda: any(r.path == CHAT_PATH for r in srv.requests)


def _actor_run(tmp_path: Path, n: int, seed: int):
    src = tmp_path / "in.jsonl"
    return src, write_input(src, n, seed=seed), tmp_path / "store"


def _cfg(srv: OpenAIServer, *sets: str):
    return load_config(env={}, sets=["llm.base_url=" + srv.base_url, "llm.api_key=test", "build.conversations_in_flight=2",
                                     "ray.stages.build.max_concurrency=0", *STREAMING_SETS, *sets])


@pytest.mark.ray
def test_builder_actor_crash_is_restarted_and_the_run_completes(ray_session, tmp_path):
    """``ray.kill(actor, no_restart=False)`` = the actor's process dies: Ray Data restarts it and
    retries its tasks; the same run finishes with every conversation built exactly once."""
    from lychee_ray.ray.build_job import run_ray_build

    n = 6
    src, ids, out = _actor_run(tmp_path, n, seed=3)
    with OpenAIServer(handler=encoder_reply, latency_s=LATENCY_S) as srv:
        killer = ActorKiller(out, BUILDER_CLASS, no_restart=False, seed=f"{SEED}-restart", ready=_encoding_started(srv))
        killer.start()
        summary = run_ray_build(_cfg(srv), "jsonl", src, out, backend="openai", progress=False)
        killer.join(30)
    assert killer.killed, "no builder was killed mid-run"
    # (a conversation committed just before the kill is reported 'skipped' by the retried task)
    assert (summary.inputs, summary.failed, summary.built + summary.skipped, summary.failed_segments) == (n, 0, n, 0)
    assert_exactly_once([killer.snapshot], visible_state(out), ids)


@pytest.mark.ray
def test_builder_actor_killed_for_good_fails_the_run_then_resume(ray_session, tmp_path):
    """``ray.kill(actor)`` (no restart): the run raises ActorDiedError, having released its limiter and
    claims; what was committed stays whole; the re-run builds the rest, each conversation once."""
    import ray

    from lychee_ray.ray.build_job import run_ray_build

    n = 6
    src, ids, out = _actor_run(tmp_path, n, seed=4)
    with OpenAIServer(handler=encoder_reply, latency_s=LATENCY_S) as srv:
        killer = ActorKiller(out, BUILDER_CLASS, no_restart=True, seed=f"{SEED}-kill", ready=_encoding_started(srv))
        killer.start()
        with pytest.raises(ray.exceptions.ActorDiedError):
            run_ray_build(_cfg(srv), "jsonl", src, out, backend="openai", progress=False)
        killer.join(30)
        assert killer.killed, "no builder was killed mid-run"
        _wait_no_actors("RateLimiterActor", timeout=30)
        # the commit stage's actors go down with the failed job; one may finish the (whole, fenced)
        # commit it was writing when the job failed, so the state is read once they are gone
        _wait_no_actors(COMMIT_CLASS, timeout=60)
        assert not list((out / "_claims").glob("*/*.json"))
        after = visible_state(out)
        assert len(after) < n
        summary = run_ray_build(_cfg(srv), "jsonl", src, out, backend="openai", progress=False)
    assert (summary.inputs, summary.failed) == (n, 0)
    assert summary.skipped == len(after) and summary.built == n - len(after)
    assert_exactly_once([killer.snapshot, after], visible_state(out), ids)


@pytest.mark.ray
def test_rate_limiter_killed_quarantines_segments_then_retry_failed(ray_session, tmp_path):
    """The job's one rate limiter actor killed: the run neither hangs nor crashes (progress reports
    included); segments whose LLM call could not be made are committed as failed (turns kept,
    searchable) and ``retry_failed`` re-encodes exactly those."""
    from lychee_ray.ray.build_job import run_ray_build

    n = 6
    src, ids, out = _actor_run(tmp_path, n, seed=6)
    with OpenAIServer(handler=encoder_reply, latency_s=LATENCY_S) as srv:
        # killed while segments are being encoded (the LLM work runs ahead of the commits: the
        # embedding stages behind it may still be loading their model)
        killer = ActorKiller(out, "RateLimiterActor", no_restart=True, seed=f"{SEED}-limiter",
                             ready=lambda: len(srv.chat_requests()) >= 3)
        killer.start()
        first = run_ray_build(_cfg(srv, "ray.progress_interval_s=0.1"), "jsonl", src, out, backend="openai", progress=True)
        killer.join(30)
        assert killer.killed, "the limiter was not killed mid-run"
        assert (first.inputs, first.built + first.skipped + first.failed) == (n, n)
        after = visible_state(out)
        markers = {m.conversation_id: m for m in iter_markers(out)}
        broken = {cid for cid, m in markers.items() if m.counts.failed_segments > 0}
        assert first.failed_segments == sum(markers[c].counts.failed_segments for c in broken) > 0
        summary = run_ray_build(_cfg(srv), "jsonl", src, out, backend="openai", progress=False, retry_failed=True)
    assert (summary.inputs, summary.failed, summary.failed_segments) == (n, 0, 0)
    assert summary.built == len(broken) + (n - len(after)) and summary.skipped == len(after) - len(broken)
    final = visible_state(out)
    assert sorted(final) == sorted(ids)
    assert all(m.counts.failed_segments == 0 for m in iter_markers(out))
    assert_exactly_once([{c: st for c, st in killer.snapshot.items() if c not in broken},
                         {c: st for c, st in after.items() if c not in broken}], final, ids)
