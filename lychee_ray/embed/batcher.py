"""The one async batcher: concurrent ``embed`` requests coalesced into few model calls.

The build's runner uses :class:`AsyncBatchEmbedder`; the HTTP service's own coalescing calls
:func:`embed_batch`, so both split a failed batch the same way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from lychee_ray.embed.base import Embedder

_MS_PER_S = 1000.0


class AsyncBatchEmbedder:
    """Coalesces concurrent ``embed`` calls (e.g. many conversations in flight) into few model calls.

    Requests that arrive within ``wait_ms`` of each other are embedded together (up to
    ``max_texts`` texts per model call) in a worker thread, so the event loop stays free.
    """

    def __init__(self, embedder: Embedder, wait_ms: float, max_texts: int) -> None:
        self.embedder = embedder
        self.wait_s = wait_ms / _MS_PER_S
        self.max_texts = max_texts
        self._pending: list[tuple[list[str], asyncio.Future[np.ndarray]]] = []
        # True while a flush is scheduled but has not yet taken the pending requests; requests that
        # arrive after it took them (while the model runs) must schedule the next flush themselves.
        self._scheduled = False
        self.model_calls = 0

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors for ``texts`` (batched with whatever else is waiting)."""
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        fut: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._pending.append((list(texts), fut))
        if sum(len(t) for t, _ in self._pending) >= self.max_texts:
            await self._flush()
        elif not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().create_task(self._flush_later())
        return await fut

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.wait_s)
        await self._flush()

    async def _flush(self) -> None:
        batch, self._pending = self._pending, []
        self._scheduled = False
        if not batch:
            return
        self.model_calls += 1
        await embed_batch(self.embedder, batch)


async def embed_batch(embedder: Embedder, batch: list[tuple[list[str], asyncio.Future[np.ndarray]]]) -> None:
    """One model call (in a worker thread) for several waiting requests; each future gets its rows,
    or the error when the call fails."""
    texts = [t for ts, _ in batch for t in ts]
    try:
        vecs = await asyncio.to_thread(embedder.encode, texts)
    except Exception as e:  # noqa: BLE001 — each waiter gets the error
        if len(batch) > 1:
            # One request's bad text must not fail the others it was coalesced with: embed each
            # request alone, so only the requests that fail on their own get the error.
            for one in batch:
                await embed_batch(embedder, [one])
            return
        for _, f in batch:
            if not f.done():
                f.set_exception(e)
        return
    i = 0
    for ts, f in batch:
        if not f.done():
            f.set_result(vecs[i : i + len(ts)])
        i += len(ts)


__all__ = ["AsyncBatchEmbedder", "embed_batch"]
