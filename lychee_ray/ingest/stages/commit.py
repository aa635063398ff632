"""Commit stage: one new generation per built conversation, under its write lock.

The decision read the conversation's marker without the lock; here, holding it, the marker is read
again. Unchanged (the usual case): the generation is committed. Changed (an append or another build
committed the conversation meanwhile): the conversation goes through the one-conversation path
instead (``classic``), which decides again under the lock — nothing is committed over a commit the
decision did not see. A commit refused because the lock's lease was lost (object stores) is made
again under a fresh lock when the marker has not moved (ingest/commit.py ``commit_decided``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from lychee_ray.ingest.commit import commit_decided
from lychee_ray.ingest.outcomes import Outcome
from lychee_ray.ingest.stages.classic import ClassicFn
from lychee_ray.ingest.stages.work import StageWork
from lychee_ray.io.store import MemoryStoreWriter
from lychee_ray.io.store.locks import ConversationDeleting

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
        try:
            committed = await commit_decided(self.writer, cid, pending.artifacts, work.marker)
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
        work.outcome = Outcome.built(item, cid, committed.marker, wall_s=work.elapsed(),
                                     warnings=[*work.warnings, *committed.warnings()])
        return work.outcome


__all__ = ["Committer", "OnOutcome"]
