"""One conversation at a time, under its write lock: :class:`ConversationProcessor` takes an adapter
item to exactly one :class:`~lychee_ray.ingest.outcomes.Outcome` — skipped (committed with the same
fingerprint and turns), appended (new turns of a stored conversation), built, or failed
(quarantined with its stage and message).

The staged build (ingest/stages/) builds new conversations in stages across processes and hands
this class the rest: increments, ``--retry-failed``, stores to migrate, and a conversation whose
commit marker changed between the decision and the commit. A commit refused because the write
lock's lease was lost (object stores) is made again under a fresh lock (ingest/recommit.py).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass

import pyarrow as pa

from lychee_ray.ingest.increment import IncrementError, extend_conversation
from lychee_ray.ingest.increment.stored import load_stored
from lychee_ray.ingest.increment.turns import check_history
from lychee_ray.ingest.outcomes import Outcome, duplicate_outcome, input_warnings, unreadable_outcome
from lychee_ray.ingest.pipeline import BuildContext, build_conversation
from lychee_ray.ingest.recommit import lost_lease_warning, recommit_after_lost_lease
from lychee_ray.core.conversation import TURN_SCHEMA, Conversation
from lychee_ray.core.turn_identity import turns_digest
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store import MemoryStoreReader, MemoryStoreWriter, read_part
from lychee_ray.io.store.artifacts import ConversationArtifacts
from lychee_ray.io.store.lease import LeaseLost
from lychee_ray.io.store.locks import ConversationDeleting, async_write_lock
from lychee_ray.io.store.reader import ConversationData
from lychee_ray.io.store.marker import CommitMarker

log = logging.getLogger(__name__)


def unchanged_input(conv: Conversation, marker: CommitMarker) -> bool:
    """The stored conversation has exactly these turns and no open tail (``turns_digest`` of the marker)."""
    digest = marker.turns_digest
    if digest is None or marker.open_turns:
        return False
    return digest == turns_digest(pa.Table.from_pylist(conv.turn_rows(), schema=TURN_SCHEMA))


@dataclass
class _LostCommit:
    """Work built under a write lock whose lease was lost before its commit (nothing published):
    committed again by :meth:`ConversationProcessor._recommit` outside that lock."""

    artifacts: ConversationArtifacts
    base: CommitMarker | None  # the marker the work was built on, read under the lost lock
    error: LeaseLost
    outcome: Callable[[CommitMarker, list[str]], Outcome]  # the outcome once committed (with these warnings)


class ConversationProcessor:
    """Item → outcome: claim the id, then under the conversation's write lock skip it (unchanged),
    append its new turns (stored before), build it, or quarantine it; commit; never raises."""

    def __init__(self, ctx: BuildContext, writer: MemoryStoreWriter, run_id: str, retry_failed: bool = False,
                 on_conflict: str | None = None) -> None:
        self.ctx = ctx
        self.writer = writer
        self.reader = MemoryStoreReader(writer.layout)
        self.run_id = run_id
        self.retry_failed = retry_failed
        # a stored conversation whose input rewrote its history: "error" (quarantine) or "rebuild"
        self.on_conflict = on_conflict or ctx.cfg.build.on_conflict
        self.fingerprint = ctx.fingerprint

    async def process(self, item: AdapterItem) -> Outcome:
        t0 = time.perf_counter()
        conv = item.conversation
        if conv is None:
            return unreadable_outcome(item)
        cid = conv.conversation_id
        dup = self.writer.claim(cid, self.run_id, item.where)
        if dup is not None:
            return duplicate_outcome(item, cid, dup)
        warnings = input_warnings(item, self.ctx.cfg.segmenter.max_turn_chars, self.ctx.cfg.passages)
        try:
            # one writer per conversation (an append may be committing it right now), from reading
            # its stored state to committing the next generation
            async with async_write_lock(self.writer.layout, cid):
                done = await self._process_locked(item, conv, warnings, t0)
            if isinstance(done, _LostCommit):  # outside the lost lock now: a fresh one (ingest/recommit.py)
                return await self._recommit(item, conv, warnings, t0, done)
            return done
        except ConversationDeleting as e:
            return Outcome("failed", cid, "deleting", str(e), item.file, item.line, wall_s=time.perf_counter() - t0,
                           warnings=warnings)

    async def _recommit(self, item: AdapterItem, conv: Conversation, warnings: list[str], t0: float,
                        lost: _LostCommit) -> Outcome:
        """Commit the work whose lease was lost under a fresh lock; when the conversation's marker
        moved meanwhile, decide again under the lock (once: a second lost lease quarantines)."""
        cid = conv.conversation_id
        try:
            marker = await recommit_after_lost_lease(self.writer, cid, lost.artifacts, lost.base, lost.error)
            if marker is None:
                async with async_write_lock(self.writer.layout, cid):
                    done = await self._process_locked(item, conv, warnings, t0)
                if isinstance(done, _LostCommit):
                    raise done.error
                return done
        except ConversationDeleting:
            raise
        except Exception as e:  # noqa: BLE001 — quarantine, as for a whole build (LeaseLost: the tries used up)
            log.exception("conversation %s failed at commit", cid)
            return Outcome("failed", cid, "commit", f"{type(e).__name__}: {e}", item.file, item.line,
                           wall_s=time.perf_counter() - t0, warnings=warnings)
        return lost.outcome(marker, [*warnings, lost_lease_warning(lost.error)])

    async def _process_locked(self, item: AdapterItem, conv: Conversation, warnings: list[str],
                              t0: float) -> Outcome | _LostCommit:
        cid = conv.conversation_id
        marker = self.writer.current_marker(cid)  # we hold its write lock (a version-1 marker is migrated)
        previous = None
        if marker is not None and marker.fingerprint == self.fingerprint:
            if not (self.retry_failed and marker.counts.failed_segments > 0):
                if unchanged_input(conv, marker):
                    return Outcome("skipped", cid, counts=marker.counts.as_dict(), file=item.file, line=item.line)
                return await self._increment(item, conv, marker, warnings, t0)
            self.reader.refresh()
            previous = self.reader.load(cid)
        return await self._build(item, conv, warnings, t0, marker, previous)

    async def _build(self, item: AdapterItem, conv: Conversation, warnings: list[str], t0: float,
                     marker: CommitMarker | None, previous: ConversationData | None = None) -> Outcome | _LostCommit:
        """Build the conversation whole (new, other configuration, retry, or rebuilt after a conflict);
        ``marker``: its commit read under the write lock (None: not stored), the commit's fence."""
        cid = conv.conversation_id
        stage = "build"

        def built(committed: CommitMarker, said: list[str]) -> Outcome:
            return Outcome("built", cid, counts=committed.counts.as_dict(), tokens=committed.tokens,
                           quality=committed.quality or {}, file=item.file,
                           line=item.line, wall_s=time.perf_counter() - t0, warnings=said)

        try:
            art = await build_conversation(conv, self.ctx, previous=previous)
            if previous is not None:
                art.usage = self._with_previous_usage(cid, art.usage)
            stage = "commit"
            committed = await asyncio.to_thread(self.writer.commit, art, locked=True, based_on=marker)
        except LeaseLost as e:
            return _LostCommit(art, marker, e, built)
        except Exception as e:  # noqa: BLE001 — quarantine: one bad conversation never stops the job
            log.exception("conversation %s failed at %s", cid, stage)
            return Outcome("failed", cid, stage, f"{type(e).__name__}: {e}", item.file, item.line,
                           wall_s=time.perf_counter() - t0, warnings=warnings)
        return built(committed, warnings)

    async def _increment(self, item: AdapterItem, conv: Conversation, marker: CommitMarker, warnings: list[str],
                         t0: float) -> Outcome | _LostCommit:
        """A stored conversation met again: append its new turns (docs/incremental.md), skip it when
        nothing is new, or stop at a rewritten history (stage ``conflict``) unless ``on_conflict`` rebuilds."""
        cid = conv.conversation_id
        stage = "increment"
        try:
            stored = await asyncio.to_thread(load_stored, self.writer.layout, marker)
            try:
                check_history(stored, conv)
            except IncrementError as e:
                if self.on_conflict == "rebuild":
                    log.warning("%s; rebuilding it from scratch (on_conflict=rebuild)", e)
                    return await self._build(item, conv, warnings, t0, marker)
                return Outcome("failed", cid, "conflict", str(e), item.file, item.line,
                               wall_s=time.perf_counter() - t0, warnings=warnings)
            if conv.num_turns == stored.num_turns and not marker.open_turns:
                return Outcome("skipped", cid, counts=marker.counts.as_dict(), file=item.file, line=item.line)
            inc = await extend_conversation(stored, conv, self.ctx, finish=True, ledger_start=len(self.ctx.ledger))
            if inc.artifacts is None:
                return Outcome("skipped", cid, counts=marker.counts.as_dict(), file=item.file, line=item.line)
            stage = "commit"

            def appended(committed: CommitMarker, said: list[str]) -> Outcome:
                return Outcome("built", cid, counts=committed.counts.as_dict(), tokens=inc.tokens, quality=inc.quality,
                               file=item.file, line=item.line, wall_s=time.perf_counter() - t0, warnings=said,
                               appended=bool(inc.new_turn_ids))

            try:
                committed = await asyncio.to_thread(self.writer.commit, inc.artifacts, locked=True, based_on=marker)
            except LeaseLost as e:
                return _LostCommit(inc.artifacts, marker, e, appended)
        except Exception as e:  # noqa: BLE001 — quarantine, as for a whole build
            log.exception("conversation %s failed at %s", cid, stage)
            return Outcome("failed", cid, stage, f"{type(e).__name__}: {e}", item.file, item.line,
                           wall_s=time.perf_counter() - t0, warnings=warnings)
        return appended(committed, warnings)

    def _with_previous_usage(self, cid: str, new: pa.Table) -> pa.Table:
        old = read_part(self.writer.layout, "usage", self.reader.markers[cid])
        return pa.concat_tables([old, new.cast(old.schema)]) if old.num_rows else new


__all__ = ["ConversationProcessor", "unchanged_input"]
