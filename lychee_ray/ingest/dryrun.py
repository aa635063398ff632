"""``build --dry-run``: segment and count exact encode prompt tokens without any LLM call.

For each conversation it reports turns, segments (= encode calls) and the prompt tokens of every
encode call with the ``openai`` prompt template, next to the eager per-turn baseline (one call
per turn, same template) so the ratio is visible. The reference context ρ_k depends on earlier
LLM output, which a dry run does not have: ``prompt_tokens`` counts the calls with ρ empty, and
``prompt_tokens_max`` adds the full ρ budget to every call but the first (an upper bound). A system
prompt is one call per distinct text over the whole run (the build encodes it once per process:
ingest/encode/system_prompt.py); the eager baseline sends it once per conversation, as a message.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from collections.abc import Sequence

from lychee_ray.ingest.encode.base import EncodeRequest
from lychee_ray.ingest.encode.openai import build_messages
from lychee_ray.ingest.encode.system_prompt import prompt_key
from lychee_ray.ingest.pipeline import encode_turns, speakers_of
from lychee_ray.ingest.segment import Segment, TurnRef, segment_conversation, turn_embedding_text
from lychee_ray.config import LycheeConfig
from lychee_ray.core.conversation import Conversation
from lychee_ray.core.records import segment_id
from lychee_ray.embed import Embedder, get_embedder
from lychee_ray.io.adapters import read_input
from lychee_ray.text.tokens import count_message_tokens


def segment_request(conv: Conversation, seg: Segment, speakers: Sequence[str], *, prev_resolution_state: str = "",
                    prev_records: Sequence[str] = ()) -> EncodeRequest:
    """The encode request of one segment as the build pipeline makes it.

    Its turns come from :func:`~lychee_ray.ingest.pipeline.encode_turns` (the function the encoder's
    requests use), so a split or truncated turn contributes the segment's piece, not the whole turn.
    The eval's construction-cost estimate uses this too.
    """
    return EncodeRequest(
        conversation_id=conv.conversation_id, user_id=conv.user_id,
        segment_id=segment_id(conv.conversation_id, seg.segment_index), segment_index=seg.segment_index,
        kind="system_prompt" if seg.reason == "system_prompt" else "dialogue", turns=encode_turns(conv, seg), speakers=list(speakers),
        prev_resolution_state=prev_resolution_state,
        prev_records=list(prev_records),
    )


def encode_prompt_tokens(request: EncodeRequest, cfg: LycheeConfig) -> int:
    """Prompt tokens of the ``openai`` encoder's messages for ``request`` (the output schema not included)."""
    return count_message_tokens(build_messages(request, cfg.encoder, cfg.tokenizer), cfg.tokenizer.encoding)


def _prompt_tokens(conv: Conversation, segments: list[Segment], cfg: LycheeConfig,
                   seen_prompts: set[str] | None = None) -> list[int]:
    """Prompt tokens per encode call; with ``seen_prompts``, a system prompt already encoded in
    this run makes no call (it is left out)."""
    speakers = speakers_of(conv)
    out = []
    for seg in segments:
        request = segment_request(conv, seg, speakers)
        if seen_prompts is not None and request.kind == "system_prompt":
            key = prompt_key(request)
            if key in seen_prompts:
                continue
            seen_prompts.add(key)
        out.append(encode_prompt_tokens(request, cfg))
    return out


def _per_turn_segments(conv: Conversation) -> list[Segment]:
    segs = []
    for i, (si, s, ti, t) in enumerate(conv.iter_turns()):
        ref = TurnRef(session_index=si, turn_index=ti, turn_id=t.turn_id, session_id=s.session_id)
        segs.append(Segment(segment_index=i, session_index=si, session_id=s.session_id, turns=[ref], num_exchanges=1,
                            first_exchange=i, tokens=0, reason="end_of_stream"))
    return segs


def dry_run(cfg: LycheeConfig, fmt: str, input_path: str | Path, embedder: Embedder | None = None) -> dict[str, Any]:
    """Per-conversation and total encode-call counts and prompt tokens, lychee vs eager."""
    embedder = embedder or get_embedder(cfg.embedding, cfg.llm)
    rho = cfg.encoder.context_token_budget
    convs: dict[str, Any] = {}
    issues: list[str] = []
    seen_prompts: set[str] = set()
    for item in read_input(fmt, input_path):
        issues.extend(str(i) for i in item.issues if i.level == "error")
        conv = item.conversation
        if conv is None:
            continue
        vecs = embedder.encode([turn_embedding_text(t, cfg.segmenter.max_turn_chars) for *_, t in conv.iter_turns()])
        segs = segment_conversation(conv, cfg=cfg.segmenter, turn_vectors=vecs, encoding=cfg.tokenizer.encoding).segments
        lychee = _prompt_tokens(conv, segs, cfg, seen_prompts)
        eager = _prompt_tokens(conv, _per_turn_segments(conv), cfg)
        convs[conv.conversation_id] = {
            "turns": conv.num_turns,
            "segments": len(segs),
            "encode_calls": len(lychee),
            "mean_turns_per_segment": round(conv.num_turns / max(1, len(segs)), 3),
            "prompt_tokens": sum(lychee),
            "prompt_tokens_max": sum(lychee) + rho * max(0, len(lychee) - 1),
            "eager_calls": len(eager),
            "eager_prompt_tokens": sum(eager),
            "eager_prompt_tokens_max": sum(eager) + rho * max(0, len(eager) - 1),
            "calls_per_segment_prompt_tokens": lychee,
        }
    keys = ("turns", "segments", "encode_calls", "prompt_tokens", "prompt_tokens_max", "eager_calls", "eager_prompt_tokens",
            "eager_prompt_tokens_max")
    total = {k: sum(c[k] for c in convs.values()) for k in keys}
    n = max(1, len(convs))
    total.update(
        conversations=len(convs),
        mean_turns_per_segment=round(total["turns"] / max(1, total["segments"]), 3),
        prompt_tokens_per_conversation=round(total["prompt_tokens"] / n, 1),
        prompt_tokens_max_per_conversation=round(total["prompt_tokens_max"] / n, 1),
        eager_prompt_tokens_per_conversation=round(total["eager_prompt_tokens"] / n, 1),
        eager_over_lychee_prompt_tokens=round(total["eager_prompt_tokens"] / max(1, total["prompt_tokens"]), 3),
        eager_over_lychee_prompt_tokens_max=round(total["eager_prompt_tokens_max"] / max(1, total["prompt_tokens_max"]), 3),
        rho_budget_tokens=rho,
    )
    return {"conversations": convs, "total": total, "input_errors": issues}
