"""The one-conversation path as the stages call it: a :class:`ConversationProcessor`, made when
first needed (in a Ray actor of the build or commit stage that means loading the embedding model,
which most runs never need there: it serves increments, retries and marker races only)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable

from lychee_ray.ingest.outcomes import Outcome
from lychee_ray.ingest.processor import ConversationProcessor
from lychee_ray.io.adapters import AdapterItem

ClassicFn = Callable[[AdapterItem], Awaitable[Outcome]]


class LazyClassic:
    """``await classic(item)`` → the item's outcome through a processor that ``factory`` makes once."""

    def __init__(self, factory: Callable[[], ConversationProcessor]) -> None:
        self._factory = factory
        self._processor: ConversationProcessor | None = None
        self._lock = threading.Lock()

    def _make(self) -> ConversationProcessor:
        with self._lock:
            if self._processor is None:
                self._processor = self._factory()
            return self._processor

    @property
    def made(self) -> bool:
        return self._processor is not None

    async def __call__(self, item: AdapterItem) -> Outcome:
        proc = self._processor
        if proc is None:
            proc = await asyncio.to_thread(self._make)
        return await proc.process(item)


__all__ = ["ClassicFn", "LazyClassic"]
