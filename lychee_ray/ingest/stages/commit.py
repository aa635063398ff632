"""Commit stage: one new generation per built conversation, under its write lock.

The decision read the conversation's marker without the lock; here, holding it, the marker is read
again. Unchanged (the usual case): the generation is committed. Changed (an append or another build
committed the conversation meanwhile): the conversation goes through the one-conversation path
instead (``classic``), which decides again under the lock — nothing is committed over a commit the
decision did not see. A commit refused because the lock's lease was lost (object stores) is made
again under a fresh lock when the marker has not moved (ingest/recommit.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from lychee_ray.io.store.locks import async_write_lock
from lychee_ray.ingest.outcomes import Outcome
from lychee_ray.ingest.recommit import lost_lease_warning, recommit_after_lost_lease
from lychee_ray.ingest.stages.classic import ClassicFn
from lychee_ray.ingest.stages.work import MarkerSeen, StageWork
from lychee_ray.io.store import MemoryStoreWriter
from lychee_ray.io.store.lease import LeaseLost
from lychee_ray.io.store.locks import ConversationDeleting
from lychee_ray.io.store.marker import CommitMarker

log = logging.getLogger(__name__)

# committed: (work, outcome) after each conversation's outcome is known (progress counters)
OnOutcome = Callable[[StageWork, Outcome], None]


class Committer:
    """The commit stage of one process; ``classic`` takes conversations whose marker moved."""

    def __init__(self, writer: MemoryStoreWriter, classic: ClassicFn) -> None:
        self.writer = writer
        self.classic = classic

    async def run(self, works: list[StageWork], on_outcome: OnOutcome | None = None) -> list[Outcome]:
        """Every work's outcome, in order (finished ones as they are)."""

        async def one(w: StageWork) -> Outcome:
            o = await self.one(w)
            if on_outcome is not None:
                on_outcome(w, o)
            return o

        return list(await asyncio.gather(*(one(w) for w in works)))

    async def one(self, work: StageWork) -> Outcome:
        if work.outcome is not None:
            return work.outcome
        item, pending = work.item, work.pending
        cid = work.conversation_id
        if pending is None or not work.embedded or cid is None:
            return work.fail("commit", "nothing to commit (an earlier stage did not run)")
        marker: CommitMarker | None = None
        try:
            try:
                async with async_write_lock(self.writer.layout, cid):
                    marker = self.writer.current_marker(cid)  # we hold its write lock (a version-1 marker is migrated)
                    if MarkerSeen.unchanged(work.seen, marker):
                        # fenced (io/store/fence.py): a conversation the decision found new must still have
                        # no commit; a stored one, the lineage the decision saw (checked with it above)
                        based_on = None if work.seen is None else marker
                        committed = await asyncio.to_thread(self.writer.commit, pending.artifacts, locked=True,
                                                            based_on=based_on)
                    else:
                        committed = None
            except LeaseLost as lost:  # (object stores) outside the lost lock now: take a fresh one
                committed = await recommit_after_lost_lease(self.writer, cid, pending.artifacts, marker, lost)
                if committed is not None:
                    work.warnings.append(lost_lease_warning(lost))
        except ConversationDeleting as e:
            return work.fail("deleting", str(e))
        except Exception as e:  # noqa: BLE001 — quarantine: one bad conversation never stops the job
            log.exception("conversation %s failed at commit", cid)
            return work.fail("commit", e)
        if committed is None:
            log.info("conversation %s was committed by another writer after this build decided; deciding again "
                     "under its write lock", cid)
            work.pending = None
            work.outcome = await self.classic(item)
            return work.outcome
        work.pending = None
        work.outcome = Outcome.built(item, cid, committed, wall_s=work.elapsed(), warnings=work.warnings)
        return work.outcome


__all__ = ["Committer", "OnOutcome"]
