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
import itertools
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, Literal

import numpy as np
import pyarrow as pa
from pydantic import ValidationError

from lychee_ray.build.append_types import (
    AppendRequest,
    AppendResult,
    AppendTurn,
    ConfigMismatch,
    ConversationBusy,
    HistoryConflict,
    InvalidTurns,
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
from lychee_ray.build.stored import StoredConversation, load_stored
from lychee_ray.config import SegmenterConfig
from lychee_ray.core.conversation import Conversation, Session, Turn
from lychee_ray.core.records import SegmentRow, segment_id
from lychee_ray.io.store import MemoryStoreWriter, StoreLayout, conversation_key
from lychee_ray.io.store.layout import as_layout
from lychee_ray.build.turn_log import StoredCache
from lychee_ray.io.store.marker import CommitMarker, LastIncrement
from lychee_ray.io.store.writer import artifacts_delta
from lychee_ray.io.store.locks import ConversationDeleting, flock_path, is_deleting, release
from lychee_ray.llm.usage import UsageLedger

# Session id of a conversation created by an append whose turns name no session.
DEFAULT_SESSION_ID = "s1"


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


def rebuild_reason(stored: StoredConversation | None, conv: Conversation, ctx: BuildContext) -> tuple[str | None, bool]:
    """(why the stored segmentation cannot simply be continued, whether stored encodings may still be
    reused) — None when it can. Each reason is a case where continuing would differ from one build
    of the whole conversation (docs/incremental.md)."""
    if stored is None:
        return None, False
    if stored.marker.fingerprint != ctx.fingerprint:
        return "config_changed", False  # other segmenter/encoder settings or models: nothing carries over
    st = stored.segstate
    speakers = st["speakers"] if st else speakers_of(stored.conversation())
    if speakers_of(conv) != speakers:
        return "new_speaker", False  # every encode request lists the conversation's speakers
    if st is None or st.get("version") != SEGSTATE_VERSION or st.get("num_turns") != stored.segmented_turns:
        return "no_segmenter_state", True
    if SegmenterConfig.model_validate(st["segmenter"]["config"]) != ctx.cfg.segmenter:
        return "segmenter_config", True
    if ctx.cfg.segmenter.exchange_mode == "auto" and \
            resolve_exchange_mode("auto", (t.role for *_, t in conv.iter_turns())) != st["segmenter"]["mode"]:
        return "exchange_mode", True  # e.g. the first assistant turn: one build would use role mode throughout
    return None, True


async def extend_conversation(
    stored: StoredConversation | None, conv: Conversation, ctx: BuildContext, *, finish: bool, ledger_start: int = 0,
) -> Increment:
    """The next generation of a conversation whose first ``stored.num_turns`` turns are ``stored``'s.

    ``finish``: the input ends here (a build, or an append with ``flush``): the open tail segment is
    closed and encoded (provisionally: the next increment re-opens it). ``ledger_start``: entries of
    ``ctx.ledger`` before this index belong to earlier work (the increment's tokens are the rest).
    """
    t0 = time.perf_counter()
    cfg, cid = ctx.cfg, conv.conversation_id
    enc, max_chars = cfg.tokenizer.encoding, cfg.segmenter.max_turn_chars
    reason, reuse_ok = rebuild_reason(stored, conv, ctx)
    fresh = stored is None or reason == "config_changed"  # nothing stored may be reused, vectors included
    # n: turns the segmenter has consumed; n_stored: turns stored (the rest of them were appended
    # with their segmentation queued: stored with their vectors, segmented now)
    n = stored.segmented_turns if stored is not None else 0
    n_stored = stored.num_turns if stored is not None else 0
    new_turns = [t for *_, t in itertools.islice(conv.iter_turns(), n_stored, None)]
    todo = list(conv.iter_turns()) if fresh else list(itertools.islice(conv.iter_turns(), n_stored, None))
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
    reuse: dict[str, tuple[SegmentRow, list]] = {}
    for s, sid in zip(segs, ids):  # only an unbroken prefix: a segment's ρ depends on all before it
        r = old.get(sid)
        if not reuse_ok or r is None or r.status != "ok" or r.turn_ids != s.turn_ids:
            break
        reuse[sid] = (r, sorted(stored.records_of({sid}), key=lambda x: x.ordinal))
    provisional_ids = [segment_id(cid, s.segment_index) for s in stream.tail] + [r.segment_id for r in survivors]
    unchanged = (not new_turns and n == n_stored and reason is None and len(reuse) == len(segs)
                 and all(old[i].close_reason == s.reason for i, s in zip(ids, segs))
                 and set(provisional_ids) == set(stored.segstate["provisional"]))
    if unchanged:
        return Increment(None, open_turn_ids=_open_turns(stored.segstate, rows))
    prior = PriorContext(final[-1].resolution_state if final else "",
                         stored.records_of({r.segment_id for r in final}) if stored is not None else [])
    enc_rows, recs = await encode_segments(conv, segs, ctx, reuse, prior)
    new_recs = recs[len(prior.records):]
    enc_rows = [r if r.close_reason == s.reason else r.model_copy(update={"close_reason": s.reason})
                for r, s in zip(enc_rows, segs)]
    t_enc = time.perf_counter()
    all_rows = sorted(final + enc_rows + survivors, key=lambda r: r.index)
    order = {r.segment_id: r.index for r in all_rows}
    survivor_recs = stored.records_of({r.segment_id for r in survivors}) if stored is not None else []
    records = sorted(prior.records + new_recs + survivor_recs, key=lambda r: (order[r.segment_id], r.ordinal))
    mine = UsageLedger(u for u in ctx.ledger.entries()[ledger_start:] if u.conversation_id == cid)
    usage = mine.to_table()
    if stored is not None and stored.usage.num_rows:
        usage = pa.concat_tables([stored.usage, usage.cast(stored.usage.schema)])
    segstate = make_segstate(conv, stream.state, provisional_ids)
    encoded = [r.segment_id for r in enc_rows if r.segment_id not in reuse]
    art = await assemble_artifacts(
        conv, ctx, all_rows, records, all_vecs, segstate=segstate, usage=usage,
        tokens=usage_tokens(UsageLedger.from_table(usage)),
        timings={"segment": round(t_seg - t0, 4), "encode": round(t_enc - t_seg, 4),
                 "llm_latency": round(sum(u.latency_s for u in mine), 4)},
        known=None if fresh else stored.known,
        last_increment=LastIncrement(turns_added=len(new_turns), segments_encoded=len(encoded), rebuilt=reason),
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
    from lychee_ray.build.runner import make_encoder  # runner imports this module

    async def embed(texts: Any) -> np.ndarray:
        return np.asarray(await asyncio.to_thread(embedder.encode, list(texts)), dtype=np.float32)

    if backend == "openai" and llm_client is not None:
        from lychee_ray.build.encode.openai import OpenAIEncoder

        encoder: Any = OpenAIEncoder(llm_client, cfg.encoder, cfg.tokenizer)
    else:
        encoder = make_encoder(cfg, backend)
    ctx = BuildContext(cfg=cfg, embed=embed, embed_dim=embedder.dim, embedder_name=embedder.name, encoder=encoder)
    client = getattr(encoder, "client", None)
    if client is not None:
        ctx.ledger = client.ledger
    return ctx


def _differences(row: dict[str, Any], t: AppendTurn) -> list[str]:
    """Fields in which an appended turn differs from the stored turn of the same id."""
    import json

    mine = {"role": t.role, "speaker": t.speaker or t.role, "content": t.content, "timestamp": t.timestamp,
            "meta": json.dumps(t.meta, sort_keys=True) if t.meta else None}
    out = [k for k, v in mine.items() if row[k] != v]
    if t.session_id is not None and t.session_id != row["session_id"]:
        out.append("session_id")
    return out


def _invalid(cid: str, e: ValidationError, turn_id: str | None) -> InvalidTurns:
    err = e.errors()[0]
    where = ".".join(str(x) for x in err.get("loc", ()))
    return InvalidTurns(cid, f"turn {turn_id!r}: {where}: {err.get('msg')}" if turn_id else f"{where}: {err.get('msg')}",
                        turn_id=turn_id, field=where or None)


def merge_turns(stored: StoredConversation | None, request: AppendRequest, user_id: str) -> tuple[Conversation, list[str], list[str]]:
    """The conversation after the append, the ids of the new turns and of the duplicates.

    A turn id already stored is a duplicate when it says the same (idempotent retry) and a
    :class:`HistoryConflict` ``changed`` otherwise; a turn for a session that is not the last one is
    ``reordered``. Nothing is partly applied: every check runs before anything is written.
    """
    cid = request.conversation_id
    rows = {r["turn_id"]: r for r in stored.turn_rows()} if stored is not None else {}
    sessions = [s.model_copy(deep=True) for s in stored.conversation().sessions] if stored is not None else []
    seen: dict[str, AppendTurn] = {}
    new: list[str] = []
    dups: list[str] = []
    for t in request.turns:
        if t.turn_id in seen:
            if seen[t.turn_id] != t:
                raise InvalidTurns(cid, f"turn {t.turn_id!r} appears twice in the request with different content",
                                   turn_id=t.turn_id, field="turn_id")
            continue
        seen[t.turn_id] = t
        row = rows.get(t.turn_id)
        if row is not None:
            diff = _differences(row, t)
            if diff:
                raise HistoryConflict("changed", cid, t.turn_id, "fields " + ", ".join(diff))
            dups.append(t.turn_id)
            continue
        sid = t.session_id or (sessions[-1].session_id if sessions else DEFAULT_SESSION_ID)
        if not sessions or sid != sessions[-1].session_id:
            if any(s.session_id == sid for s in sessions):
                raise HistoryConflict("reordered", cid, t.turn_id, f"session {sid!r} is not the conversation's last session")
            try:
                sessions.append(Session(session_id=sid, started_at=t.session_started_at or t.timestamp))
            except ValidationError as e:
                raise _invalid(cid, e, t.turn_id) from None
        try:
            sessions[-1].turns.append(Turn(turn_id=t.turn_id, role=t.role, speaker=t.speaker, content=t.content,
                                           timestamp=t.timestamp, meta=t.meta))
        except ValidationError as e:
            raise _invalid(cid, e, t.turn_id) from None
        new.append(t.turn_id)
    if not sessions:
        raise InvalidTurns(cid, "a new conversation needs at least one turn", field="turns")
    try:
        conv = Conversation(conversation_id=cid, user_id=user_id, sessions=sessions)
    except ValidationError as e:
        raise _invalid(cid, e, None) from None
    return conv, new, dups


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
    the caller does, see :func:`fold_if_due`). ``cache``: this process's :class:`StoredCache`
    (the stored conversation is then re-read by delta). Idempotent by turn id; serialised per
    conversation by its write lock (waiting at most ``lock_timeout_s``, default
    ``build.append_lock_timeout_s``). ``create`` defaults to ``build.append_create``. Raises the
    typed errors of :mod:`lychee_ray.build.append_types` (and
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
            previous = cache.data(marker.key) if cache is not None else None
            stored = await asyncio.to_thread(load_stored, writer.layout, marker, previous)
            if cache is not None and stored.data is not None:
                cache.put_data(marker.key, stored.data)
        conv, new, dups = merge_turns(stored, request, user)
        timings = {"lock": (t_lock - t0) * 1e3}
        inc = Increment(None, open_turn_ids=_open_turns(stored.segstate, stored.rows) if stored else [])
        if new or request.flush or (stored is not None and stored.segmented_turns < stored.num_turns):
            inc = await extend_conversation(stored, conv, ctx, finish=request.flush, ledger_start=len(ctx.ledger))
        timings["build"] = (time.perf_counter() - t_lock) * 1e3
        committed = None
        if inc.artifacts is not None:
            committed = await asyncio.to_thread(_commit_increment, writer, stored, inc, fold)
    timings["total"] = (time.perf_counter() - t0) * 1e3
    return AppendResult(
        conversation_id=cid, user_id=user, created=marker is None and committed is not None, stored_turn_ids=new,
        duplicate_turn_ids=dups, segments_encoded=inc.encoded, segments_failed=inc.failed,
        records_written=inc.records_written, records_removed=inc.records_removed, open_turn_ids=inc.open_turn_ids,
        generation=committed.generation if committed else None, committed_at=committed.committed_at if committed else None,
        rebuilt=inc.rebuilt, timings_ms={k: round(v, 3) for k, v in timings.items()},
    )


def _commit_increment(writer: MemoryStoreWriter, stored: StoredConversation | None, inc: Increment,
                      fold: bool) -> CommitMarker:
    """Commit an increment: a delta on top of the stored commit, or a full generation for a new
    conversation or one re-segmented from scratch (nothing of the old one carries over anyway)."""
    if stored is None or stored.data is None or inc.rebuilt is not None:
        return writer.commit(inc.artifacts, locked=True)
    marker = writer.commit_delta(artifacts_delta(stored.data, inc.artifacts), locked=True)
    if fold and writer.needs_fold(marker):
        marker = writer.fold(marker.conversation_id, locked=True) or marker
    return marker


def append_turns(root: str | Path, request: AppendRequest, ctx: BuildContext, **kwargs: Any) -> AppendResult:
    """:func:`append_turns_async` for synchronous callers (not from inside a running event loop;
    there, await the async variant or call this one through ``asyncio.to_thread``)."""
    return asyncio.run(append_turns_async(root, request, ctx, **kwargs))


__all__ = [
    "DEFAULT_SESSION_ID", "Increment", "append_turns", "append_turns_async", "async_write_lock", "extend_conversation",
    "make_append_context", "merge_turns", "rebuild_reason", "write_lock",
]
