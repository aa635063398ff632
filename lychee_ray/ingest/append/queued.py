"""Queued appends and their background catch-up (docs/incremental.md "Delta
generations and queued appends").

* :func:`append_queued`: store an append's turns now (one delta generation: their rows and
  vectors) and leave segmentation and encoding to later; its cost does not grow with the
  conversation (the stored turns are known from :class:`~lychee_ray.ingest.increment.cache.StoredCache`).
* :func:`catch_up`: that later — segment every unsegmented turn from the saved resume point
  and encode what closes, holding the write lock only to commit, so appends go on meanwhile.
"""

from __future__ import annotations

import asyncio
import time

from lychee_ray.ingest.commit import SAME_SEGMENTATION, SAME_TURNS, LockWait, encode_lock, hold, increment_delta
from lychee_ray.ingest.decide import decide_catch_up, decide_queued
from lychee_ray.ingest.increment.cache import StoredCache, marker_open_turns, stored_state
from lychee_ray.ingest.increment.errors import ConversationBusy, UnknownConversationError
from lychee_ray.ingest.increment.construct import construct_increment
from lychee_ray.ingest.increment.models import AppendRequest, AppendResult
from lychee_ray.ingest.increment.queued_delta import construct_queued, queued_since
from lychee_ray.ingest.increment.turns import new_turn_rows
from lychee_ray.ingest.pipeline import BuildContext
from lychee_ray.io.store import StoreWriter
from lychee_ray.io.store.fs import AnyPath
from lychee_ray.io.store.marker import CommitMarker, ConversationReplaced


async def append_queued(
    root: str | AnyPath, request: AppendRequest, ctx: BuildContext, cache: StoredCache, *,
    lock_timeout_s: float | None = None,
) -> AppendResult | None:
    """Store an append's new turns now and leave their segmentation and encoding to later: one
    delta generation with the turn rows and their vectors (searchable as raw turns on the next
    read), the marker counting them as ``unsegmented_turns``. Costs the new turns only — the stored
    ones are known from ``cache`` (:class:`StoredCache`, refreshed by delta) — so it does not grow
    with the conversation.

    The queued work is whatever the next append of the conversation does first
    (a background catch-up, the next synchronous append, a flush): segment from the saved resume
    point over every unsegmented turn and encode what closes — exactly what one append of all
    those turns would have done, so nothing is lost if this process dies before it runs.

    Returns None when this call cannot queue (the conversation is not stored yet, ``flush`` was
    asked for, or its stored settings differ): the caller appends inline
    (:func:`~lychee_ray.ingest.append.inline.append_inline`). Raises
    the same typed errors as it, without writing anything.
    """
    t0 = time.perf_counter()
    appends_cfg, cid = ctx.cfg.appends, request.conversation_id
    if request.flush:
        return None
    writer = StoreWriter(root, ctx.cfg.store)
    wait = LockWait.for_append(appends_cfg, lock_timeout_s, ConversationBusy)
    async with hold(writer, cid, wait) as held:
        t_lock = time.perf_counter()
        marker = held.marker()
        user = decide_queued(request, marker, ctx.fingerprint)  # (decided under the lock it commits under)
        if user is None or marker is None:
            return None
        log = await asyncio.to_thread(cache.turn_log, writer.layout, marker)
        rows, turns, dups = new_turn_rows(log, request, user)
        timings = {"lock": (t_lock - t0) * 1e3, "read": (time.perf_counter() - t_lock) * 1e3}
        committed = None
        if rows:
            delta = await construct_queued(marker, rows, turns, ctx, timings)
            t_commit = time.perf_counter()
            held.redecide(marker)  # stands: this hold decided (a commit refuses without it)
            committed = await asyncio.to_thread(held.commit_delta, delta, marker)
            timings["commit"] = (time.perf_counter() - t_commit) * 1e3
            log.marker = committed
            log.add(rows)
        waiting = log.waiting_turn_ids()
        cache.put(log)  # (not put back when the append failed: the next one reads it again)
        timings["build"] = (time.perf_counter() - t_lock) * 1e3
    timings["total"] = (time.perf_counter() - t0) * 1e3
    return AppendResult(
        conversation_id=cid, user_id=user, created=False, stored_turn_ids=[r["turn_id"] for r in rows],
        duplicate_turn_ids=dups, segments_encoded=[], records_written=0, open_turn_ids=waiting,
        generation=committed.deltas[-1] if committed else None, committed_at=committed.committed_at if committed else None,
        encode_queued=bool(committed is not None or marker.unsegmented_turns),
        timings_ms={k: round(v, 3) for k, v in timings.items()},
    )


async def catch_up(
    root: str | AnyPath, request: AppendRequest, ctx: BuildContext, *, cache: StoredCache | None = None,
    fold: bool = True, lock_timeout_s: float | None = None,
) -> AppendResult:
    """Segment and encode the turns queued appends stored (an append of no turns, not a flush)
    *without holding the write lock while it works*, so appends of the conversation go on meanwhile.

    Under the conversation's encode lock (one encoding at a time): read the committed state, segment
    from its resume point and encode what closes, then take the write lock only to commit — a delta
    of the segments, records and nodes — provided no other commit changed the segmentation since
    (``segmentation_epoch``; turns queued in between are fine: they stay queued, and the loop goes
    on while any are left). Otherwise it starts over from the newer state, at most
    ``appends.catch_up_attempts`` times. A conversation erased and re-created meanwhile (another
    lineage) gets nothing of this encoding: the commit is fenced (``check_fence``), and the loop
    starts over on the new conversation. Returns what the last round did."""
    t0 = time.perf_counter()
    appends_cfg, cid = ctx.cfg.appends, request.conversation_id
    wait = LockWait.for_append(appends_cfg, lock_timeout_s, ConversationBusy)
    writer = StoreWriter(root, ctx.cfg.store)
    layout = writer.layout
    encoded: list[str] = []
    failed: list[str] = []
    written = removed = 0
    committed: CommitMarker | None = None
    marker: CommitMarker | None = None
    open_ids: list[str] = []
    attempts = 0
    async with encode_lock(writer, cid, wait):
        while True:
            decided, waiting = await asyncio.to_thread(decide_catch_up, request, writer, ctx.fingerprint, wait)
            marker = decided
            if not waiting:
                break
            attempts += 1
            try:
                stored = await asyncio.to_thread(stored_state, layout, decided, cache)
            except (OSError, RuntimeError):  # a fold or erasure replaced those files meanwhile: read again
                if attempts >= appends_cfg.catch_up_attempts:
                    raise
                continue
            conv = stored.conversation()
            inc = await construct_increment(stored, conv, ctx, finish=False, ledger_start=len(ctx.ledger),
                                            allow_delta=True)
            if not inc.changed:
                if cache is not None:
                    cache.keep_stored(stored)
                break
            # a full generation holds only the turns it encoded: with turns queued meanwhile it
            # would drop them (then it starts over, reading them too)
            needs = SAME_TURNS if increment_delta(stored, inc) is None else SAME_SEGMENTATION
            async with hold(writer, cid, wait) as held:
                verdict = held.redecide(decided, needs)
                if verdict == "gone":
                    raise UnknownConversationError(cid)  # erased while it encoded: nothing to write back
                if verdict == "replaced":
                    # erased and re-created while it encoded: what it encoded is the erased
                    # conversation's; drop it and catch up the new one (if it queued anything)
                    if cache is not None:
                        cache.forget(decided.key)
                    if attempts >= appends_cfg.catch_up_attempts:
                        raise ConversationReplaced(cid, "erased and re-created while it was encoded")
                    continue
                if verdict == "moved":
                    if attempts >= appends_cfg.catch_up_attempts:
                        raise ConversationBusy(cid, time.perf_counter() - t0)
                    continue  # another commit changed the segmentation: start over from it
                current = held.marker()
                assert current is not None  # (the re-decision stands)
                added = current.counts.turns - decided.counts.turns
                fold_at = appends_cfg if fold else None
                committed = await asyncio.to_thread(held.commit_increment, stored, inc, fold_at, cache,
                                                    queued_since(current, added))
            encoded += inc.encoded
            failed += inc.failed
            written += inc.records_written
            removed += inc.records_removed
            open_ids = inc.open_turn_ids
            break  # turns queued meanwhile: their own appends queued another round
    last = committed or marker
    timings = {"total": round((time.perf_counter() - t0) * 1e3, 3)}
    if committed is None and marker is not None:
        open_ids = marker_open_turns(layout, marker, cache)
    return AppendResult(
        conversation_id=cid, user_id=last.owner if last else cid, created=False, stored_turn_ids=[],
        duplicate_turn_ids=[], segments_encoded=encoded, segments_failed=failed, records_written=written,
        records_removed=removed, open_turn_ids=open_ids,
        generation=committed.generations[-1] if committed else None,
        committed_at=committed.committed_at if committed else None, timings_ms=timings,
        encode_queued=bool(committed is not None and committed.unsegmented_turns))


__all__ = ["append_queued", "catch_up"]
