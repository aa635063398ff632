"""The construct step of a build run: segment, encode (every LLM call through the process's — on Ray
the cluster's — rate limiter) and derive nodes for each decided conversation, up to its record and
node vectors (the next stage embeds them).

Both routes take their turn vectors from the turn embedding stage: ``build`` constructs the
conversation whole (:func:`~lychee_ray.ingest.pipeline.build_pending`; with ``reuse_encodings``,
the stored ok segments' encodings are reused: ``--retry-failed``); ``increment`` reads the stored
conversation the decision saw and continues it with the new turns
(:func:`~lychee_ray.ingest.increment.construct.construct_increment`, the end of the input closing the
tail). A conversation whose stored commit was replaced meanwhile is sent back to the decide step.
Conversations are independent: up to ``in_flight`` of a batch are in flight at once. With a turn
sink, the step reports turns as they are segmented and encoded (a build: segment by segment).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

import numpy as np
import pyarrow as pa

from lychee_ray.ingest.increment.construct import construct_increment
from lychee_ray.ingest.increment.stored import load_stored
from lychee_ray.ingest.outcomes import IncrementMade, Outcome
from lychee_ray.ingest.pipeline import BuildContext, build_pending
from lychee_ray.ingest.stages.turn_report import TurnSink, complete, stage_reporter
from lychee_ray.ingest.stages.work import StageWork
from lychee_ray.io.store import StoreWriter
from lychee_ray.io.store.marker import CommitMarker
from lychee_ray.io.store.reader import load_generation
from lychee_ray.names import ENCODE_STAGE, INCREMENT_ROUTE, SEGMENT_STAGE

log = logging.getLogger(__name__)


class Constructor:
    """The construct step of one process: ``ctx`` encodes (its embedders are not called: turn vectors
    come with the work, record and node vectors are the next stage's); stored conversations are
    read through ``writer``; ``report``: where turns segmented and encoded are reported (progress)."""

    def __init__(self, ctx: BuildContext, writer: StoreWriter, in_flight: int, report: TurnSink | None = None) -> None:
        self.ctx = ctx
        self.writer = writer
        self.report = report
        self._sem: asyncio.Semaphore | None = None
        self.in_flight = in_flight

    async def run(self, works: list[StageWork]) -> None:
        """Advance every work of the batch (finished ones are left alone)."""
        if self._sem is None:  # made on the running loop (a Ray actor's loop is not the constructor's)
            self._sem = asyncio.Semaphore(self.in_flight)
        await asyncio.gather(*(self.one(w) for w in works))

    async def one(self, work: StageWork) -> None:
        if work.done or work.again:
            return
        assert self._sem is not None
        async with self._sem:
            conv, vecs = work.item.conversation, work.turn_vectors
            if conv is None or vecs is None:
                work.fail(work.route, "no turn vectors (the turn embedding stage did not run)")
                return
            dim = int(vecs.shape[1]) if vecs.ndim == 2 else self.ctx.embed_dim
            ctx = self.ctx if dim == self.ctx.embed_dim else dataclasses.replace(self.ctx, embed_dim=dim)
            try:
                if work.route == INCREMENT_ROUTE:
                    await self._increment(work, ctx, vecs)
                else:
                    await self._build(work, ctx, vecs)
            except Exception as e:  # noqa: BLE001 — quarantine: one bad conversation never stops the run
                if self._replaced(work):
                    work.decide_again()
                else:
                    log.exception("conversation %s failed at %s", work.conversation_id, work.route)
                    work.fail(work.route, e)
            work.turn_vectors = None  # the pending artifacts hold them
            if self.report is not None and work.pending is not None and not work.done and not work.again:
                self.report(complete(work, SEGMENT_STAGE) + complete(work, ENCODE_STAGE))

    async def _build(self, work: StageWork, ctx: BuildContext, vecs: np.ndarray) -> None:
        conv = work.item.conversation
        assert conv is not None
        previous = None
        if work.reuse_encodings:
            marker = self._current(work)
            if marker is None:
                return
            previous = await asyncio.to_thread(load_generation, self.writer.layout, marker)
        pending = await build_pending(conv, ctx, previous, vecs, on_turns=stage_reporter(work, self.report))
        if previous is not None:  # the calls of earlier builds stay accounted for
            old = previous.tables["usage"]
            new = pending.artifacts.usage
            pending.artifacts.usage = pa.concat_tables([old, new.cast(old.schema)]) if old.num_rows else new
        work.pending = pending

    async def _increment(self, work: StageWork, ctx: BuildContext, vecs: np.ndarray) -> None:
        conv = work.item.conversation
        assert conv is not None
        marker = self._current(work)
        if marker is None:
            return
        stored = await asyncio.to_thread(load_stored, self.writer.layout, marker)
        inc = await construct_increment(stored, conv, ctx, finish=True, ledger_start=len(ctx.ledger),
                                        new_turn_vectors=vecs, pending=True)
        if inc.pending is None:  # the stored segmentation stands as it is: nothing to write
            work.outcome = Outcome.skipped(work.item, conv.conversation_id, marker)
            return
        work.pending = inc.pending
        work.increment = IncrementMade(len(inc.new_turn_ids), inc.tokens, inc.quality)

    def _current(self, work: StageWork) -> CommitMarker | None:
        """The commit the decision read, as it stands now (compaction may have moved its rows); None
        when another writer committed the conversation since (then it is decided again)."""
        assert work.marker is not None and work.conversation_id is not None
        current = self.writer.commit_marker(work.conversation_id)
        if not work.marker.same_commit(current):
            work.decide_again()
            return None
        return current

    def _replaced(self, work: StageWork) -> bool:
        """True when a failure reading the stored conversation came from another writer's commit."""
        cid = work.conversation_id
        return work.marker is not None and cid is not None and not work.marker.same_commit(
            self.writer.commit_marker(cid))


__all__ = ["Constructor"]
