"""Construct an increment: the next generation of a stored conversation from its new turns —
the construct step of every write that continues a conversation (docs/incremental.md).

One core, :func:`construct_increment`, serves every such write:

* a build run's ``increment`` route (ingest/construct.py): an input conversation whose stored turns
  open it unchanged gains its new turns; the end of the input closes the tail;
* an append (inline, or the catch-up of queued ones: :mod:`lychee_ray.ingest.append.service`):
  turns arrive by id, duplicates are idempotent, the open tail segment stays open unless ``flush``.

The segmenter continues from the resume point saved with the last generation (its state before
the end of the input closed the tail); segments that only the end of the input closed are
*provisional* and are re-opened, re-segmented and (unless their turns and context are unchanged)
re-encoded. ρ continues from the stored segments and records. So k increments give the same
segments and record ids as one build (rules backend), and every write is one new generation,
committed by the commit step (ingest/commit.py).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lychee_ray.ingest.increment.stored import StoredConversation
from lychee_ray.ingest.increment.tail import delta_increment, tail_start
from lychee_ray.ingest.pipeline import (
    BuildContext,
    PendingArtifacts,
    PriorContext,
    assemble_pending,
    encode_segments,
    make_segstate,
    segments_quality,
    speakers_of,
    usage_tokens,
)
from lychee_ray.ingest.resume_point import ResumePoint
from lychee_ray.ingest.segment import conversation_turn_inputs, resolve_exchange_mode, segment_stream, turn_embedding_text
from lychee_ray.core.conversation import Conversation
from lychee_ray.core.records import STORED_SEGMENT_STATUSES, MemoryRecord, SegmentRow, segment_id
from lychee_ray.io.store.artifacts import ConversationArtifacts, ConversationDelta
from lychee_ray.io.store.marker import LastIncrement
from lychee_ray.llm.usage import UsageLedger
from lychee_ray.names import AUTO, ROLE_MODE


@dataclass
class Increment:
    """What :func:`construct_increment` made; ``artifacts`` None = nothing to commit (or, with
    ``pending``, not complete yet: its record and node vectors are embedded elsewhere)."""

    artifacts: ConversationArtifacts | None
    new_turn_ids: list[str] = field(default_factory=list)
    encoded: list[str] = field(default_factory=list)
    failed: list[str] = field(default_factory=list)
    records_written: int = 0
    records_removed: int = 0
    open_turn_ids: list[str] = field(default_factory=list)
    rebuilt: str | None = None
    tokens: dict[str, dict[str, int]] = field(default_factory=dict)
    quality: dict[str, Any] = field(default_factory=dict)  # memory checks of the segments encoded now
    # the same written as a delta straight from what changed (increment/tail.py), with the
    # state the next increment starts from; then ``artifacts`` is None
    delta: ConversationDelta | None = None
    next_state: StoredConversation | None = None
    # the whole generation up to its record and node vectors (``construct_increment(..., pending=True)``)
    pending: PendingArtifacts | None = None

    @property
    def changed(self) -> bool:
        """True when there is something to commit."""
        return self.artifacts is not None or self.delta is not None or self.pending is not None


def rebuild_reason(stored: StoredConversation | None, conv: Conversation, ctx: BuildContext,
                   speakers: list[str] | None = None) -> tuple[str | None, bool]:
    """(why the stored segmentation cannot simply be continued, whether stored encodings may still be
    reused) — None when it can. Each reason is a case where continuing would differ from one build
    of the whole conversation (docs/incremental.md)."""
    if stored is None:
        return None, False
    if stored.marker.fingerprint != ctx.fingerprint:
        return "config_changed", False  # other segmenter/encoder settings or models: nothing carries over
    resume = stored.segstate
    stored_speakers = resume.speakers if resume is not None else speakers_of(stored.conversation())
    if (speakers if speakers is not None else speakers_of(conv)) != stored_speakers:
        return "new_speaker", False  # every encode request lists the conversation's speakers
    if resume is None or not resume.current or resume.num_turns != stored.segmented_turns:
        return "no_segmenter_state", True
    if resume.segmenter_config != ctx.cfg.segmenter:
        return "segmenter_config", True
    if ctx.cfg.segmenter.exchange_mode == AUTO and resume.segmenter_mode != ROLE_MODE and \
            resolve_exchange_mode(AUTO, (t.role for *_, t in conv.iter_turns_from(resume.num_turns)),
                                  ctx.cfg.segmenter.auto_without_roles) \
            != resume.segmenter_mode:
        # e.g. the first assistant turn: one build would use role mode throughout. ("role" is
        # resolved from any answering turn, so it stays; the saved mode covers the first
        # ``num_turns`` turns, so only the later ones can change it.)
        return "exchange_mode", True
    return None, True


def conversation_speakers(stored: StoredConversation | None, conv: Conversation) -> list[str]:
    """:func:`speakers_of` ``conv``, from the saved resume point's speakers (those of its first
    ``num_turns`` turns, in order) and the turns after them when the stored conversation has one."""
    resume = stored.segstate if stored is not None else None
    if resume is None or resume.speakers is None or resume.num_turns > conv.num_turns:
        return speakers_of(conv)
    later = (t.speaker for *_, t in conv.iter_turns_from(resume.num_turns))
    return list(dict.fromkeys([*resume.speakers, *later]))


async def construct_increment(
    stored: StoredConversation | None, conv: Conversation, ctx: BuildContext, *, finish: bool, ledger_start: int = 0,
    allow_delta: bool = False, new_turn_vectors: np.ndarray | None = None, pending: bool = False,
) -> Increment:
    """The next generation of a conversation whose first ``stored.num_turns`` turns are ``stored``'s.

    ``finish``: the input ends here (a build, or an append with ``flush``): the open tail segment is
    closed and encoded (provisionally: the next increment re-opens it). ``ledger_start``: entries of
    ``ctx.ledger`` before this index belong to earlier work (the increment's tokens are the rest).
    ``allow_delta``: when only the tail changed, return the increment as a delta built from it
    (increment/tail.py: ``Increment.delta``, no artifacts) rather than whole artifacts.
    ``new_turn_vectors``: the vectors of the turns after the stored ones, embedded already (a build
    run's turn embedding stage), else embedded here. ``pending``: leave the record and node vectors
    to the caller (``Increment.pending``; never a delta) rather than embedding them here.
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
    if new_turn_vectors is not None and not fresh:
        if len(new_turn_vectors) != len(todo):
            raise ValueError(f"{len(new_turn_vectors)} turn vectors for {len(todo)} new turns")
        vecs = new_turn_vectors
    else:
        vecs = await ctx.embed([turn_embedding_text(t, max_chars) for *_, t in todo]) if todo else \
            np.zeros((0, ctx.embed_dim), dtype=np.float32)
    all_vecs = vecs if fresh or stored is None else np.concatenate([stored.turn_vectors, np.asarray(vecs, dtype=np.float32)])
    rows: list[SegmentRow] = [] if stored is None else stored.rows
    stored_records: list[MemoryRecord] = [] if stored is None else stored.records
    if stored is not None and reason is None:
        resume = stored.segstate
        assert resume is not None  # reason is None: a current resume point
        provisional = set(resume.provisional)
        final = [r for r in rows if r.segment_id not in provisional]
        replaceable = [r for r in rows if r.segment_id in provisional]
        inputs = conversation_turn_inputs(conv, all_vecs[n:], enc, max_chars, start=n)
        stream = segment_stream(inputs, cfg.segmenter, state=resume.segmenter, encoding=enc, finish=finish)
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
    keep = tail_start(stored, final_ids) if allow_delta and not pending and stored is not None and reason is None \
        else None
    replaced_records: dict[str, list[MemoryRecord]] = {}  # the replaceable segments' stored records
    for rec in (stored_records[keep:] if keep is not None else stored_records if replaceable else []):
        if rec.segment_id in old:
            replaced_records.setdefault(rec.segment_id, []).append(rec)
    reuse: dict[str, tuple[SegmentRow, list]] = {}
    for s, sid in zip(segs, ids, strict=False):  # only an unbroken prefix: a segment's ρ depends on all before it
        r = old.get(sid)
        if not reuse_ok or r is None or r.status not in STORED_SEGMENT_STATUSES or r.turn_ids != s.turn_ids:
            break
        reuse[sid] = (r, sorted(replaced_records.get(sid, []), key=lambda x: x.ordinal))
    provisional_ids = [segment_id(cid, s.segment_index) for s in stream.tail] + [r.segment_id for r in survivors]
    kept_state = stored.segstate if stored is not None else None
    unchanged = (not new_turns and n == n_stored and reason is None and len(reuse) == len(segs)
                 and all(old[i].close_reason == s.reason for i, s in zip(ids, segs, strict=False))
                 and kept_state is not None and set(provisional_ids) == set(kept_state.provisional))
    if unchanged and kept_state is not None:  # (unchanged implies a kept state)
        return Increment(None, open_turn_ids=open_turns(kept_state, rows))
    prior = PriorContext(final[-1].resolution_state if final else "",
                         stored_records[:keep] if keep is not None else
                         stored.records_of(final_ids) if stored is not None else [],
                         context_segments={r.segment_id for r in final if r.close_reason == "system_prompt"})
    if keep is not None and stored is not None:  # kept between appends (increment/cache.py); (keep implies stored)
        prior.memory = stored.final_memory(prior.records)
        prior.slots = stored.final_slots(prior.records, conv, cfg.encoder.currency)
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
    if keep is not None and stored is not None:  # only the tail changed: write just that (keep implies stored)
        d = await delta_increment(stored, conv, ctx, keep=keep, records=records, all_rows=all_rows, final_ids=final_ids,
                                  new_vectors=np.asarray(vecs, dtype=np.float32), all_vectors=all_vecs,
                                  segstate=segstate, mine=mine, timings=timings, last_increment=last)
        return Increment(
            None, new_turn_ids=[t.turn_id for t in new_turns], encoded=encoded,
            failed=[r.segment_id for r in enc_rows if r.segment_id in encoded and r.status == "failed"],
            records_written=d.records_written, records_removed=d.records_removed,
            # open turns can only be covered by the tail, or by the last final segment (a long turn
            # split across segments)
            open_turn_ids=open_turns(segstate, final[-1:] + [r for r in all_rows if r.segment_id not in final_ids]),
            rebuilt=None, tokens=usage_tokens(mine),
            quality=segments_quality([r for r in enc_rows if r.segment_id in encoded]).report(),
            delta=d.delta, next_state=d.next_state)
    made = assemble_pending(
        conv, ctx, all_rows, records, all_vecs, segstate=segstate, usage=usage,
        tokens=usage_tokens(UsageLedger.from_table(usage)), timings=timings,
        known=None if fresh or stored is None else stored.known, last_increment=last,
    )
    art = None
    if not pending:
        texts = made.plan.texts
        art = made.complete(await ctx.memory_embed(texts) if texts else np.zeros((0, ctx.embed_dim), dtype=np.float32))
    before = {r.record_id for r in stored.records} if stored is not None else set()
    after = {r.record_id for r in records}
    return Increment(
        art, pending=made if pending else None, new_turn_ids=[t.turn_id for t in new_turns], encoded=encoded,
        failed=[r.segment_id for r in enc_rows if r.segment_id in encoded and r.status == "failed"],
        records_written=len(after - before), records_removed=len(before - after),
        open_turn_ids=open_turns(segstate, all_rows), rebuilt=reason, tokens=usage_tokens(mine),
        quality=segments_quality([r for r in enc_rows if r.segment_id in encoded]).report(),
    )


def open_turns(segstate: ResumePoint | None, rows: list[SegmentRow]) -> list[str]:
    """Turns of the open tail that no stored segment covers yet (not encoded: raw turns only)."""
    covered = {t for r in rows for t in r.turn_ids}
    return [t for t in (segstate.open_turn_ids if segstate is not None else []) if t not in covered]


__all__ = ["Increment", "conversation_speakers", "construct_increment", "open_turns", "rebuild_reason"]
