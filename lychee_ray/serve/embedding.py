"""Query embeddings inside the service: concurrent requests share model calls.

A search runs in a worker thread (:func:`run_in_worker`); the query engine's embed call goes through
:class:`RequestEmbedder`, which hands the texts back to the request's event loop. There they join a
:class:`Coalescer` (directly, or via the deployment's ``@serve.batch`` method under Ray Serve), so
texts of concurrent requests share one model call. :class:`CountingEmbedder` wraps the model with
the counters the stats endpoint reports.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
from concurrent.futures import Executor
from typing import Any, Protocol, TypeVar
from collections.abc import Awaitable, Callable

import numpy as np

from lychee_ray.embed import embed_batch

T = TypeVar("T")

# The event loop of the request a worker thread is serving (so the query engine's embed call can
# join the loop's batcher); contextvars travel into the worker through ``ctx.run``.
_REQUEST_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar("_REQUEST_LOOP", default=None)
# Longest a worker thread waits for its texts' embeddings from the event loop.
EMBED_TIMEOUT_S = 120.0


class EmbeddingHost(Protocol):
    """What the embedders here need from the service: the model, the loop-side entry, counters."""

    embed_model_calls: int
    embed_texts_total: int

    @property
    def embedder(self) -> Any: ...

    async def embed_texts(self, texts: list[str]) -> np.ndarray: ...


async def run_in_worker(executor: Executor, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Run ``fn`` in ``executor``, remembering the calling event loop for :class:`RequestEmbedder`."""
    loop = asyncio.get_running_loop()
    _REQUEST_LOOP.set(loop)
    ctx = contextvars.copy_context()
    return await loop.run_in_executor(executor, ctx.run, functools.partial(fn, *args, **kwargs))


class RequestEmbedder:
    """What the query engine sees as its embedder: ``encode`` (called in a worker thread) hands the
    texts to the request's event loop, where concurrent requests' texts share one model call."""

    def __init__(self, host: EmbeddingHost) -> None:
        self._host = host

    @property
    def name(self) -> str:
        return self._host.embedder.name

    @property
    def dim(self) -> int:
        return self._host.embedder.dim

    def encode(self, texts: Any) -> np.ndarray:
        """The texts' vectors: through the request's loop when called from a worker, else directly."""
        texts = list(texts)
        loop = _REQUEST_LOOP.get()
        if not texts or loop is None or loop.is_closed():
            return self._host.embedder.encode(texts)
        try:
            if asyncio.get_running_loop() is loop:  # never block the loop on itself
                return self._host.embedder.encode(texts)
        except RuntimeError:
            pass
        fut = asyncio.run_coroutine_threadsafe(self._host.embed_texts(texts), loop)
        return fut.result(timeout=EMBED_TIMEOUT_S)


class CountingEmbedder:
    """The real embedder, counting model calls (for the stats endpoint)."""

    def __init__(self, host: EmbeddingHost) -> None:
        self._host = host

    @property
    def dim(self) -> int:
        return self._host.embedder.dim

    def encode(self, texts: list[str]) -> np.ndarray:
        """One model call, counted."""
        self._host.embed_model_calls += 1
        self._host.embed_texts_total += len(texts)
        return self._host.embedder.encode(texts)


class Coalescer:
    """One model call at a time; requests arriving while it runs share the next call.

    Under load this batches by itself (no fixed wait: ``wait_s`` only delays the first call after an
    idle spell, to gather simultaneous arrivals); when idle a request pays nothing extra. Complements
    ``@serve.batch``, whose batches form on a timer even while the previous one is still running.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, embedder: Any, wait_s: float, max_texts: int) -> None:
        self.loop = loop
        self.embedder = embedder
        self.wait_s = wait_s
        self.max_texts = max_texts
        self._pending: list[tuple[list[str], asyncio.Future]] = []
        self._running = False

    async def embed(self, texts: list[str]) -> np.ndarray:
        """The texts' vectors, from a model call shared with whatever else is pending."""
        fut = self.loop.create_future()
        self._pending.append((list(texts), fut))
        if not self._running:
            self._running = True
            self.loop.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            if self.wait_s > 0:
                await asyncio.sleep(self.wait_s)
            while self._pending:
                batch: list[tuple[list[str], asyncio.Future]] = []
                n = 0
                while self._pending and (not batch or n + len(self._pending[0][0]) <= self.max_texts):
                    item = self._pending.pop(0)
                    batch.append(item)
                    n += len(item[0])
                await embed_batch(self.embedder, batch)
        finally:
            self._running = False


# The deployment's ``@serve.batch`` method: a request's texts in, its vectors out.
BatchFn = Callable[[list[str]], Awaitable[np.ndarray]]

__all__ = ["EMBED_TIMEOUT_S", "BatchFn", "Coalescer", "CountingEmbedder", "EmbeddingHost", "RequestEmbedder",
           "run_in_worker"]
