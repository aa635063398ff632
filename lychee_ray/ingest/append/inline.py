"""An inline append: the new turns stored, segmented and encoded before the call returns.

The conversation's write lock is held throughout — decide (ingest/decide.py ``decide_append``, then
the turns checked), construct (:func:`~lychee_ray.ingest.increment.construct.construct_increment`),
re-decide and commit (ingest/commit.py): :func:`append_inline`.
The queued variant and the background catch-up are :mod:`.queued`; which one runs is chosen once,
by :mod:`.service`.
"""

from __future__ import annotations

import asyncio
import time

from lychee_ray.ingest.commit import LockWait, hold
from lychee_ray.ingest.decide import decide_append
from lychee_ray.ingest.increment.cache import StoredCache, stored_state
from lychee_ray.ingest.increment.errors import ConversationBusy
from lychee_ray.ingest.increment.construct import Increment, construct_increment, open_turns
from lychee_ray.ingest.increment.models import AppendRequest, AppendResult
from lychee_ray.ingest.increment.turns import merge_turns
from lychee_ray.ingest.pipeline import BuildContext
from lychee_ray.io.store import StoreWriter
from lychee_ray.io.store.fs import AnyPath


async def append_inline(
    root: str | AnyPath, request: AppendRequest, ctx: BuildContext, *, create: bool | None = None,
    lock_timeout_s: float | None = None, cache: StoredCache | None = None, fold: bool = True,
) -> AppendResult:
    """Append turns to a stored conversation (or create it), segmenting and encoding them before
    it returns, as one delta generation.

    The new turns are committed at once with their vectors (searchable as raw turns); the segmenter
    continues over them — and over turns an earlier queued append stored unsegmented
    (:func:`~lychee_ray.ingest.append.queued.append_queued`) — and the segments they close are encoded (with ``request.flush``
    also the open tail). A stored conversation gets a delta generation holding only what changed
    (io/store/deltas.py; a new conversation, or one re-segmented from scratch, a full generation);
    ``fold``: fold the deltas into a new base right away when they passed the store's bound (else
    the caller does). ``cache``: this process's :class:`StoredCache` (the state after the last
    increment is kept there, so the next one reads only what others committed since). Idempotent
    by turn id; serialised per conversation by its write lock (waiting at most ``lock_timeout_s``,
    default ``appends.lock_timeout_s``). ``create`` defaults to ``appends.create``.
    Raises the typed errors of :mod:`lychee_ray.ingest.increment.errors` (and
    :class:`~lychee_ray.io.store.locks.ConversationDeleting`) without writing anything.
    """
    t0 = time.perf_counter()
    appends_cfg = ctx.cfg.appends
    create = appends_cfg.create if create is None else create
    cid = request.conversation_id
    writer = StoreWriter(root, ctx.cfg.store)
    wait = LockWait.for_append(appends_cfg, lock_timeout_s, ConversationBusy)
    async with hold(writer, cid, wait) as held:
        t_lock = time.perf_counter()
        marker = held.marker()
        # decide: may it write, and which turns are new (typed errors, nothing written)
        user = decide_append(cid, marker, request.user_id, ctx.fingerprint, create)
        stored = await asyncio.to_thread(stored_state, writer.layout, marker, cache) if marker is not None else None
        conv, new, dups = merge_turns(stored, request, user)
        timings = {"lock": (t_lock - t0) * 1e3}
        inc = Increment(None, open_turn_ids=open_turns(stored.segstate, stored.rows) if stored else [])
        if new or request.flush or (stored is not None and stored.segmented_turns < stored.num_turns):
            inc = await construct_increment(stored, conv, ctx, finish=request.flush, ledger_start=len(ctx.ledger),
                                            allow_delta=True)
        timings["build"] = (time.perf_counter() - t_lock) * 1e3
        committed = None
        if inc.changed:
            held.redecide(marker)  # stands: this hold decided (a commit refuses without it)
            committed = await asyncio.to_thread(held.commit_increment, stored, inc, appends_cfg if fold else None, cache)
        elif stored is not None and cache is not None:
            cache.keep_stored(stored)  # unchanged: still the committed state
    timings["total"] = (time.perf_counter() - t0) * 1e3
    return AppendResult(
        conversation_id=cid, user_id=user, created=marker is None and committed is not None, stored_turn_ids=new,
        duplicate_turn_ids=dups, segments_encoded=inc.encoded, segments_failed=inc.failed,
        records_written=inc.records_written, records_removed=inc.records_removed, open_turn_ids=inc.open_turn_ids,
        generation=committed.generations[-1] if committed else None,
        committed_at=committed.committed_at if committed else None,
        rebuilt=inc.rebuilt, timings_ms={k: round(v, 3) for k, v in timings.items()},
    )


__all__ = ["append_inline"]
