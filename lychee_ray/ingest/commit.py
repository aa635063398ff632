"""The commit step of the write path: the one module on the write side that takes a conversation's
write lock (and its encode lock) and publishes a generation, fenced on the commit it was built on.

Every way turns enter a conversation ends here (docs/architecture.md, "The write path"):

* :func:`hold` — the write lock for a block, as a :class:`Held` conversation: its marker read
  under the lock (an older marker migrated first) and fenced commits — a whole generation
  (:meth:`Held.commit`), a delta (:meth:`Held.commit_delta`) or an increment (:meth:`Held.commit_increment`:
  a delta or a whole generation, folded when due, the state after it kept for the next one). An
  inline or queued append holds it from reading the stored state to its commit, a catch-up and a
  build run only to commit.
* :func:`encode_lock` — one background encoding (catch-up) of a conversation at a time.
* :func:`commit_decided` and :class:`Committer` — a build run's commit: under the lock, the marker
  must still be the one the decision read (else the conversation is decided again); a commit
  refused because the lock's lease was lost (object stores: a writer starved of CPU publishes
  nothing) is made again under a fresh lock while the marker has not moved, at most
  ``store.commit_lease_retries`` more times; the outcome is made here, and a failure quarantines
  the conversation (one bad conversation never stops the run).

A commit is fenced: the writer refuses it with
:class:`~lychee_ray.io.store.marker.ConversationReplaced` when the conversation is no longer the
lineage the work was built on (erased, and maybe re-created, since: io/store/fence.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING

from lychee_ray.config.appends import AppendsConfig
from lychee_ray.ingest.outcomes import Outcome
from lychee_ray.ingest.stages.work import StageWork
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store import StoreWriter
from lychee_ray.io.store.artifacts import ConversationArtifacts, ConversationDelta
from lychee_ray.io.store.lease import LeaseLost
from lychee_ray.io.store.locks import BusyError, ConversationDeleting, LockBusy, async_write_lock, conversation_write_lock
from lychee_ray.io.store.marker import CommitMarker
from lychee_ray.io.store.writer import artifacts_delta

if TYPE_CHECKING:  # (the increment package's appends commit through this module)
    from lychee_ray.ingest.increment.cache import StoredCache
    from lychee_ray.ingest.increment.construct import Increment
    from lychee_ray.ingest.increment.stored import StoredConversation

log = logging.getLogger(__name__)

# committed: (work, outcome) after each conversation's outcome is known (progress counters)
OnOutcome = Callable[[StageWork, Outcome], None]

@dataclass(frozen=True)
class LockWait:
    """How long a writer waits for a conversation's lock: ``timeout_s`` None waits as long as it
    takes; else ``busy(conversation_id, waited_s)`` is raised after that long (tries every ``poll_s``)."""

    timeout_s: float | None = None
    poll_s: float = 0.0
    busy: BusyError = LockBusy

    @classmethod
    def for_append(cls, cfg: AppendsConfig, timeout_s: float | None, busy: BusyError) -> LockWait:
        """An append's wait: ``timeout_s`` (None: ``appends.lock_timeout_s``), trying every
        ``appends.lock_poll_s``, then ``busy``."""
        return cls(cfg.lock_timeout_s if timeout_s is None else timeout_s, cfg.lock_poll_s, busy)


class Held:
    """A conversation whose write lock this process holds (made by :func:`hold`). The commits are
    blocking calls (file or object-store writes): async callers run them in a worker thread."""

    def __init__(self, writer: StoreWriter, conversation_id: str) -> None:
        self.writer = writer
        self.conversation_id = conversation_id

    def marker(self) -> CommitMarker | None:
        """The conversation's commit marker (None: not stored), read under the lock; a version-1
        marker is migrated first, so what follows reads and replaces a generation like any other."""
        return self.writer.current_marker(self.conversation_id)

    def commit(self, art: ConversationArtifacts, based_on: CommitMarker | None) -> CommitMarker:
        """Publish ``art`` as a whole new generation, fenced on ``based_on`` (None: built as a new conversation)."""
        return self.writer.commit(art, locked=True, based_on=based_on)

    def commit_delta(self, delta: ConversationDelta, based_on: CommitMarker | None) -> CommitMarker:
        """Publish ``delta`` on top of the stored commit, fenced on ``based_on``."""
        return self.writer.commit_delta(delta, locked=True, based_on=based_on)

    def commit_increment(self, stored: StoredConversation | None, inc: Increment, fold: AppendsConfig | None,
                         cache: StoredCache | None = None,
                         adjust: Callable[[ConversationDelta], None] | None = None) -> CommitMarker:
        """Commit an increment — a delta on top of the stored commit (``adjust(delta)`` may amend it
        first), or a whole generation — fenced on the commit ``stored`` was read from (None: on
        there being none); fold the deltas into a new base when they passed ``fold``'s bound (None:
        not here; the caller folds), and keep the state after it in ``cache`` for the next
        increment (not after a whole generation or a fold: the next one reads the conversation)."""
        based_on = stored.marker if stored is not None else None
        delta = increment_delta(stored, inc)
        if delta is None:
            art = inc.artifacts
            assert art is not None  # a changed increment without a delta has artifacts
            return self.commit(art, based_on)
        if adjust is not None:
            adjust(delta)
        marker = self.commit_delta(delta, based_on)
        if fold is not None and self.writer.needs_fold(marker, fold):
            return self.writer.fold(marker.conversation_id, locked=True) or marker
        if cache is not None and inc.next_state is not None:
            state = inc.next_state
            state.marker = marker
            state.applied.add(marker.deltas[-1])
            cache.keep_stored(state)
        return marker


def increment_delta(stored: StoredConversation | None, inc: Increment) -> ConversationDelta | None:
    """The delta that commits ``inc`` (its own, or its artifacts against the stored tables); None:
    it is committed as a whole generation (a new conversation, one re-segmented from scratch, or
    a kept state without the tables to compare with)."""
    if inc.delta is not None:
        return inc.delta
    if stored is None or stored.data is None or inc.rebuilt is not None or inc.artifacts is None:
        return None
    return artifacts_delta(stored.data, inc.artifacts)


@asynccontextmanager
async def hold(writer: StoreWriter, conversation_id: str, wait: LockWait | None = None) -> AsyncIterator[Held]:
    """``async with hold(writer, cid) as held``: the conversation's write lock for the block (raises
    ``wait.busy`` after ``wait.timeout_s``, and
    :class:`~lychee_ray.io.store.locks.ConversationDeleting` while an erasure of it runs)."""
    w = wait or LockWait()
    async with async_write_lock(writer.layout, conversation_id, w.timeout_s, w.poll_s, busy=w.busy):
        yield Held(writer, conversation_id)


@asynccontextmanager
async def encode_lock(writer: StoreWriter, conversation_id: str, wait: LockWait | None = None) -> AsyncIterator[None]:
    """``async with encode_lock(writer, cid)``: one background encoding of the conversation at a time
    (a catch-up); its commit takes the write lock on top (:func:`hold`)."""
    w = wait or LockWait()
    async with async_write_lock(writer.layout, conversation_id, w.timeout_s, w.poll_s, "encode", busy=w.busy):
        yield


@contextmanager
def hold_sync(writer: StoreWriter, conversation_id: str) -> Iterator[Held]:
    """:func:`hold` for synchronous callers (the decide step migrating an older marker)."""
    with conversation_write_lock(writer.layout, conversation_id):
        yield Held(writer, conversation_id)


def still_decided(decided_on: CommitMarker | None, current: CommitMarker | None) -> bool:
    """True when ``current`` (read under the lock) is the commit the decision read (None: none);
    compaction moving the commit's rows leaves it the same commit."""
    return current is None if decided_on is None else decided_on.same_commit(current)


@dataclass(frozen=True)
class Committed:
    """A build run's commit: the new marker, and the lost lease it was committed again after (if any)."""

    marker: CommitMarker
    lost: LeaseLost | None = None

    def warnings(self) -> list[str]:
        """The outcome's warning line for a commit that needed a fresh lease."""
        if self.lost is None:
            return []
        return [f"commit: {self.lost}; committed again under a fresh write lock (nothing else had committed it)"]


async def commit_decided(writer: StoreWriter, conversation_id: str, art: ConversationArtifacts,
                         decided_on: CommitMarker | None) -> Committed | None:
    """Commit ``art``, built on ``decided_on`` (the marker the decision read; None: no commit), under
    the conversation's write lock: None when the marker is not that one any more (another writer
    committed meanwhile: decide again). A commit refused for a lost lease is tried again under a
    fresh lock, at most ``store.commit_lease_retries`` more times; the last ``LeaseLost`` is raised
    after them."""
    retries = writer.layout.settings.commit_lease_retries
    lost: LeaseLost | None = None
    for attempt in range(retries + 1):
        if lost is not None:
            log.warning("conversation %s: %s; taking its write lock again to commit the same work (try %d of %d)",
                        conversation_id, lost, attempt, retries)
        try:
            async with hold(writer, conversation_id) as held:
                current = held.marker()
                if not still_decided(decided_on, current):
                    return None
                # fenced as well: a conversation decided new must still have no commit, a stored one
                # the lineage the decision read
                marker = await asyncio.to_thread(held.commit, art, None if decided_on is None else current)
                return Committed(marker, lost)
        except LeaseLost as e:
            lost = e
    assert lost is not None
    raise lost


def contended_outcome(item: AdapterItem, rounds: int) -> Outcome:
    """The outcome of a conversation another writer committed after each of its ``rounds`` decisions
    (``build.decide_rounds``): failed at stage ``commit``, nothing of this run's work written."""
    conv = item.conversation
    return Outcome.failed(item, conv.conversation_id if conv is not None else None, "commit",
                          f"committed by another writer after each of its {rounds} decision(s) in this run; "
                          "nothing of this run's work was written (a re-run builds it)")


class Committer:
    """The commit step of a build run, over a batch of works: each constructed work committed
    (:func:`commit_decided`), to exactly one outcome — or back to the decide step when another
    writer committed the conversation after its decision (``work.again``; the runner decides it
    again)."""

    def __init__(self, writer: StoreWriter) -> None:
        self.writer = writer

    async def run(self, works: list[StageWork], on_outcome: OnOutcome | None = None) -> list[Outcome | None]:
        """Every work's outcome, in order (finished ones as they are; None: to be decided again)."""

        async def one(w: StageWork) -> Outcome | None:
            o = await self.one(w)
            if o is not None and on_outcome is not None:
                on_outcome(w, o)
            return o

        return list(await asyncio.gather(*(one(w) for w in works)))

    async def one(self, work: StageWork) -> Outcome | None:
        if work.outcome is not None or work.again:
            return work.outcome
        pending, cid = work.pending, work.conversation_id
        if pending is None or not work.embedded or cid is None:
            return work.fail("commit", "nothing to commit (an earlier stage did not run)")
        try:
            committed = await commit_decided(self.writer, cid, pending.artifacts, work.marker)
        except ConversationDeleting as e:
            return work.fail("deleting", str(e))
        except Exception as e:  # noqa: BLE001 — quarantine: one bad conversation never stops the run
            log.exception("conversation %s failed at commit", cid)
            return work.fail("commit", e)
        if committed is None:
            log.info("conversation %s was committed by another writer after its decision; deciding it again", cid)
            work.decide_again()
            return None
        work.pending = None
        work.outcome = Outcome.built(work.item, cid, committed.marker, wall_s=work.elapsed(),
                                     warnings=[*work.warnings, *committed.warnings()], increment=work.increment)
        return work.outcome


__all__ = ["Committed", "Committer", "Held", "LockWait", "OnOutcome", "commit_decided", "contended_outcome", "encode_lock", "hold",
           "hold_sync", "increment_delta", "still_decided"]
