"""One segment's encode call with the memory checks around it.

call → :class:`~lychee_ray.ingest.encode.guard.RecordGuard` → if the reply is degenerate, one call
in repair mode (``encoder.guard.repair_mode``) → still degenerate: the segment fails with
``degenerate_output`` (its turns stay searchable; ``--retry-failed`` re-encodes it). A reply cut at
the token limit is not tried again as a whole segment (the same prompt is cut the same way); its
complete records, when the encoder salvaged them, are checked like any reply and the segment carries
the encoder's :class:`~lychee_ray.ingest.encode.base.SalvageNote`. The kept drafts'
near-duplicates fold into one record with all their sources (:mod:`~lychee_ray.ingest.encode.dedup`,
``encoder.dedup``). Every draft of every call is accounted for in the segment's
:class:`~lychee_ray.core.quality.QualityCounts`.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field

from lychee_ray.ingest.encode.artifact_floor import ArtifactFloor
from lychee_ray.ingest.encode.base import (
    EncodeOutput,
    EncodeRequest,
    RecordDraft,
    SalvageNote,
    SegmentEncoder,
    finalise_records,
)
from lychee_ray.ingest.encode.salvage import TRUNCATED
from lychee_ray.ingest.encode.dedup import fold_near_duplicates
from lychee_ray.ingest.encode.guard import ConversationMemory, GuardedReply, RecordGuard
from lychee_ray.config import EncoderConfig
from lychee_ray.core.quality import DEGENERATE_OUTPUT, QualityCounts
from lychee_ray.core.records import MemoryRecord
from lychee_ray.names import RULES_BACKEND
from lychee_ray.text.time.normalise import TimeResolver

log = logging.getLogger(__name__)

# Failure kind of an encoder exception that carries none (LLMCallFailed carries its own).
ENCODE_ERROR = "encode_error"


@dataclass
class CheckedSegment:
    """Outcome of encoding one segment: records (empty when failed) and the accounting."""

    records: list[MemoryRecord]
    resolution_state: str
    attempts: int
    quality: QualityCounts
    error: str | None = None
    error_kind: str | None = None
    notes: list[str] = field(default_factory=list)
    # the drafts of the reply the records were made from (their slot links: ingest/supersede.py)
    drafts: list[RecordDraft] = field(default_factory=list)
    # the records come from a reply cut at the token limit (the segment is stored as salvaged)
    salvage: SalvageNote | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def _degenerate_message(reply: GuardedReply) -> str:
    r = reply.counts.rejected
    return (f"degenerate output: {reply.degenerate_rejections} of {reply.counts.drafts} drafted records rejected "
            f"(echo {r.get('echo', 0)}, ungrounded {r.get('ungrounded', 0)}, "
            f"invalid citation {r.get('invalid_citation', 0)})")


async def encode_checked(
    encoder: SegmentEncoder,
    request: EncodeRequest,
    guard: RecordGuard,
    memory: ConversationMemory,
    resolver: TimeResolver,
    cfg: EncoderConfig,
    segment_attempts: int,
) -> CheckedSegment:
    """Encode ``request`` (up to ``segment_attempts`` whole-segment tries on exceptions), check the
    reply, repair or fail a degenerate one, add the artifact records an LLM reply left out
    (:mod:`~lychee_ray.ingest.encode.artifact_floor`). ``memory`` is updated with the stored records."""
    quality = QualityCounts(segments_encoded=1)
    attempts = 0
    error, kind = "no encode attempt was made (build.segment_attempts = 0)", ENCODE_ERROR
    for _ in range(segment_attempts):
        try:
            result = await encoder.encode(request)
        except Exception as e:  # noqa: BLE001 — any failure is recorded on the segment, never lost
            attempts += getattr(e, "attempts", 1)
            error, kind = f"{type(e).__name__}: {e}", getattr(e, "kind", None) or ENCODE_ERROR
            if kind == TRUNCATED:  # cut at the token limit: a whole-segment retry would be cut the same way
                break
            continue
        attempts += result.attempts
        reply = guard.check(result.output, request, memory)
        quality.drafts += reply.counts.drafts
        for reason, n in reply.counts.rejected.items():
            quality.reject(reason, n)
        used = request
        repairs = cfg.guard.repair_attempts if getattr(encoder, "supports_repair", False) else 0
        repair_error = ""
        while reply.is_degenerate(cfg.guard.max_rejected_share) and repairs > 0:
            repairs -= 1
            retry = request.model_copy(update={"repair": cfg.guard.repair_mode, "avoid_texts": reply.rejected_texts})
            try:
                result = await encoder.encode(retry)
            except Exception as e:  # noqa: BLE001 — the repair call failed: the segment stays degenerate
                attempts += getattr(e, "attempts", 1)
                repair_error = f"; the repair call failed: {type(e).__name__}: {e}"
                break
            attempts += result.attempts
            quality.reject("replaced_by_repair", len(reply.output.records))
            quality.segments_repaired = 1
            used = retry
            reply = guard.check(result.output, used, memory)
            quality.drafts += reply.counts.drafts
            for reason, n in reply.counts.rejected.items():
                quality.reject(reason, n)
        if reply.is_degenerate(cfg.guard.max_rejected_share):
            quality.reject("degenerate_segment", len(reply.output.records))
            quality.segments_degenerate = 1
            quality.segments_repaired = 0
            return CheckedSegment([], request.prev_resolution_state, attempts, quality,
                                  _degenerate_message(reply) + repair_error, DEGENERATE_OUTPUT)
        output = reply.output
        if cfg.artifact_floor and encoder.backend != RULES_BACKEND:  # the rules backend writes them itself
            output, added = ArtifactFloor(cfg).fill(output, used)
            quality.drafts += added  # drafted by code: accounted like the reply's (drafts = records + rejected)
            quality.repair("artifacts_added", added)
        if cfg.dedup.enabled:
            drafts, folded = fold_near_duplicates(output.records, cfg.dedup.min_jaccard)
            quality.reject("merged_duplicate", folded)
            output = EncodeOutput(records=drafts, resolution_state=output.resolution_state)
        recs, problems = finalise_records(output, used, encoder.backend, result.model, resolver)
        if problems:
            log.debug("%s: %s", request.segment_id, "; ".join(problems))
        # a repair (e.g. a rewritten date) can make two drafts identical: finalise merges them
        quality.reject("duplicate_in_reply", len(output.records) - len(recs))
        for k, n in reply.counts.repaired.items():
            quality.repair(k, n)
        quality.records = len(recs)
        quality.segments_salvaged = int(result.salvage is not None)
        memory.accept(recs)
        return CheckedSegment(recs, output.resolution_state or request.prev_resolution_state, attempts, quality,
                              notes=problems, drafts=list(output.records), salvage=result.salvage)
    return CheckedSegment([], request.prev_resolution_state, attempts, quality, error, kind)


__all__ = ["CheckedSegment", "ENCODE_ERROR", "encode_checked"]
