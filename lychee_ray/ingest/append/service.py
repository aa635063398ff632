"""The append service: the one place that chooses how an append runs — queued, inline or catch-up.

* :func:`append_turns_async` / :func:`append_turns`: an append of turns (or a flush) runs inline
  (:func:`~.inline.append_inline`); an append of no turns without ``flush`` is the catch-up of the
  turns queued appends stored (:func:`~.queued.catch_up`).
* :class:`AppendService`: what a long-lived process appends through (``MemoryStore.append``, a
  Serve replica's :class:`~lychee_ray.serve.appends.Appender`): a queued append when asked for
  (:func:`~.queued.append_queued`; inline when it cannot queue), its background encoding handed to
  the caller's queue, or caught up inline when that queue is full.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from lychee_ray.ingest.increment.cache import StoredCache
from lychee_ray.ingest.append.inline import append_inline
from lychee_ray.ingest.increment.models import AppendRequest, AppendResult
from lychee_ray.ingest.append.queued import append_queued, catch_up
from lychee_ray.ingest.pipeline import BuildContext
from lychee_ray.config import LycheeConfig
from lychee_ray.io.store.fs import AnyPath

# makes the build context appends run with (on first use: it may load models)
ContextFactory = Callable[[], BuildContext]


async def append_turns_async(
    root: str | AnyPath, request: AppendRequest, ctx: BuildContext, *, create: bool | None = None,
    lock_timeout_s: float | None = None, cache: StoredCache | None = None, fold: bool = True,
) -> AppendResult:
    """Append turns to a stored conversation (or create it), as one delta generation: inline
    (:func:`~.inline.append_inline`, which documents the arguments), or — an append of no turns
    without ``flush`` — the catch-up that segments and encodes what queued appends stored
    (:func:`~.queued.catch_up`; ``create`` does not apply). Raises the typed errors of
    :mod:`lychee_ray.ingest.increment.errors` (and
    :class:`~lychee_ray.io.store.locks.ConversationDeleting`) without writing anything."""
    if not request.turns and not request.flush:  # nothing new: encode what queued appends stored
        return await catch_up(root, request, ctx, cache=cache, fold=fold, lock_timeout_s=lock_timeout_s)
    return await append_inline(root, request, ctx, create=create, lock_timeout_s=lock_timeout_s, cache=cache, fold=fold)


def append_turns(root: str | AnyPath, request: AppendRequest, ctx: BuildContext, *, create: bool | None = None,
                 lock_timeout_s: float | None = None, cache: StoredCache | None = None, fold: bool = True) -> AppendResult:
    """:func:`append_turns_async` for synchronous callers (not from inside a running event loop;
    there, await the async variant or call this one through ``asyncio.to_thread``)."""
    return asyncio.run(append_turns_async(root, request, ctx, create=create, lock_timeout_s=lock_timeout_s, cache=cache,
                                          fold=fold))


class AppendService:
    """One process's appends to a store at ``root``.

    ``context`` makes the build context of the appends (called on each append; it should make it
    once and keep it), ``background_context`` the one of catch-ups (default: the same). ``cache``:
    the stored state kept between appends (default: one of ``appends.cache_conversations``).
    ``committed(conversation_id)`` is called after every call that committed a generation (e.g. to
    make the caller's reader read it at once).
    """

    def __init__(self, root: str | AnyPath, config: LycheeConfig, context: ContextFactory, *,
                 background_context: ContextFactory | None = None, cache: StoredCache | None = None,
                 committed: Callable[[str], object] | None = None) -> None:
        self.root = root
        self.config = config
        self._context = context
        self._background_context = background_context or context
        self.cache = cache if cache is not None else StoredCache(config.appends.cache_conversations)
        self._committed = committed
        self.inline_encodes = 0  # queued appends caught up inline because the caller's queue was full

    def append(self, request: AppendRequest, *, queued: bool = False,
               submit: Callable[[str], bool] | None = None) -> AppendResult:
        """Run one append (blocking). ``queued``: store the turns now and leave their segmentation
        and encoding to a catch-up (:func:`~.queued.append_queued`); a conversation that is not
        stored yet, a flush or changed settings append inline instead. ``submit(conversation_id)``
        hands that catch-up to the caller's background queue; False (full) catches up inline now.
        Without ``queued``: :func:`append_turns` (inline, or the catch-up of an empty append)."""
        cid = request.conversation_id
        result = None
        if queued:
            result = asyncio.run(append_queued(self.root, request, self._context(), self.cache))
            if result is not None and result.encode_queued and submit is not None and not submit(cid):
                self.inline_encodes += 1
                self.catch_up(cid)
                result = result.model_copy(update={"encode_queued": False})
        if result is None:
            result = append_turns(self.root, request, self._context(), cache=self.cache, fold=True)
        self._done(cid, result)
        return result

    def catch_up(self, conversation_id: str) -> AppendResult:
        """Segment and encode a conversation's queued turns (an append of no turns; a background
        queue's work) with the background context, folding its deltas when they passed the bound."""
        result = append_turns(self.root, AppendRequest(conversation_id=conversation_id, turns=[]),
                              self._background_context(), cache=self.cache, fold=True)
        self._done(conversation_id, result)
        return result

    def forget(self, conversation_key: str) -> None:
        """Drop what is kept of an erased conversation (by its store key)."""
        self.cache.forget(conversation_key)

    def _done(self, conversation_id: str, result: AppendResult) -> None:
        if result.generation is not None and self._committed is not None:
            self._committed(conversation_id)


__all__ = ["AppendService", "ContextFactory", "append_turns", "append_turns_async"]
