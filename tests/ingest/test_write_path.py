"""The write path is one: every way a conversation is written decides through ingest/decide.py,
constructs through one constructor per kind of change and re-decides under the write lock through
ingest/commit.py's protocol (``Held.redecide``) before it commits (docs/architecture.md, "The write path").

The entries are run one after another on one store, each with every decider, constructor,
re-decision and commit recorded; a commit without a standing re-decision is refused.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import sys
from collections.abc import Callable
from typing import Any

import pytest

from lychee_ray.ingest import commit as commit_step
from lychee_ray.ingest import decide as decide_step
from lychee_ray.ingest import forget as forget_step
from lychee_ray.ingest import pipeline
from lychee_ray.ingest.append import append_queued, append_turns, catch_up
from lychee_ray.ingest.commit import Held, NotRedecided, hold_sync
from lychee_ray.ingest.decide import Decider
from lychee_ray.ingest.forget import ForgetSelector, forget_records
from lychee_ray.ingest.increment import AppendRequest, AppendTurn, StoredCache
from lychee_ray.ingest.increment import construct as increment_construct
from lychee_ray.ingest.increment import queued_delta
from lychee_ray.io.store import StoreWriter, read_part
from lychee_ray.ingest.context import make_context
from lychee_ray.io.adapters import read_input
from tests.ingest.test_incremental import CFG, build, prefix, turn_dicts
from tests.paths import LOCOMO_DIR, need
from tests.reliability.test_bad_input import HashEmbedder

# decide: the decide step's functions (a build run's Decider; appends, catch-ups, forgets)
DECIDERS = ((Decider, "decide"), (decide_step, "decide_append"), (decide_step, "decide_queued"),
            (decide_step, "decide_catch_up"), (decide_step, "decide_forget"))
# construct: one constructor per kind of change — a conversation whole, an increment, a queued
# append's turns, records forgotten
CONSTRUCTORS = ((pipeline, "build_pending"), (increment_construct, "construct_increment"),
                (queued_delta, "construct_queued"), (forget_step, "_forget_in"))
COMMITS = ("commit", "commit_delta", "commit_increment", "rewrite")

# every write entry: (its name, decider, constructor, what its re-decision needs unchanged)
WRITE_ENTRIES = [
    ("full build", "decide", "build_pending", "commit"),
    ("re-import of a grown log (increment route)", "decide", "construct_increment", "commit"),
    ("--retry-failed", "decide", "build_pending", "commit"),
    ("inline append", "decide_append", "construct_increment", "commit"),
    ("queued append", "decide_queued", "construct_queued", "commit"),
    ("catch-up", "decide_catch_up", "construct_increment", "segmentation"),
    ("forget", "decide_forget", "_forget_in", "commit"),
]


@pytest.fixture(scope="module")
def ctx():
    return make_context(CFG, "rules", HashEmbedder())


@pytest.fixture(scope="module")
def conv():
    """LoCoMo conversation 26, first four sessions (76 turns, two speakers)."""
    c = next(iter(read_input("locomo", need(LOCOMO_DIR / "26.json")))).conversation
    return c.model_copy(update={"sessions": c.sessions[:4]})


def _wrap(real: Callable[..., Any], record: Callable[[], None]) -> Callable[..., Any]:
    if inspect.iscoroutinefunction(real):
        @functools.wraps(real)
        async def spy_async(*a: Any, **k: Any) -> Any:
            record()
            return await real(*a, **k)
        return spy_async

    @functools.wraps(real)
    def spy(*a: Any, **k: Any) -> Any:
        record()
        return real(*a, **k)
    return spy


def _spy(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, calls: list[tuple[str, Any]]) -> None:
    """Record every call of ``owner.name``, wherever the package bound it (``from x import name``)."""
    real = getattr(owner, name)
    spy = _wrap(real, lambda: calls.append((name, None)))
    if isinstance(owner, type):
        monkeypatch.setattr(owner, name, spy)
        return
    for mod in list(sys.modules.values()):
        if (getattr(mod, "__name__", "") or "").startswith("lychee_ray") and getattr(mod, name, None) is real:
            monkeypatch.setattr(mod, name, spy)


@pytest.fixture
def recorded(monkeypatch):
    calls: list[tuple[str, Any]] = []
    for owner, name in (*DECIDERS, *CONSTRUCTORS):
        _spy(monkeypatch, owner, name, calls)
    real_redecide = Held.redecide

    def redecide(held, decided_on, needs="commit"):
        verdict = real_redecide(held, decided_on, needs)
        calls.append(("redecide", (needs, verdict)))
        return verdict

    monkeypatch.setattr(Held, "redecide", redecide)
    for name in COMMITS:
        real = getattr(Held, name)
        monkeypatch.setattr(Held, name, functools.partialmethod(
            lambda held, *a, _real=real, _name=name, **k: (calls.append((_name, None)), _real(held, *a, **k))[1]))
    return calls


def _check(calls: list[tuple[str, Any]], decider: str, constructor: str, needs: str) -> None:
    names = [n for n, _ in calls]
    deciders = {n for _, n in DECIDERS} & set(names)
    assert decider in deciders and deciders <= {decider, "decide_append"}, names  # (a catch-up decides as an append)
    assert {n for _, n in CONSTRUCTORS} & set(names) == {constructor}, names
    commits = [i for i, n in enumerate(names) if n in COMMITS]
    assert commits, f"nothing committed: {names}"
    first = commits[0]
    before = [c for c in calls[:first] if c[0] == "redecide"]
    assert before and before[-1][1] == (needs, "stands"), names  # re-decided under the lock, then committed
    assert names.index(decider) < names.index(constructor) < first, names


def test_every_write_entry_decides_constructs_and_redecides_through_the_one_path(tmp_path, ctx, conv, recorded):
    calls, cid, turns = recorded, conv.conversation_id, turn_dicts(conv)
    cache = StoredCache(4)
    seen = []

    def entry(name: str, run: Callable[[], Any]) -> None:
        calls.clear()
        run()
        (_, decider, constructor, needs), = [e for e in WRITE_ENTRIES if e[0] == name]
        _check(calls, decider, constructor, needs)
        seen.append(name)

    entry("full build", lambda: build(ctx, tmp_path, prefix(conv, 30)))
    entry("re-import of a grown log (increment route)", lambda: build(ctx, tmp_path, prefix(conv, 40)))
    entry("--retry-failed", lambda: _retry_failed(ctx, tmp_path, conv))
    req = AppendRequest(conversation_id=cid, turns=[AppendTurn(**turns[40])])
    entry("inline append", lambda: append_turns(tmp_path, req, ctx, cache=cache))
    req = AppendRequest(conversation_id=cid, turns=[AppendTurn(**turns[41])])
    entry("queued append", lambda: asyncio.run(append_queued(tmp_path, req, ctx, cache)))
    entry("catch-up", lambda: asyncio.run(catch_up(tmp_path, AppendRequest(conversation_id=cid), ctx, cache=cache)))
    writer = StoreWriter(tmp_path)
    marker = writer.commit_marker(cid)
    record_id = read_part(tmp_path, "records", marker, columns=["record_id"]).column(0)[0].as_py()
    entry("forget", lambda: forget_records(tmp_path, marker.owner, ForgetSelector(record_id=record_id),
                                           embedder=HashEmbedder()))
    assert seen == [e[0] for e in WRITE_ENTRIES]


def _retry_failed(build_ctx, root, whole) -> None:
    """A ``--retry-failed`` run over a stored commit with a failed segment: route build, reusing encodings."""
    from lychee_ray.ingest.runner import run_local_build_items
    from lychee_ray.io.adapters import AdapterItem
    from lychee_ray.io.store.marker import MarkerCounts

    writer = StoreWriter(root)
    m = writer.commit_marker(whole.conversation_id)
    # a marker saying a segment failed (the decision reads only the count)
    writer.layout.write_marker(m.model_copy(update={"counts": MarkerCounts(**{**m.counts.model_dump(),
                                                                              "failed_segments": 1})}))
    item = AdapterItem(file="mem", line=0, conversation=prefix(whole, 40))
    s = run_local_build_items(CFG, [item], root, backend="rules", ctx=build_ctx, retry_failed=True)
    assert s.built == 1, s.errors


def test_a_commit_needs_a_standing_redecision_in_its_hold(tmp_path, ctx, conv):
    build(ctx, tmp_path, prefix(conv, 5))
    writer = StoreWriter(tmp_path)
    cid = conv.conversation_id
    with hold_sync(writer, cid) as held:
        m = held.marker()
        for name in COMMITS:  # refused before anything is read of the arguments
            with pytest.raises(NotRedecided):
                getattr(held, name)(*([None] * {"commit_increment": 3, "rewrite": 5}.get(name, 2)))
        assert held.redecide(None) == "moved"  # decided as new, stored now: decide again
        with pytest.raises(NotRedecided):
            held.commit_delta(None, None)
        assert held.redecide(m) == "stands"
        with pytest.raises(NotRedecided):  # a commit based on another commit than the one re-decided
            held.commit(None, None)
    assert commit_step.redecide(m, None) == "gone"
    assert commit_step.redecide(m, m.model_copy(update={"lineage": "other"})) == "replaced"
    later = m.model_copy(update={"counts": m.counts.model_copy(update={"turns": m.counts.turns + 1})})
    assert commit_step.redecide(m, later, "segmentation") == "stands"
    assert commit_step.redecide(m, later, "turns") == "moved"
    bumped = m.model_copy(update={"segmentation_epoch": m.segmentation_epoch + 1})
    assert commit_step.redecide(m, bumped, "segmentation") == "moved"
