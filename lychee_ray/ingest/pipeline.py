"""Building one conversation's memory whole: embed → segment → encode (sequential) → nodes → vectors.

Plain Python/asyncio. The construct step (ingest/construct.py) calls :func:`build_pending` for a
conversation routed ``build`` (its turn vectors embedded before, its record and node vectors
after, each for many conversations at once); :func:`build_conversation` does all of it in one
call. Segments of one conversation are encoded in order because ρ_{k+1} needs d_k; many
conversations can be in flight at once (the caller decides how many).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Any
from collections.abc import Awaitable, Callable, Sequence

import numpy as np
import pyarrow as pa

from lychee_ray.config import LycheeConfig
from lychee_ray.ingest.encode.base import EncodeRequest, SegmentEncoder, SegmentTurn
from lychee_ray.ingest.encode.checked import encode_checked
from lychee_ray.ingest.encode.factory import make_encoder
from lychee_ray.embed.base import embedder_name
from lychee_ray.ingest.encode.guard import ConversationMemory, RecordGuard
from lychee_ray.llm.usage import UsageLedger
from lychee_ray.core.conversation import TURN_SCHEMA, Conversation
from lychee_ray.ingest.nodes import build_nodes
from lychee_ray.ingest.resume_point import SEGSTATE_VERSION, ResumePoint
from lychee_ray.ingest.passages import conversation_passages
from lychee_ray.ingest.supersede import SlotState
from lychee_ray.ingest.vectors import PassageKey, VectorPlan, plan_vectors
from lychee_ray.core.passages import passages_table
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import STORED_SEGMENT_STATUSES, MemoryRecord, SegmentRow, segment_id
from lychee_ray.core.turn_identity import turns_digest
from lychee_ray.ingest.segment import (
    Segment,
    conversation_turn_inputs,
    open_turn_refs,
    segment_stream,
    segment_turns,
    turn_embedding_text,
)
from lychee_ray.io.store import ConversationArtifacts, ConversationData
from lychee_ray.io.store.marker import BuildInfo, LastIncrement
from lychee_ray.text.time.normalise import make_resolver
from lychee_ray.names import ENCODE_STAGE, RULES_BACKEND, SEGMENT_STAGE, BuildStageName, LLMBackend

log = logging.getLogger(__name__)

EmbedFn = Callable[[Sequence[str]], Awaitable[np.ndarray]]
# ``(stage, turns)``: that many more of the conversation's turns passed the stage (the run's progress)
OnTurns = Callable[[BuildStageName, int], None]


def build_fingerprint(cfg: LycheeConfig, backend: str, model: str, embedder_name: str) -> str:
    """What decides a conversation's stored content: the config keys declared to shape it + models."""
    sections = cfg.store_fingerprint()
    return f"{sections}:{backend}:{model}:{embedder_name}"


def planned_fingerprint(cfg: LycheeConfig, backend: LLMBackend) -> str:
    """The fingerprint a build context of ``backend`` will have, without loading its models."""
    return build_fingerprint(cfg, backend, make_encoder(cfg, backend).model, embedder_name(cfg.embedding))


@dataclass
class BuildContext:
    """Shared, long-lived pieces of a build (one per process or actor)."""

    cfg: LycheeConfig
    embed: EmbedFn
    embed_dim: int
    embedder_name: str
    encoder: SegmentEncoder
    ledger: UsageLedger = field(default_factory=UsageLedger)
    # record and node texts (``embedding.memory_quantization``); None = ``embed``, as turns
    embed_memory: EmbedFn | None = None
    # the subject phrases of stated values (ingest/value_slots.py), while encoding; None = ``memory_embed``
    embed_subjects: EmbedFn | None = None

    @property
    def memory_embed(self) -> EmbedFn:
        """The embedding function for record and node texts."""
        return self.embed_memory or self.embed

    @property
    def subject_embed(self) -> EmbedFn:
        """The embedding function for the subject phrases of stated values (the record model)."""
        return self.embed_subjects or self.memory_embed

    @property
    def fingerprint(self) -> str:
        return build_fingerprint(self.cfg, self.encoder.backend, self.encoder.model, self.embedder_name)


@dataclass
class PriorContext:
    """Where encoding continues when earlier segments are already stored (increments):
    the resolution state d after the last of them and their records, in order. ρ and the record
    guard's memory start from here exactly as if those segments had just been encoded."""

    resolution_state: str = ""
    records: list[MemoryRecord] = field(default_factory=list)
    # the guard's memory of exactly ``records``, when the caller keeps one (copied, not changed)
    memory: ConversationMemory | None = None
    # the slots' current records and what people said after exactly ``records``, when the caller
    # keeps them (copied, not changed)
    slots: SlotState | None = None
    # ids of the stored segments that are system prompts (their records are no reference context)
    context_segments: set[str] = field(default_factory=set)


def encode_turns(conv: Conversation, seg: Segment) -> list[SegmentTurn]:
    """The segment's turns as the encoder sees them (local index, speaker, session date, text)."""
    out = []
    for i, rt in enumerate(segment_turns(conv, seg)):
        s = conv.sessions[rt.ref.session_index]
        out.append(
            SegmentTurn(
                index=i, turn_id=rt.turn.turn_id, session_id=s.session_id, session_date=rt.turn.timestamp or s.started_at,
                speaker=rt.turn.speaker, role=rt.turn.role, content=rt.text, tool_calls=rt.turn.tool_calls,
                tool_call_id=rt.turn.tool_call_id, tool_name=rt.turn.tool_name,
                is_error=rt.turn.meta.get("is_error") is True,
            )
        )
    return out


def speakers_of(conv: Conversation) -> list[str]:
    """Distinct speakers in order of first appearance."""
    return list(dict.fromkeys(t.speaker for *_, t in conv.iter_turns()))


async def encode_segments(
    conv: Conversation,
    segments: list[Segment],
    ctx: BuildContext,
    previous: dict[str, tuple[SegmentRow, list[MemoryRecord]]] | None = None,
    prior: PriorContext | None = None,
    speakers: list[str] | None = None,
    on_turns: OnTurns | None = None,
) -> tuple[list[SegmentRow], list[MemoryRecord]]:
    """Encode segments in order, carrying ρ (resolution state + last records) forward.

    ``previous`` maps segment ids to an earlier successful outcome that is reused as-is (the
    ``--retry-failed`` path); every other segment is encoded. A segment whose encoding fails is
    kept as ``failed`` with its error; its turns stay in the turn index. ``on_turns`` hears of each
    segment's turns as the segment is done (stage ``encode``).
    """
    cfg = ctx.cfg
    speakers = speakers if speakers is not None else speakers_of(conv)  # (the caller may know them already)
    # rules records already carry per-sentence times; searching their turns would smear one date
    search_turns = cfg.encoder.time_from_turns and ctx.encoder.backend != RULES_BACKEND
    resolver = make_resolver(day_first=cfg.encoder.day_first, search_turns=search_turns)
    # The checks judge model output. The rules encoder's records are extracted from the turns
    # themselves; on it only the structural checks and the accounting run, so rules stores stay
    # exactly what they were (the entity fill would otherwise add names its extractor skipped).
    gcfg = cfg.encoder.guard if ctx.encoder.backend != RULES_BACKEND else cfg.encoder.guard.model_copy(update={"enabled": False})
    guard = RecordGuard(gcfg, day_first=cfg.encoder.day_first)
    rows: list[SegmentRow] = []
    records: list[MemoryRecord] = list(prior.records) if prior else []  # returned too: callers slice them off
    state = prior.resolution_state if prior else ""
    # a system prompt's rules are context for the conversation, not what the next segment continues:
    # they stay out of rho (and its resolution state carries over unchanged)
    context_ids = set(prior.context_segments) if prior else set()
    context_ids |= {segment_id(conv.conversation_id, s.segment_index) for s in segments if s.reason == "system_prompt"}
    if prior is not None and prior.memory is not None:
        memory = prior.memory.copy()
    else:
        memory = ConversationMemory()
        memory.accept(records)  # an increment continues after the stored segments (docs/incremental.md)
    # the current record of each slot where the stored segments left it, and what people said
    # (for links from text cues)
    if prior is not None and prior.slots is not None:
        slots = prior.slots.copy()
        slots.hear(conv)  # the speakers of the turns after the kept state's
    else:
        slots = SlotState.after(records, conv, cfg.encoder.currency)
    for seg in segments:
        sid = segment_id(conv.conversation_id, seg.segment_index)
        # the fields every row of this segment shares (values of several types: SegmentRow checks them)
        base: dict[str, Any] = dict(
            conversation_id=conv.conversation_id, segment_id=sid, index=seg.segment_index,
            session_ids=[seg.session_id], turn_ids=seg.turn_ids, num_tokens=seg.tokens, close_reason=seg.reason,
            backend=ctx.encoder.backend, model=ctx.encoder.model,
        )
        reuse = (previous or {}).get(sid)
        if reuse is not None and reuse[0].status in STORED_SEGMENT_STATUSES and reuse[0].turn_ids == seg.turn_ids:
            row, recs = reuse
            rows.append(row)
            records.extend(recs)
            memory.accept(recs)
            slots.absorb(recs)
            state = row.resolution_state or state
            if on_turns is not None:
                on_turns(ENCODE_STAGE, len(seg.turn_ids))
            continue
        turns = encode_turns(conv, seg)
        request = EncodeRequest(
            conversation_id=conv.conversation_id, user_id=conv.user_id, segment_id=sid,
            segment_index=seg.segment_index, kind="system_prompt" if seg.reason == "system_prompt" else "dialogue",
            turns=turns, speakers=speakers,
            prev_resolution_state=state,
            prev_records=_reference_records(records, context_ids, cfg.encoder.context_records),
            candidates=slots.candidates(turns, cfg.encoder.currency) if ctx.encoder.backend != RULES_BACKEND else [],
        )
        done = await encode_checked(ctx.encoder, request, guard, memory, resolver, cfg.encoder, cfg.build.segment_attempts)
        if done.ok:
            await slots.prepare(done.records, ctx.subject_embed)
            slots.link(done.records, done.drafts, request, ctx.encoder.backend, done.quality)
            records.extend(done.records)
            if request.kind == "dialogue":
                state = done.resolution_state
            cut = done.salvage
            if cut is not None:
                log.warning("segment %s %s", sid, cut.message)
            rows.append(SegmentRow(**base, status="ok" if cut is None else "salvaged", attempts=done.attempts,
                                   num_records=len(done.records), resolution_state=state,
                                   error=None if cut is None else cut.message,
                                   error_kind=None if cut is None else cut.kind, quality=done.quality.to_flat()))
        else:
            log.warning("segment %s failed after %d attempt(s): %s", sid, done.attempts, done.error)
            rows.append(SegmentRow(**base, status="failed", error=done.error, error_kind=done.error_kind,
                                   attempts=done.attempts, resolution_state=state, quality=done.quality.to_flat()))
        if on_turns is not None:
            on_turns(ENCODE_STAGE, len(seg.turn_ids))
    return rows, records


def _reference_records(records: list[MemoryRecord], context_ids: set[str], m: int) -> list[str]:
    """Texts of the last ``m`` records outside system-prompt segments (rho_k's records)."""
    if m <= 0:
        return []
    out: list[str] = []
    for r in reversed(records):
        if r.segment_id not in context_ids:
            out.append(r.text)
            if len(out) == m:
                break
    return out[::-1]


def segments_quality(rows: list[SegmentRow]) -> QualityCounts:
    """A conversation's memory-quality counts: the sum of its segments'."""
    total = QualityCounts()
    for r in rows:
        total.add(QualityCounts.from_flat(r.quality))
    return total


def previous_outcomes(data: ConversationData) -> dict[str, tuple[SegmentRow, list[MemoryRecord]]]:
    """Earlier segment rows and their records, keyed by segment id (for ``--retry-failed``)."""
    recs: dict[str, list[MemoryRecord]] = {}
    for row in data.records.to_pylist():
        r = MemoryRecord.from_row(row)
        recs.setdefault(r.segment_id, []).append(r)
    out = {}
    for row in data.segments.to_pylist():
        s = SegmentRow.model_validate(row)
        out[s.segment_id] = (s, sorted(recs.get(s.segment_id, []), key=lambda r: r.ordinal))
    return out


def make_segstate(conv: Conversation, state: dict[str, Any], provisional: list[str],
                  speakers: list[str] | None = None) -> ResumePoint:
    """What is saved with a generation so the next increment continues the segmenter (docs/incremental.md).

    ``state``: the segmenter before the end of the input; ``provisional``: ids of the stored segments
    that the end of the input closed (re-opened by the next increment); the turns the state holds
    undecided and the speakers (default: ``conv``'s) are saved with them (:class:`ResumePoint`).
    """
    return ResumePoint(
        version=SEGSTATE_VERSION, segmenter=state, provisional=list(provisional), num_turns=conv.num_turns,
        open_turn_ids=list(dict.fromkeys(r.turn_id for r in open_turn_refs(state))),
        speakers=speakers if speakers is not None else speakers_of(conv),
    )


def usage_tokens(ledger: UsageLedger) -> dict[str, dict[str, int]]:
    """Per-stage token totals of a ledger, as the commit marker stores them."""
    by_stage = {k: v.to_dict() for k, v in ledger.totals_by_stage().items()}
    return {k: {f: int(v[f]) for f in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens")} for k, v in by_stage.items()}


@dataclass
class KnownVectors:
    """Vectors already stored (an increment reuses them instead of embedding again):
    records by id (the id fixes the text), nodes by (id, text) (a node's text grows with its records)."""

    records: dict[str, np.ndarray] = field(default_factory=dict)
    nodes: dict[tuple[str, str], np.ndarray] = field(default_factory=dict)
    passages: dict[PassageKey, np.ndarray] = field(default_factory=dict)  # by id and span


@dataclass
class PendingArtifacts:
    """A conversation built up to its record and node vectors: ``plan`` says which texts to embed;
    :meth:`complete` takes their vectors (the staged build embeds many conversations' at once)."""

    artifacts: ConversationArtifacts
    plan: VectorPlan

    def complete(self, fresh: np.ndarray) -> ConversationArtifacts:
        """The artifacts with the vectors of ``plan.texts`` (in order) and the known ones."""
        dim = self.artifacts.info.embedding_dim
        if dim is None:  # always set by a build (None only in old markers); the error reshape(-1, None) raised
            raise TypeError("the artifacts carry no embedding dimension")
        vecs = self.plan.vectors(fresh, dim)
        n_rec, n_node = self.plan.num_records, self.plan.num_nodes
        self.artifacts.record_vectors = vecs[:n_rec]
        self.artifacts.node_vectors = vecs[n_rec:n_rec + n_node]
        self.artifacts.passage_vectors = vecs[n_rec + n_node:]
        return self.artifacts


def assemble_pending(
    conv: Conversation,
    ctx: BuildContext,
    rows: list[SegmentRow],
    records: list[MemoryRecord],
    turn_vectors: np.ndarray,
    *,
    segstate: ResumePoint | None,
    usage: pa.Table,
    tokens: dict[str, dict[str, int]],
    timings: dict[str, float],
    known: KnownVectors | None = None,
    last_increment: LastIncrement | None = None,
) -> PendingArtifacts:
    """Nodes (rebuilt from all records) and the commit marker's fields around a conversation's
    segment rows and records; the record and node vectors are left to :meth:`PendingArtifacts.complete`
    (embedding only what ``known`` lacks)."""
    t0 = time.perf_counter()
    cfg = ctx.cfg
    known = known or KnownVectors()
    turn_order = [t.turn_id for *_, t in conv.iter_turns()]
    nodes = build_nodes(records, turn_order, cfg.nodes)
    passages = conversation_passages(conv, cfg.passages, cfg.tokenizer.encoding)
    plan = plan_vectors(records, nodes, cfg.nodes.min_records_to_embed, known.records, known.nodes, passages,
                        known.passages)
    turns = pa.Table.from_pylist(conv.turn_rows(), schema=TURN_SCHEMA)
    empty = np.zeros((0, ctx.embed_dim), dtype=np.float32)
    art = ConversationArtifacts(
        conversation_id=conv.conversation_id,
        user_id=conv.user_id,
        records=records,
        nodes=nodes,
        turns=turns,
        segments=rows,
        usage=usage,
        record_vectors=empty,
        node_vectors=empty,
        node_vector_rows=plan.node_rows,
        turn_vectors=np.asarray(turn_vectors, dtype=np.float32),
        passages=passages_table(passages),
        fingerprint=ctx.fingerprint,
        segstate=segstate.to_dict() if segstate is not None else None,
        info=BuildInfo(
            backend=ctx.encoder.backend,
            model=ctx.encoder.model,
            embedder=ctx.embedder_name,
            embedding_dim=ctx.embed_dim,
            tokens=tokens,
            timings_s={**timings, "index": round(time.perf_counter() - t0, 4)},
            mean_turns_per_segment=round(conv.num_turns / max(1, len(rows)), 3),
            quality=segments_quality(rows).report(),
            turns_digest=turns_digest(turns),
            last_increment=last_increment,
        ),
    )
    return PendingArtifacts(art, plan)


async def build_pending(
    conv: Conversation,
    ctx: BuildContext,
    previous: ConversationData | None = None,
    turn_vectors: np.ndarray | None = None,
    on_turns: OnTurns | None = None,
) -> PendingArtifacts:
    """Build one conversation (no I/O) up to its record and node vectors; ``previous`` enables reuse of ok segments;
    ``on_turns`` hears of turns as they are segmented and encoded."""
    t0 = time.perf_counter()
    cfg = ctx.cfg
    if turn_vectors is None:
        turn_vectors = await ctx.embed([turn_embedding_text(t, cfg.segmenter.max_turn_chars) for *_, t in conv.iter_turns()])
    inputs = conversation_turn_inputs(conv, turn_vectors, cfg.tokenizer.encoding, cfg.segmenter.max_turn_chars)
    seg = segment_stream(inputs, cfg.segmenter, encoding=cfg.tokenizer.encoding)
    t_seg = time.perf_counter()
    if on_turns is not None:
        on_turns(SEGMENT_STAGE, conv.num_turns)
    prev = previous_outcomes(previous) if previous is not None else None
    rows, records = await encode_segments(conv, seg.segments, ctx, prev, on_turns=on_turns)
    t_enc = time.perf_counter()
    ledger = ctx.ledger.of_conversation(conv.conversation_id)
    tail = [segment_id(conv.conversation_id, s.segment_index) for s in seg.tail]
    return assemble_pending(
        conv, ctx, rows, records, turn_vectors, segstate=make_segstate(conv, seg.state, tail), usage=ledger.to_table(),
        tokens=usage_tokens(ledger),
        timings={"segment": round(t_seg - t0, 4), "encode": round(t_enc - t_seg, 4),
                 "llm_latency": round(sum(u.latency_s for u in ledger), 4)},
    )


async def build_conversation(
    conv: Conversation,
    ctx: BuildContext,
    previous: ConversationData | None = None,
    turn_vectors: np.ndarray | None = None,
) -> ConversationArtifacts:
    """Build everything for one conversation (no I/O); ``previous`` enables reuse of ok segments."""
    pending = await build_pending(conv, ctx, previous, turn_vectors)
    texts = pending.plan.texts
    return pending.complete(await ctx.memory_embed(texts) if texts else np.zeros((0, ctx.embed_dim), dtype=np.float32))
