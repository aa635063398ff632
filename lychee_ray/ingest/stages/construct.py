"""Build stage: segment, encode (every LLM call through the process's — on Ray the cluster's —
rate limiter) and derive nodes for each conversation routed ``build``, up to the record and node
vectors; conversations routed ``classic`` are taken whole through the one-conversation path
(:class:`~lychee_ray.ingest.processor.ConversationProcessor`), committed and finished here.
Conversations are independent: up to ``in_flight`` of a batch are in flight at once.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging

from lychee_ray.ingest.pipeline import BuildContext, build_pending
from lychee_ray.ingest.stages.classic import ClassicFn
from lychee_ray.ingest.stages.work import StageWork

log = logging.getLogger(__name__)


class Constructor:
    """The build stage of one process: ``ctx`` builds (its embedders are not called: turn vectors
    come with the work, record vectors are the next stage's); ``classic`` finishes the rest."""

    def __init__(self, ctx: BuildContext, classic: ClassicFn, in_flight: int) -> None:
        self.ctx = ctx
        self.classic = classic
        self._sem: asyncio.Semaphore | None = None
        self.in_flight = in_flight

    async def run(self, works: list[StageWork]) -> None:
        """Advance every work of the batch (finished ones are left alone)."""
        if self._sem is None:  # made on the running loop (a Ray actor's loop is not the constructor's)
            self._sem = asyncio.Semaphore(self.in_flight)
        await asyncio.gather(*(self.one(w) for w in works))

    async def one(self, work: StageWork) -> None:
        if work.done:
            return
        assert self._sem is not None
        async with self._sem:
            if work.route == "classic":
                try:
                    work.outcome = await self.classic(work.item)
                except Exception as e:  # noqa: BLE001 — the processor quarantines; this is its last guard
                    log.exception("conversation %s failed", work.conversation_id)
                    work.fail("build", e)
                return
            conv, vecs = work.item.conversation, work.turn_vectors
            if conv is None or vecs is None:
                work.fail("build", "no turn vectors (the turn embedding stage did not run)")
                return
            dim = int(vecs.shape[1]) if vecs.ndim == 2 else self.ctx.embed_dim
            ctx = self.ctx if dim == self.ctx.embed_dim else dataclasses.replace(self.ctx, embed_dim=dim)
            try:
                work.pending = await build_pending(conv, ctx, None, vecs)
            except Exception as e:  # noqa: BLE001 — quarantine: one bad conversation never stops the job
                log.exception("conversation %s failed at build", work.conversation_id)
                work.fail("build", e)
            work.turn_vectors = None  # the pending artifacts hold them


__all__ = ["Constructor"]
