"""The commit step of the write path: the one module on the write side that takes a conversation's
write lock (and its encode lock), re-decides under it and publishes a generation, fenced on the
commit it was built on.

Every way turns enter a conversation ends here (docs/architecture.md, "The write path"):

* :func:`hold` — the write lock for a block, as a :class:`Held` conversation: its marker read
  under the lock (an older marker migrated first), the re-decision (:meth:`Held.redecide`) and
  fenced commits — a whole generation (:meth:`Held.commit`), a delta (:meth:`Held.commit_delta`),
  an increment (:meth:`Held.commit_increment`: a delta or a whole generation, folded when due, the
  state after it kept for the next one) or rows changed in place (:meth:`Held.rewrite`).
* **The re-decision** — a commit goes ahead only while the decision it was built on still stands
  under the lock: :meth:`Held.redecide` compares the marker the decision read with the one there
  now by what the decision needs unchanged (:data:`Needs`: the very commit for a build run, the
  segmentation for a catch-up's delta, also the turns for its whole generation); its
  :data:`Verdict` says why not (moved, replaced, gone). Every commit method refuses to run
  without a standing re-decision in the same hold. An append or a forget decides under the lock it
  commits under, so its re-decision stands by construction.
* :func:`decision_marker` — the marker a decision taken without the lock reads: an older marker is
  migrated under the write lock first (the one place markers are migrated on the write path).
* :func:`encode_lock` — one background encoding (catch-up) of a conversation at a time.
* :func:`commit_decided` and :class:`Committer` — a build run's commit: re-decided on the very
  commit the decision read (else the conversation is decided again); a commit refused because the
  lock's lease was lost (object stores: a writer starved of CPU publishes nothing) is made again
  under a fresh lock while the marker has not moved, at most ``store.commit_lease_retries`` more
  times; the outcome is made here, and a failure quarantines the conversation (one bad
  conversation never stops the run).

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
from typing import Any, Literal

import pyarrow as pa

from lychee_ray.config.appends import AppendsConfig
from lychee_ray.ingest.outcomes import Outcome
from lychee_ray.ingest.stages.work import StageWork
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store import StoreWriter
from lychee_ray.io.store.artifacts import ConversationArtifacts, ConversationDelta, TableVectors
from lychee_ray.io.store.lease import LeaseLost
from lychee_ray.io.store.locks import BusyError, ConversationDeleting, LockBusy, async_write_lock, write_lock
from lychee_ray.io.store.marker import MARKER_VERSION, CommitMarker
from lychee_ray.io.store.writer import artifacts_delta

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


# What a decision needs unchanged when its commit is re-decided under the lock: ``commit`` the very
# commit it read (a build run; compaction moving the commit's rows leaves it the same commit);
# ``segmentation`` the same lineage and segmentation (a catch-up's delta: turns queued since are
# fine); ``turns`` that and no turn added since (a catch-up's whole generation holds only its turns).
Needs = Literal["commit", "segmentation", "turns"]
SAME_COMMIT: Needs = "commit"
SAME_SEGMENTATION: Needs = "segmentation"
SAME_TURNS: Needs = "turns"
# The re-decision: ``stands`` (commit), ``moved`` (another writer committed in between: decide again),
# ``replaced`` (another lineage: erased and re-created), ``gone`` (no commit any more).
Verdict = Literal["stands", "moved", "replaced", "gone"]


class NotRedecided(RuntimeError):
    """A commit attempted without a standing re-decision in the same hold (a bug of its caller)."""


def still_decided(decided_on: CommitMarker | None, current: CommitMarker | None) -> bool:
    """True when ``current`` (read under the lock) is the commit the decision read (None: none);
    compaction moving the commit's rows leaves it the same commit."""
    return current is None if decided_on is None else decided_on.same_commit(current)


def _stands(decided_on: CommitMarker | None, current: CommitMarker | None, needs: Needs) -> bool:
    if needs == SAME_COMMIT:
        return still_decided(decided_on, current)
    if decided_on is None or current is None or not current.same_lineage(decided_on):
        return False
    return current.segmentation_epoch == decided_on.segmentation_epoch and (
        needs == SAME_SEGMENTATION or current.counts.turns == decided_on.counts.turns)


def redecide(decided_on: CommitMarker | None, current: CommitMarker | None, needs: Needs = SAME_COMMIT) -> Verdict:
    """The re-decision of a commit built on ``decided_on`` (None: no commit), ``current`` read under
    the conversation's write lock, by what the decision ``needs`` unchanged."""
    if _stands(decided_on, current, needs):
        return "stands"
    if current is None:
        return "gone"
    if decided_on is not None and not current.same_lineage(decided_on):
        return "replaced"
    return "moved"


_UNREAD = object()


class Held:
    """A conversation whose write lock this process holds (made by :func:`hold`). Its marker is read
    once per hold (no other writer commits while it is held); a commit needs a standing
    :meth:`redecide` first and is fenced on the commit that decision read. The commits are blocking
    calls (file or object-store writes): async callers run them in a worker thread."""

    def __init__(self, writer: StoreWriter, conversation_id: str) -> None:
        self.writer = writer
        self.conversation_id = conversation_id
        self._current: Any = _UNREAD
        self._basis: Any = _UNREAD  # the commit a standing re-decision read (None: none)

    def marker(self) -> CommitMarker | None:
        """The conversation's commit marker (None: not stored), read under the lock; a version-1
        marker is migrated first, so what follows reads and replaces a generation like any other."""
        if self._current is _UNREAD:
            self._current = self.writer.current_marker(self.conversation_id)
        current: CommitMarker | None = self._current
        return current

    def redecide(self, decided_on: CommitMarker | None, needs: Needs = SAME_COMMIT) -> Verdict:
        """Re-decide under the lock a commit built on ``decided_on`` (:func:`redecide`); when it
        stands, the commits of this hold may go ahead, fenced on ``decided_on``."""
        verdict = redecide(decided_on, self.marker(), needs)
        self._basis = decided_on if verdict == "stands" else _UNREAD
        return verdict

    def _published(self, marker: CommitMarker) -> CommitMarker:
        self._current = self._basis = marker
        return marker

    def _require(self, based_on: CommitMarker | None) -> None:
        if self._basis is _UNREAD:
            raise NotRedecided(f"conversation {self.conversation_id!r}: a commit without a standing re-decision")
        if (based_on is None) != (self._basis is None) or (based_on is not None and not based_on.same_lineage(self._basis)):
            raise NotRedecided(f"conversation {self.conversation_id!r}: a commit based on another commit than "
                               "the one re-decided")

    def commit(self, art: ConversationArtifacts, based_on: CommitMarker | None) -> CommitMarker:
        """Publish ``art`` as a whole new generation, fenced on ``based_on`` (None: built as a new conversation)."""
        self._require(based_on)
        return self._published(self.writer.commit(art, locked=True, based_on=based_on))

    def commit_delta(self, delta: ConversationDelta, based_on: CommitMarker | None) -> CommitMarker:
        """Publish ``delta`` on top of the stored commit, fenced on ``based_on``."""
        self._require(based_on)
        return self._published(self.writer.commit_delta(delta, locked=True, based_on=based_on))

    def rewrite(self, marker: CommitMarker, tables: dict[str, pa.Table], vectors: dict[str, TableVectors], dim: int,
                segstate: dict[str, Any] | None) -> CommitMarker:
        """Publish the conversation's rows changed in place (a forget: ingest/forget.py) as a new base
        generation of ``marker`` (read under this lock), fenced on it."""
        self._require(marker)
        return self._published(self.writer.rewrite(marker, tables, vectors, dim, segstate, based_on=marker))

    def commit_increment(self, stored: StoredConversation | None, inc: Increment, fold: AppendsConfig | None,
                         cache: StoredCache | None = None,
                         adjust: Callable[[ConversationDelta], None] | None = None) -> CommitMarker:
        """Commit an increment — a delta on top of the stored commit (``adjust(delta)`` may amend it
        first), or a whole generation — fenced on the commit ``stored`` was read from (None: on
        there being none); fold the deltas into a new base when they passed ``fold``'s bound (None:
        not here; the caller folds), and keep the state after it in ``cache`` for the next
        increment (not after a whole generation or a fold: the next one reads the conversation)."""
        based_on = stored.marker if stored is not None else None
        self._require(based_on)
        delta = increment_delta(stored, inc)
        if delta is None:
            art = inc.artifacts
            assert art is not None  # a changed increment without a delta has artifacts
            return self.commit(art, based_on)
        if adjust is not None:
            adjust(delta)
        marker = self.commit_delta(delta, based_on)
        if fold is not None and self.writer.needs_fold(marker, fold):
            return self._published(self.writer.fold(marker.conversation_id, locked=True) or marker)
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
def hold_sync(writer: StoreWriter, conversation_id: str, wait: LockWait | None = None) -> Iterator[Held]:
    """:func:`hold` for synchronous callers (a forget; :func:`decision_marker`)."""
    w = wait or LockWait()
    with write_lock(writer.layout, conversation_id, w.timeout_s, w.poll_s, busy=w.busy):
        yield Held(writer, conversation_id)


def decision_marker(writer: StoreWriter, conversation_id: str, wait: LockWait | None = None) -> CommitMarker | None:
    """The conversation's commit marker for a decision taken without its write lock (a build run's,
    a catch-up's; None: not stored). A marker an older version wrote is migrated first, under the
    write lock (:meth:`Held.marker`): the write path's one marker migration."""
    marker = writer.commit_marker(conversation_id)
    if marker is not None and marker.version < MARKER_VERSION:
        with hold_sync(writer, conversation_id, wait) as held:
            marker = held.marker()
    return marker


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
                if held.redecide(decided_on) != "stands":
                    return None
                current = held.marker()
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


__all__ = ["SAME_COMMIT", "SAME_SEGMENTATION", "SAME_TURNS", "Committed", "Committer", "Held", "LockWait", "Needs",
           "NotRedecided", "OnOutcome", "Verdict", "commit_decided", "contended_outcome", "decision_marker", "encode_lock",
           "hold", "hold_sync", "increment_delta", "redecide", "still_decided"]
