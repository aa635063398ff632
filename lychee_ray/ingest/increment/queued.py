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
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from lychee_ray.ingest.commit import LockWait, encode_lock, hold, increment_delta
from lychee_ray.ingest.increment.cache import StoredCache, marker_open_turns, stored_state
from lychee_ray.ingest.increment.errors import ConversationBusy, OwnerMismatch, UnknownConversationError
from lychee_ray.ingest.increment.construct import construct_increment
from lychee_ray.ingest.increment.models import AppendRequest, AppendResult
from lychee_ray.ingest.increment.turns import check_append, new_turn_rows
from lychee_ray.ingest.passages import passages_of_turns
from lychee_ray.ingest.pipeline import BuildContext
from lychee_ray.ingest.segment import turn_embedding_text
from lychee_ray.core.conversation import TURN_SCHEMA
from lychee_ray.core.passages import passages_table
from lychee_ray.core.turn_identity import turns_digest
from lychee_ray.io.store import StoreWriter
from lychee_ray.io.store.fs import AnyPath
from lychee_ray.io.store.artifacts import ConversationDelta, TableDelta, TableVectors
from lychee_ray.io.store.marker import MARKER_VERSION, BuildInfo, CommitMarker, ConversationReplaced, LastIncrement


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
    (:func:`~lychee_ray.ingest.increment.inline.append_inline`). Raises
    the same typed errors as it, without writing anything.
    """
    t0 = time.perf_counter()
    ac, cid = ctx.cfg.appends, request.conversation_id
    if request.flush:
        return None
    writer = StoreWriter(root, ctx.cfg.store)
    wait = LockWait.for_append(ac, lock_timeout_s, ConversationBusy)
    async with hold(writer, cid, wait) as held:
        t_lock = time.perf_counter()
        marker = held.marker()
        if marker is None or marker.generation is None or marker.fingerprint != ctx.fingerprint:
            return None
        user = marker.owner
        if request.user_id is not None and request.user_id != user:
            raise OwnerMismatch(cid, user, request.user_id)
        log = await asyncio.to_thread(cache.turn_log, writer.layout, marker)
        rows, turns, dups = new_turn_rows(log, request, user)
        timings = {"lock": (t_lock - t0) * 1e3, "read": (time.perf_counter() - t_lock) * 1e3}
        committed = None
        if rows:
            max_chars = ctx.cfg.segmenter.max_turn_chars
            t_embed = time.perf_counter()
            vecs = np.asarray(await ctx.embed([turn_embedding_text(t, max_chars) for t in turns]), dtype=np.float32)
            passages = passages_of_turns(cid, user, turns, ctx.cfg.passages, ctx.cfg.tokenizer.encoding)
            pvecs = (np.asarray(await ctx.memory_embed([p.text for p in passages]), dtype=np.float32) if passages
                     else np.zeros((0, ctx.embed_dim), np.float32))
            timings["embed"] = (time.perf_counter() - t_embed) * 1e3
            table = pa.Table.from_pylist(rows, schema=TURN_SCHEMA)
            info = {k: getattr(marker, k) for k in BuildInfo.model_fields}
            info.update(turns_digest=turns_digest(table, marker.turns_digest) if marker.turns_digest else None,
                        last_increment=LastIncrement(turns_added=len(rows), segments_encoded=0))
            counts = marker.counts.model_copy(update={"turns": marker.counts.turns + len(rows)})
            delta = ConversationDelta(
                conversation_id=cid, user_id=user, fingerprint=ctx.fingerprint,
                tables={"turns": TableDelta(table, TableVectors.of(vecs, None, ctx.embed_dim)),
                        **({"passages": TableDelta(passages_table(passages), TableVectors.of(pvecs, None, ctx.embed_dim))}
                           if passages else {})},
                counts=counts, open_turns=marker.open_turns + len(rows), info=BuildInfo(**info), dim=ctx.embed_dim,
                unsegmented_turns=marker.unsegmented_turns + len(rows))
            t_commit = time.perf_counter()
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
    ac, cid = ctx.cfg.appends, request.conversation_id
    wait = LockWait.for_append(ac, lock_timeout_s, ConversationBusy)
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
            marker = writer.commit_marker(cid)
            if marker is None:
                raise UnknownConversationError(cid)
            if marker.version < MARKER_VERSION:  # an older marker is migrated under the write lock first
                async with hold(writer, cid, wait) as held:
                    marker = held.marker()
                continue
            check_append(cid, marker, request.user_id, ctx.fingerprint, create=False)
            if not marker.unsegmented_turns:
                break
            attempts += 1
            try:
                stored = await asyncio.to_thread(stored_state, layout, marker, cache)
            except (OSError, RuntimeError):  # a fold or erasure replaced those files meanwhile: read again
                if attempts >= ac.catch_up_attempts:
                    raise
                continue
            conv = stored.conversation()
            inc = await construct_increment(stored, conv, ctx, finish=False, ledger_start=len(ctx.ledger),
                                            allow_delta=True)
            if not inc.changed:
                if cache is not None:
                    cache.keep_stored(stored)
                break
            async with hold(writer, cid, wait) as held:
                current = writer.commit_marker(cid)
                if current is None:
                    raise UnknownConversationError(cid)  # erased while it encoded: nothing to write back
                if not current.same_lineage(marker):
                    # erased and re-created while it encoded: what it encoded is the erased
                    # conversation's; drop it and catch up the new one (if it queued anything)
                    if cache is not None:
                        cache.forget(marker.key)
                    if attempts >= ac.catch_up_attempts:
                        raise ConversationReplaced(cid, "erased and re-created while it was encoded")
                    continue
                added = current.counts.turns - marker.counts.turns
                # a full generation holds only the turns it encoded: with turns queued meanwhile it
                # would drop them (start over, reading them too)
                full = increment_delta(stored, inc) is None
                if current.segmentation_epoch != marker.segmentation_epoch or (full and added):
                    if attempts >= ac.catch_up_attempts:
                        raise ConversationBusy(cid, time.perf_counter() - t0)
                    continue  # another commit changed the segmentation: start over from it
                committed = await asyncio.to_thread(held.commit_increment, stored, inc, ac if fold else None, cache,
                                                    _queued_since(current, added))
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


def _queued_since(current: CommitMarker, added: int) -> Callable[[ConversationDelta], None]:
    """Amends a background encoding's delta for the ``added`` turns queued since the state it
    encoded from: they stay stored, queued, open and counted in ``current``'s terms."""
    def adjust(delta: ConversationDelta) -> None:
        delta.counts = delta.counts.model_copy(update={"turns": current.counts.turns})
        delta.open_turns += added
        delta.unsegmented_turns = added
        if added:  # the turns' digest chain already runs over the turns queued since
            delta.info = delta.info.model_copy(update={"turns_digest": current.turns_digest})
    return adjust


__all__ = ["append_queued", "catch_up"]
