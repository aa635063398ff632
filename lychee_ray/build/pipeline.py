"""Building one conversation's memory: embed → segment → encode (sequential) → nodes → vectors.

Plain Python/asyncio; the local runner and the Ray job both call :func:`build_conversation`.
Segments of one conversation are encoded in order because ρ_{k+1} needs d_k; many conversations
can be in flight at once (the caller decides how many).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Awaitable, Callable, Sequence

import numpy as np
import pyarrow as pa

from lychee_ray.config import LycheeConfig
from lychee_ray.build.encode.base import EncodeRequest, SegmentEncoder, SegmentTurn, finalise_records
from lychee_ray.llm.usage import UsageLedger
from lychee_ray.core.conversation import TURN_SCHEMA, Conversation
from lychee_ray.build.nodes import build_nodes
from lychee_ray.core.records import MemoryRecord, SegmentRow, segment_id
from lychee_ray.build.segment import Segment, segment_conversation, segment_turns, turn_embedding_text
from lychee_ray.io.store import ConversationArtifacts, ConversationData
from lychee_ray.text.time.normalise import make_resolver

log = logging.getLogger(__name__)

EmbedFn = Callable[[Sequence[str]], Awaitable[np.ndarray]]


def build_fingerprint(cfg: LycheeConfig, backend: str, model: str, embedder_name: str) -> str:
    """What decides a conversation's stored content: the config sections that shape it + models."""
    sections = cfg.fingerprint("segmenter", "encoder", "nodes", "tokenizer")
    return f"{sections}:{backend}:{model}:{embedder_name}"


@dataclass
class BuildContext:
    """Shared, long-lived pieces of a build (one per process or actor)."""

    cfg: LycheeConfig
    embed: EmbedFn
    embed_dim: int
    embedder_name: str
    encoder: SegmentEncoder
    ledger: UsageLedger = field(default_factory=UsageLedger)

    @property
    def fingerprint(self) -> str:
        return build_fingerprint(self.cfg, self.encoder.backend, self.encoder.model, self.embedder_name)


def encode_turns(conv: Conversation, seg: Segment) -> list[SegmentTurn]:
    """The segment's turns as the encoder sees them (local index, speaker, session date, text)."""
    out = []
    for i, rt in enumerate(segment_turns(conv, seg)):
        s = conv.sessions[rt.ref.session_index]
        out.append(
            SegmentTurn(
                index=i, turn_id=rt.turn.turn_id, session_id=s.session_id, session_date=rt.turn.timestamp or s.started_at,
                speaker=rt.turn.speaker, role=rt.turn.role, content=rt.text,
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
) -> tuple[list[SegmentRow], list[MemoryRecord]]:
    """Encode segments in order, carrying ρ (resolution state + last records) forward.

    ``previous`` maps segment ids to an earlier successful outcome that is reused as-is (the
    ``--retry-failed`` path); every other segment is encoded. A segment whose encoding fails is
    kept as ``failed`` with its error; its turns stay in the turn index.
    """
    cfg = ctx.cfg
    speakers = speakers_of(conv)
    # rules records already carry per-sentence times; searching their turns would smear one date
    search_turns = cfg.encoder.time_from_turns and ctx.encoder.backend != "rules"
    resolver = make_resolver(day_first=cfg.encoder.day_first, search_turns=search_turns)
    rows: list[SegmentRow] = []
    records: list[MemoryRecord] = []
    state = ""
    for seg in segments:
        sid = segment_id(conv.conversation_id, seg.segment_index)
        base = dict(
            conversation_id=conv.conversation_id, segment_id=sid, index=seg.segment_index,
            session_ids=[seg.session_id], turn_ids=seg.turn_ids, num_tokens=seg.tokens, close_reason=seg.reason,
            backend=ctx.encoder.backend, model=ctx.encoder.model,
        )
        reuse = (previous or {}).get(sid)
        if reuse is not None and reuse[0].status == "ok" and reuse[0].turn_ids == seg.turn_ids:
            row, recs = reuse
            rows.append(row)
            records.extend(recs)
            state = row.resolution_state or state
            continue
        request = EncodeRequest(
            conversation_id=conv.conversation_id, user_id=conv.user_id, segment_id=sid,
            segment_index=seg.segment_index, turns=encode_turns(conv, seg), speakers=speakers,
            prev_resolution_state=state,
            prev_records=[r.text for r in records[-cfg.encoder.context_records:]] if cfg.encoder.context_records else [],
        )
        error: str | None = None
        attempts = 0
        for _ in range(cfg.build.segment_attempts):
            try:
                result = await ctx.encoder.encode(request)
            except Exception as e:  # noqa: BLE001 — any failure is recorded on the segment, never lost
                attempts += getattr(e, "attempts", 1)
                error = f"{type(e).__name__}: {e}"
                continue
            attempts += result.attempts
            recs, problems = finalise_records(result.output, request, ctx.encoder.backend, result.model, resolver)
            if problems:
                log.debug("%s: %s", sid, "; ".join(problems))
            records.extend(recs)
            state = result.output.resolution_state or state
            rows.append(SegmentRow(**base, status="ok", attempts=attempts, num_records=len(recs), resolution_state=state))
            error = None
            break
        if error is not None:
            log.warning("segment %s failed after %d attempt(s): %s", sid, attempts, error)
            rows.append(SegmentRow(**base, status="failed", error=error, attempts=attempts, resolution_state=state))
    return rows, records


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


async def build_conversation(
    conv: Conversation,
    ctx: BuildContext,
    previous: ConversationData | None = None,
    turn_vectors: np.ndarray | None = None,
) -> ConversationArtifacts:
    """Build everything for one conversation (no I/O); ``previous`` enables reuse of ok segments."""
    t0 = time.perf_counter()
    cfg = ctx.cfg
    if turn_vectors is None:
        turn_vectors = await ctx.embed([turn_embedding_text(t, cfg.segmenter.max_turn_chars) for *_, t in conv.iter_turns()])
    seg = segment_conversation(conv, cfg=cfg.segmenter, turn_vectors=turn_vectors, encoding=cfg.tokenizer.encoding)
    t_seg = time.perf_counter()
    prev = previous_outcomes(previous) if previous is not None else None
    rows, records = await encode_segments(conv, seg.segments, ctx, prev)
    t_enc = time.perf_counter()
    turn_order = [t.turn_id for *_, t in conv.iter_turns()]
    nodes = build_nodes(records, turn_order, cfg.nodes)
    node_rows = [i for i, n in enumerate(nodes) if len(n.record_ids) >= cfg.nodes.min_records_to_embed]
    texts = [r.text for r in records] + [nodes[i].text for i in node_rows]
    vecs = await ctx.embed(texts) if texts else np.zeros((0, ctx.embed_dim), dtype=np.float32)
    turns = pa.Table.from_pylist(conv.turn_rows(), schema=TURN_SCHEMA)
    ledger = UsageLedger(u for u in ctx.ledger if u.conversation_id == conv.conversation_id)
    by_stage = {k: v.to_dict() for k, v in ledger.totals_by_stage().items()}
    return ConversationArtifacts(
        conversation_id=conv.conversation_id,
        user_id=conv.user_id,
        records=records,
        nodes=nodes,
        turns=turns,
        segments=rows,
        usage=ledger.to_table(),
        record_vectors=vecs[: len(records)],
        node_vectors=vecs[len(records):],
        node_vector_rows=node_rows,
        turn_vectors=np.asarray(turn_vectors, dtype=np.float32),
        fingerprint=ctx.fingerprint,
        extra={
            "backend": ctx.encoder.backend,
            "model": ctx.encoder.model,
            "embedder": ctx.embedder_name,
            "embedding_dim": ctx.embed_dim,
            "tokens": {k: {f: int(v[f]) for f in ("calls", "prompt_tokens", "completion_tokens", "cached_tokens")} for k, v in by_stage.items()},
            "timings_s": {"segment": round(t_seg - t0, 4), "encode": round(t_enc - t_seg, 4), "index": round(time.perf_counter() - t_enc, 4),
                          "llm_latency": round(sum(u.latency_s for u in ledger), 4)},
            "mean_turns_per_segment": round(conv.num_turns / max(1, len(seg.segments)), 3),
        },
    )

