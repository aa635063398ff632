"""Incremental builds and online appends: a stored conversation grows by its new turns only.

One core, :func:`extend_conversation`, serves both callers (docs/incremental.md has the design):

* the build (:class:`~lychee_ray.build.runner.ConversationProcessor`): an input conversation whose
  stored turns open it unchanged gains its new turns; the end of the input closes the tail;
* the library / service append (:func:`append_turns`, ``MemoryStore.append``): turns arrive by
  id, duplicates are idempotent, the open tail segment stays open unless ``flush``.

The segmenter continues from the resume point saved with the last generation (its state before
the end of the input closed the tail); segments that only the end of the input closed are
*provisional* and are re-opened, re-segmented and (unless their turns and context are unchanged)
re-encoded. ρ continues from the stored segments and records. So k increments give the same
segments and record ids as one build (rules backend), and every write is one new generation,
committed under the conversation's write lock.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa

from lychee_ray.build.append_types import (
    AppendRequest,
    AppendResult,
    ConfigMismatch,
    ConversationBusy,
    OwnerMismatch,
    UnknownConversationError,
    UserIdRequired,
)
from lychee_ray.build.pipeline import (
    SEGSTATE_VERSION,
    BuildContext,
    PriorContext,
    assemble_artifacts,
    encode_segments,
    make_segstate,
    segments_quality,
    speakers_of,
    usage_tokens,
)
from lychee_ray.build.segment import conversation_turn_inputs, resolve_exchange_mode, segment_stream, turn_embedding_text
from lychee_ray.build.delta_increment import delta_increment, tail_start
from lychee_ray.build.encode.factory import make_encoder
from lychee_ray.build.stored import StoredConversation, load_stored
from lychee_ray.build.turn_merge import DEFAULT_SESSION_ID, merge_turns
from lychee_ray.config import SegmenterConfig
from lychee_ray.core.conversation import Conversation
from lychee_ray.core.records import MemoryRecord, SegmentRow, segment_id
from lychee_ray.io.store import MemoryStoreWriter, StoreLayout, conversation_key
from lychee_ray.io.store.layout import as_layout
from lychee_ray.build.turn_log import StoredCache
from lychee_ray.io.store.deltas import ConversationDelta
from lychee_ray.io.store.marker import CommitMarker, LastIncrement
from lychee_ray.io.store.writer import artifacts_delta
from lychee_ray.io.store.locks import ConversationDeleting, flock_path, is_deleting, release
from lychee_ray.llm.usage import UsageLedger



# ------------------------------------------------------------------------------------------------
# the write lock, with a bounded wait
# ------------------------------------------------------------------------------------------------


@contextmanager
def write_lock(root: str | Path | StoreLayout, conversation_id: str, timeout_s: float | None = None,
               poll_s: float = 0.0, which: Literal["write", "encode"] = "write") -> Iterator[None]:
    """Hold the conversation's one-writer lock (:mod:`lychee_ray.io.store.locks`, ``flock``: between
    processes and threads, released if the holder dies). ``timeout_s`` None waits as long as it
    takes; else :class:`ConversationBusy` after that long (trying every ``poll_s``). ``which``:
    ``"encode"`` holds the conversation's encode lock instead (one background encoding at a time).
    :class:`~lychee_ray.io.store.locks.ConversationDeleting` while the conversation is being erased."""
    layout = as_layout(root)
    if is_deleting(layout, conversation_id):
        raise ConversationDeleting(conversation_id)
    key = conversation_key(conversation_id)
    path = layout.write_lock_path(key) if which == "write" else layout.encode_lock_path(key)
    t0 = time.monotonic()
    if timeout_s is None:
        fd = flock_path(path)
    else:
        while (fd := flock_path(path, blocking=False)) is None:
            if time.monotonic() - t0 >= timeout_s:
                raise ConversationBusy(conversation_id, time.monotonic() - t0)
            time.sleep(poll_s)
    try:
        if is_deleting(layout, conversation_id):  # an erasure started while we waited
            raise ConversationDeleting(conversation_id)
        yield
    finally:
        release(fd)


class _AsyncLock:
    """:func:`write_lock` for coroutines: the (possibly blocking) wait runs in a worker thread."""

    def __init__(self, *args: Any) -> None:
        self._cm = write_lock(*args)

    async def __aenter__(self) -> None:
        await asyncio.to_thread(self._cm.__enter__)

    async def __aexit__(self, *exc: Any) -> None:
        self._cm.__exit__(*exc)


def async_write_lock(root: str | Path | StoreLayout, conversation_id: str, timeout_s: float | None = None,
                     poll_s: float = 0.0, which: Literal["write", "encode"] = "write") -> _AsyncLock:
    """``async with async_write_lock(...)``: :func:`write_lock` without blocking the event loop."""
    return _AsyncLock(root, conversation_id, timeout_s, poll_s, which)


# ------------------------------------------------------------------------------------------------
# the core: stored conversation + more turns -> the next generation
# ------------------------------------------------------------------------------------------------


@dataclass
class Increment:
    """What :func:`extend_conversation` made; ``artifacts`` None = nothing to commit."""

    artifacts: Any  # ConversationArtifacts | None
    new_turn_ids: list[str] = field(default_factory=list)
    encoded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    records_written: int = 0
    records_removed: int = 0
    open_turn_ids: list[str] = field(default_factory=list)
    rebuilt: str | None = None
    tokens: dict[str, dict[str, int]] = field(default_factory=dict)
    quality: dict[str, Any] = field(default_factory=dict)  # memory checks of the segments encoded now
    # the same written as a delta straight from what changed (build/delta_increment.py), with the
    # state the next increment starts from; then ``artifacts`` is None
    delta: ConversationDelta | None = None
    next_state: StoredConversation | None = None

    @property
    def changed(self) -> bool:
        """True when there is something to commit."""
        return self.artifacts is not None or self.delta is not None


def rebuild_reason(stored: StoredConversation | None, conv: Conversation, ctx: BuildContext,
                   speakers: list[str] | None = None) -> tuple[str | None, bool]:
    """(why the stored segmentation cannot simply be continued, whether stored encodings may still be
    reused) — None when it can. Each reason is a case where continuing would differ from one build
    of the whole conversation (docs/incremental.md)."""
    if stored is None:
        return None, False
    if stored.marker.fingerprint != ctx.fingerprint:
        return "config_changed", False  # other segmenter/encoder settings or models: nothing carries over
    st = stored.segstate
    stored_speakers = st["speakers"] if st else speakers_of(stored.conversation())
    if (speakers if speakers is not None else speakers_of(conv)) != stored_speakers:
        return "new_speaker", False  # every encode request lists the conversation's speakers
    if st is None or st.get("version") != SEGSTATE_VERSION or st.get("num_turns") != stored.segmented_turns:
        return "no_segmenter_state", True
    if SegmenterConfig.model_validate(st["segmenter"]["config"]) != ctx.cfg.segmenter:
        return "segmenter_config", True
    if ctx.cfg.segmenter.exchange_mode == "auto" and st["segmenter"]["mode"] != "role" and \
            resolve_exchange_mode("auto", (t.role for *_, t in conv.iter_turns_from(st["num_turns"]))) \
            != st["segmenter"]["mode"]:
        # e.g. the first assistant turn: one build would use role mode throughout. ("role" is
        # resolved from any answering turn, so it stays; the saved mode covers the first
        # ``num_turns`` turns, so only the later ones can change it.)
        return "exchange_mode", True
    return None, True


def conversation_speakers(stored: StoredConversation | None, conv: Conversation) -> list[str]:
    """:func:`speakers_of` ``conv``, from the saved resume point's speakers (those of its first
    ``num_turns`` turns, in order) and the turns after them when the stored conversation has one."""
    st = stored.segstate if stored is not None else None
    if not st or st.get("speakers") is None or not isinstance(st.get("num_turns"), int) or st["num_turns"] > conv.num_turns:
        return speakers_of(conv)
    later = (t.speaker for *_, t in conv.iter_turns_from(st["num_turns"]))
    return list(dict.fromkeys([*st["speakers"], *later]))


async def extend_conversation(
    stored: StoredConversation | None, conv: Conversation, ctx: BuildContext, *, finish: bool, ledger_start: int = 0,
    allow_delta: bool = False,
) -> Increment:
    """The next generation of a conversation whose first ``stored.num_turns`` turns are ``stored``'s.

    ``finish``: the input ends here (a build, or an append with ``flush``): the open tail segment is
    closed and encoded (provisionally: the next increment re-opens it). ``ledger_start``: entries of
    ``ctx.ledger`` before this index belong to earlier work (the increment's tokens are the rest).
    ``allow_delta``: when only the tail changed, return the increment as a delta built from it
    (build/delta_increment.py: ``Increment.delta``, no artifacts) rather than whole artifacts.
    """
    t0 = time.perf_counter()
    cfg, cid = ctx.cfg, conv.conversation_id
    enc, max_chars = cfg.tokenizer.encoding, cfg.segmenter.max_turn_chars
    speakers = conversation_speakers(stored, conv)
    reason, reuse_ok = rebuild_reason(stored, conv, ctx, speakers)
    fresh = stored is None or reason == "config_changed"  # nothing stored may be reused, vectors included
    # n: turns the segmenter has consumed; n_stored: turns stored (the rest of them were appended
    # with their segmentation queued: stored with their vectors, segmented now)
    n = stored.segmented_turns if stored is not None else 0
    n_stored = stored.num_turns if stored is not None else 0
    new_turns = [t for *_, t in conv.iter_turns_from(n_stored)]
    todo = list(conv.iter_turns()) if fresh else list(conv.iter_turns_from(n_stored))
    vecs = await ctx.embed([turn_embedding_text(t, max_chars) for *_, t in todo]) if todo else \
        np.zeros((0, ctx.embed_dim), dtype=np.float32)
    all_vecs = vecs if fresh else np.concatenate([stored.turn_vectors, np.asarray(vecs, dtype=np.float32)])
    rows: list[SegmentRow] = [] if stored is None else stored.rows
    if stored is not None and reason is None:
        st = stored.segstate
        provisional = set(st["provisional"])
        final = [r for r in rows if r.segment_id not in provisional]
        replaceable = [r for r in rows if r.segment_id in provisional]
        inputs = conversation_turn_inputs(conv, all_vecs[n:], enc, max_chars, start=n)
        stream = segment_stream(inputs, cfg.segmenter, state=st["segmenter"], encoding=enc, finish=finish)
    else:  # segment the whole conversation again (cheap: no LLM); encodings are reused where still valid
        final, replaceable = [], ([] if fresh else rows)
        stream = segment_stream(conversation_turn_inputs(conv, all_vecs, enc, max_chars), cfg.segmenter, encoding=enc,
                                finish=finish)
    t_seg = time.perf_counter()
    segs = stream.segments
    ids = [segment_id(cid, s.segment_index) for s in segs]
    covered = {t for s in segs for t in s.turn_ids}
    survivors = [r for r in replaceable if r.segment_id not in ids and not set(r.turn_ids) & covered]
    old = {r.segment_id: r for r in replaceable}
    final_ids = {r.segment_id for r in final}
    # the final segments' records open the stored ones (a kept state knows how many): the tail is
    # then all that changes, and the increment is written as a delta of it
    keep = tail_start(stored, final_ids) if allow_delta and stored is not None and reason is None else None
    replaced_records: dict[str, list[MemoryRecord]] = {}  # the replaceable segments' stored records
    for rec in (stored.records[keep:] if keep is not None else stored.records if replaceable else []):
        if rec.segment_id in old:
            replaced_records.setdefault(rec.segment_id, []).append(rec)
    reuse: dict[str, tuple[SegmentRow, list]] = {}
    for s, sid in zip(segs, ids, strict=False):  # only an unbroken prefix: a segment's ρ depends on all before it
        r = old.get(sid)
        if not reuse_ok or r is None or r.status != "ok" or r.turn_ids != s.turn_ids:
            break
        reuse[sid] = (r, sorted(replaced_records.get(sid, []), key=lambda x: x.ordinal))
    provisional_ids = [segment_id(cid, s.segment_index) for s in stream.tail] + [r.segment_id for r in survivors]
    unchanged = (not new_turns and n == n_stored and reason is None and len(reuse) == len(segs)
                 and all(old[i].close_reason == s.reason for i, s in zip(ids, segs, strict=False))
                 and set(provisional_ids) == set(stored.segstate["provisional"]))
    if unchanged:
        return Increment(None, open_turn_ids=_open_turns(stored.segstate, rows))
    prior = PriorContext(final[-1].resolution_state if final else "",
                         stored.records[:keep] if keep is not None else
                         stored.records_of(final_ids) if stored is not None else [],
                         context_segments={r.segment_id for r in final if r.close_reason == "system_prompt"})
    if keep is not None:  # kept between appends (build/turn_log.py)
        prior.memory = stored.final_memory(prior.records)
    enc_rows, recs = await encode_segments(conv, segs, ctx, reuse, prior, speakers)
    new_recs = recs[len(prior.records):]
    enc_rows = [r if r.close_reason == s.reason else r.model_copy(update={"close_reason": s.reason})
                for r, s in zip(enc_rows, segs, strict=False)]
    t_enc = time.perf_counter()
    all_rows = sorted(final + enc_rows + survivors, key=lambda r: r.index)
    order = {r.segment_id: r.index for r in all_rows}
    survivor_recs = [rec for r in survivors for rec in replaced_records.get(r.segment_id, [])]
    if keep is not None:  # every tail segment comes after every final one
        records = prior.records + sorted(new_recs + survivor_recs, key=lambda r: (order[r.segment_id], r.ordinal))
    else:
        records = sorted(prior.records + new_recs + survivor_recs, key=lambda r: (order[r.segment_id], r.ordinal))
    mine = UsageLedger(u for u in ctx.ledger.entries()[ledger_start:] if u.conversation_id == cid)
    usage = mine.to_table()
    if stored is not None and stored.usage.num_rows:
        usage = pa.concat_tables([stored.usage, usage.cast(stored.usage.schema)])
    segstate = make_segstate(conv, stream.state, provisional_ids, speakers)
    encoded = [r.segment_id for r in enc_rows if r.segment_id not in reuse]
    timings = {"segment": round(t_seg - t0, 4), "encode": round(t_enc - t_seg, 4),
               "llm_latency": round(sum(u.latency_s for u in mine), 4)}
    last = LastIncrement(turns_added=len(new_turns), segments_encoded=len(encoded), rebuilt=reason)
    if keep is not None:  # only the tail changed: write just that
        d = await delta_increment(stored, conv, ctx, keep=keep, records=records, all_rows=all_rows, final_ids=final_ids,
                                  new_vectors=np.asarray(vecs, dtype=np.float32), all_vectors=all_vecs,
                                  segstate=segstate, mine=mine, timings=timings, last_increment=last)
        return Increment(
            None, new_turn_ids=[t.turn_id for t in new_turns], encoded=encoded,
            failed=[r.segment_id for r in enc_rows if r.segment_id in encoded and r.status == "failed"],
            records_written=d.records_written, records_removed=d.records_removed,
            # open turns can only be covered by the tail, or by the last final segment (a long turn
            # split across segments)
            open_turn_ids=_open_turns(segstate, final[-1:] + [r for r in all_rows if r.segment_id not in final_ids]),
            rebuilt=None, tokens=usage_tokens(mine),
            quality=segments_quality([r for r in enc_rows if r.segment_id in encoded]).report(),
            delta=d.delta, next_state=d.next_state)
    art = await assemble_artifacts(
        conv, ctx, all_rows, records, all_vecs, segstate=segstate, usage=usage,
        tokens=usage_tokens(UsageLedger.from_table(usage)), timings=timings,
        known=None if fresh else stored.known, last_increment=last,
    )
    before = {r.record_id for r in stored.records} if stored is not None else set()
    after = {r.record_id for r in records}
    return Increment(
        art, new_turn_ids=[t.turn_id for t in new_turns], encoded=encoded,
        failed=[r.segment_id for r in enc_rows if r.segment_id in encoded and r.status == "failed"],
        records_written=len(after - before), records_removed=len(before - after),
        open_turn_ids=_open_turns(segstate, all_rows), rebuilt=reason, tokens=usage_tokens(mine),
        quality=segments_quality([r for r in enc_rows if r.segment_id in encoded]).report(),
    )


def _open_turns(segstate: dict[str, Any] | None, rows: list[SegmentRow]) -> list[str]:
    """Turns of the open tail that no stored segment covers yet (not encoded: raw turns only)."""
    covered = {t for r in rows for t in r.turn_ids}
    return [t for t in (segstate or {}).get("open_turn_ids", []) if t not in covered]


# ------------------------------------------------------------------------------------------------
# online appends (MemoryStore.append, the HTTP service)
# ------------------------------------------------------------------------------------------------


def make_append_context(cfg: Any, backend: str, embedder: Any, llm_client: Any = None) -> BuildContext:
    """A :class:`BuildContext` for appends in a long-lived process (a notebook, a Serve replica).

    Each append runs on its own event loop (or the caller's), so the embedder is called directly in a
    worker thread instead of through the build's cross-request batcher; ``llm_client`` (``openai``
    backend) is shared with the caller, and its ledger records the encode calls.
    """
    async def embed(texts: Any) -> np.ndarray:
        return np.asarray(await asyncio.to_thread(embedder.encode, list(texts)), dtype=np.float32)

    encoder = make_encoder(cfg, backend, llm_client=llm_client)
    ctx = BuildContext(cfg=cfg, embed=embed, embed_dim=embedder.dim, embedder_name=embedder.name, encoder=encoder)
    client = getattr(encoder, "client", None)
    if client is not None:
        ctx.ledger = client.ledger
    return ctx


async def append_turns_async(
    root: str | Path, request: AppendRequest, ctx: BuildContext, *, create: bool | None = None,
    lock_timeout_s: float | None = None, cache: StoredCache | None = None, fold: bool = True,
) -> AppendResult:
    """Append turns to a stored conversation (or create it), as one delta generation.

    The new turns are committed at once with their vectors (searchable as raw turns); the segmenter
    continues over them — and over turns an earlier queued append stored unsegmented
    (:func:`append_turns_queued`) — and the segments they close are encoded (with ``request.flush``
    also the open tail). A stored conversation gets a delta generation holding only what changed
    (io/store/deltas.py; a new conversation, or one re-segmented from scratch, a full generation);
    ``fold``: fold the deltas into a new base right away when they passed the store's bound (else
    the caller does). ``cache``: this process's :class:`StoredCache` (the state after the last
    increment is kept there, so the next one reads only what others committed since). Idempotent
    by turn id; serialised per conversation by its write lock (waiting at most ``lock_timeout_s``,
    default ``build.append_lock_timeout_s``). ``create`` defaults to ``build.append_create``.
    Raises the typed errors of :mod:`lychee_ray.build.append_types` (and
    :class:`~lychee_ray.io.store.locks.ConversationDeleting`) without writing anything.
    """
    if not request.turns and not request.flush:  # nothing new: encode what queued appends stored
        from lychee_ray.build.queued import catch_up_async  # queued.py builds on this module

        return await catch_up_async(root, request, ctx, cache=cache, fold=fold, lock_timeout_s=lock_timeout_s)
    t0 = time.perf_counter()
    bc = ctx.cfg.build
    create = bc.append_create if create is None else create
    cid = request.conversation_id
    writer = MemoryStoreWriter(root, ctx.cfg.store)
    async with async_write_lock(writer.layout, cid, bc.append_lock_timeout_s if lock_timeout_s is None else lock_timeout_s,
                                bc.append_lock_poll_s):
        t_lock = time.perf_counter()
        marker = writer.current_marker(cid)  # under the lock (a version-1 marker is migrated)
        stored = None
        if marker is None:
            if not create:
                raise UnknownConversationError(cid)
            if request.user_id is None:
                raise UserIdRequired(cid)
            user = request.user_id
        else:
            user = marker.owner
            if request.user_id is not None and request.user_id != user:
                raise OwnerMismatch(cid, user, request.user_id)
            if marker.fingerprint != ctx.fingerprint:
                raise ConfigMismatch(cid, str(marker.fingerprint), ctx.fingerprint)
            stored = await asyncio.to_thread(stored_state, writer.layout, marker, cache)
        conv, new, dups = merge_turns(stored, request, user)
        timings = {"lock": (t_lock - t0) * 1e3}
        inc = Increment(None, open_turn_ids=_open_turns(stored.segstate, stored.rows) if stored else [])
        if new or request.flush or (stored is not None and stored.segmented_turns < stored.num_turns):
            inc = await extend_conversation(stored, conv, ctx, finish=request.flush, ledger_start=len(ctx.ledger),
                                            allow_delta=True)
        timings["build"] = (time.perf_counter() - t_lock) * 1e3
        committed = None
        if inc.changed:
            committed = await asyncio.to_thread(commit_increment, writer, stored, inc, fold, cache)
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


def stored_state(layout: StoreLayout, marker: CommitMarker, cache: StoredCache | None) -> StoredConversation:
    """The committed conversation an increment starts from: the state this process kept after its
    last increment (taken out of ``cache``, brought up to ``marker`` by turn deltas), else read
    whole (only the deltas since, when ``cache`` holds its tables)."""
    stored = cache.take_stored(layout, marker) if cache is not None else None
    if stored is None:
        stored = load_stored(layout, marker, cache.data(marker.key) if cache is not None else None)
        if cache is not None and stored.data is not None:
            cache.put_data(marker.key, stored.data)
    return stored


def increment_delta(stored: StoredConversation | None, inc: Increment) -> ConversationDelta | None:
    """The delta that commits ``inc`` (its own, or its artifacts against the stored tables); None:
    it must be committed as a full generation (a new conversation, one re-segmented from scratch,
    or a kept state without the tables to compare with)."""
    if inc.delta is not None:
        return inc.delta
    if stored is None or stored.data is None or inc.rebuilt is not None:
        return None
    return artifacts_delta(stored.data, inc.artifacts)


def commit_increment(writer: MemoryStoreWriter, stored: StoredConversation | None, inc: Increment, fold: bool,
                     cache: StoredCache | None = None,
                     adjust: Callable[[ConversationDelta], None] | None = None) -> CommitMarker:
    """Commit an increment — a delta on top of the stored commit (``adjust(delta)`` may amend it
    first), or a full generation; refused with
    :class:`~lychee_ray.io.store.marker.ConversationReplaced` when the conversation is no longer the
    lineage ``stored`` was read from (None: when it exists now) — fold when due (``fold``), and keep the state after it in
    ``cache`` for the next increment (not after a full generation or a fold: then the next one
    reads the conversation)."""
    # fenced: the commit is refused when the conversation is no longer the lineage ``stored`` read
    # (erased, and maybe re-created, since: io/store/writer.py check_fence)
    based_on = stored.marker if stored is not None else None
    delta = increment_delta(stored, inc)
    if delta is None:
        return writer.commit(inc.artifacts, locked=True, based_on=based_on)
    if adjust is not None:
        adjust(delta)
    marker = writer.commit_delta(delta, locked=True, based_on=based_on)
    if fold and writer.needs_fold(marker):
        return writer.fold(marker.conversation_id, locked=True) or marker
    if cache is not None and inc.next_state is not None:
        state = inc.next_state
        state.marker = marker
        state.applied.add(marker.deltas[-1])
        cache.keep_stored(state)
    return marker


def append_turns(root: str | Path, request: AppendRequest, ctx: BuildContext, **kwargs: Any) -> AppendResult:
    """:func:`append_turns_async` for synchronous callers (not from inside a running event loop;
    there, await the async variant or call this one through ``asyncio.to_thread``)."""
    return asyncio.run(append_turns_async(root, request, ctx, **kwargs))


__all__ = [
    "DEFAULT_SESSION_ID", "Increment", "append_turns", "append_turns_async", "async_write_lock", "extend_conversation",
    "make_append_context", "merge_turns", "rebuild_reason", "write_lock",
]
