"""System prompts are encoded once per distinct text: an encoder wrapper.

An agent log opens with the agent's system prompt, and a corpus of logs repeats the same prompt in
every conversation (112 conversations, one 6,000-character policy). The segmenter makes it a
segment of its own (``kind="system_prompt"``, ingest/segment/base.py); this wrapper answers every
later request for the same text from the first one's reply, so the LLM is called once per distinct
prompt per process (a Ray builder actor, a replica), and the reply's records are stored with each
conversation under that conversation's ids. Concurrent requests for one text wait for one call.
Dialogue segments pass straight through. The bound is ``encoder.system_prompt_cache`` texts
(least recently used dropped: ``cachetools.LRUCache``, a maintained bounded map).
"""

from __future__ import annotations

import asyncio
import hashlib
from typing import Any

from cachetools import LRUCache

from lychee_ray.ingest.encode.base import EncodeOutput, EncodeRequest, EncodeResult, SegmentEncoder


def prompt_key(request: EncodeRequest) -> str:
    """What makes two system-prompt requests the same: their turns' roles and texts, in order."""
    h = hashlib.sha256()
    for t in request.turns:
        h.update(f"{t.role}\x1f{t.content}\x1e".encode())
    return h.hexdigest()


class SystemPromptOnce:
    """A :class:`~lychee_ray.ingest.encode.base.SegmentEncoder` that encodes each distinct system
    prompt once (see the module doc); ``hits`` counts the calls saved."""

    def __init__(self, inner: SegmentEncoder, max_prompts: int) -> None:
        self.inner = inner
        self.backend = inner.backend
        self.model = inner.model
        self.supports_repair = getattr(inner, "supports_repair", False)
        self._done: LRUCache[str, EncodeOutput] = LRUCache(maxsize=max(1, max_prompts))
        # a call in progress per text; its future holds the output, or None when that call failed
        self._pending: dict[str, asyncio.Future[EncodeOutput | None]] = {}
        self.hits = 0

    def __getattr__(self, name: str) -> Any:  # the inner encoder's client, config ... (e.g. ``client`` for the ledger)
        return getattr(self.inner, name)

    async def encode(self, request: EncodeRequest) -> EncodeResult:
        if request.kind != "system_prompt" or request.repair is not None:
            return await self.inner.encode(request)
        key = prompt_key(request)
        done = self._done.get(key)
        if done is None and key in self._pending:
            done = await asyncio.shield(self._pending[key])  # None: that call failed, this one tries itself
        if done is not None:
            self.hits += 1
            return EncodeResult(output=done.model_copy(deep=True), attempts=0, model=self.model)
        fut: asyncio.Future[EncodeOutput | None] = asyncio.get_running_loop().create_future()
        self._pending[key] = fut
        output = None
        try:
            result = await self.inner.encode(request)
            output = result.output
            self._done[key] = output
            return result
        finally:
            self._pending.pop(key, None)
            fut.set_result(output)


__all__ = ["SystemPromptOnce", "prompt_key"]
