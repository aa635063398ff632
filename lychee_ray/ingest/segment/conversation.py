"""Segmenting whole conversations: turn vectors, turn inputs, results and segment resolution."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from lychee_ray.ingest.segment.exchanges import resolve_exchange_mode
from lychee_ray.ingest.segment.base import BaseSegmenter
from lychee_ray.ingest.segment.online import make_segmenter
from lychee_ray.ingest.segment.types import (
    Decision,
    Segment,
    TurnInput,
    TurnRef,
)
from lychee_ray.names import ExchangeMode
from lychee_ray.config import SegmenterConfig
from lychee_ray.core.conversation import Conversation, Turn
from lychee_ray.text.tokens import DEFAULT_ENCODING, count_tokens


def segment_turn_inputs(
    turns: Sequence[TurnInput],
    cfg: SegmenterConfig | None = None,
    *,
    mode: ExchangeMode | None = None,
    encoding: str = DEFAULT_ENCODING,
) -> tuple[list[Segment], list[Decision]]:
    """Segment a finished turn sequence; ``auto`` mode is resolved on the whole sequence."""
    cfg = cfg or SegmenterConfig.model_validate({})  # every key at its default
    if mode is None:
        mode = resolve_exchange_mode(cfg.exchange_mode, (t.role for t in turns), cfg.auto_without_roles)
    seg = make_segmenter(cfg, mode=mode, encoding=encoding)
    out = seg.push_turns(turns)
    out.extend(seg.finish())
    return out, seg.decisions



def turn_embedding_text(turn: Turn, max_chars: int = 0) -> str:
    """The text embedded for a turn (segmenter and raw-turn index share it): its text (content and
    tool calls, :attr:`Turn.text`), or its first ``max_chars`` characters (``segmenter.max_turn_chars``; 0 = all)."""
    text = turn.text
    return text[:max_chars] if max_chars and len(text) > max_chars else text


def embed_turns(conv: Conversation, embedder: Any, max_chars: int = 0) -> np.ndarray:
    """One batched ``embedder.encode`` call over every turn, in :meth:`Conversation.iter_turns` order."""
    return np.asarray(embedder.encode([turn_embedding_text(t, max_chars) for _, _, _, t in conv.iter_turns()]))


def conversation_turn_inputs(
    conv: Conversation, turn_vectors: np.ndarray, encoding: str = DEFAULT_ENCODING, max_turn_chars: int = 0,
    start: int = 0,
) -> list[TurnInput]:
    """Pair every turn of ``conv`` from the ``start``-th on (``iter_turns`` order) with its vector
    (row ``i`` of ``turn_vectors`` = turn ``start + i``) and token count.

    A turn longer than ``max_turn_chars`` (0 = no bound) enters as the piece ``[0, max_turn_chars)``:
    only that part is segmented and encoded; the turn itself is kept whole by the caller.
    ``start`` > 0 feeds only the turns a resumed segmenter has not seen (incremental builds).
    """
    if len(turn_vectors) != conv.num_turns - start:
        raise ValueError(f"{len(turn_vectors)} vectors for {conv.num_turns - start} turns")
    out = []
    for row, (si, s, ti, t) in enumerate(conv.iter_turns_from(start)):
        ref = TurnRef(session_index=si, turn_index=ti, turn_id=t.turn_id, session_id=s.session_id)
        text = t.text
        if max_turn_chars and len(text) > max_turn_chars:
            text = text[:max_turn_chars]
            ref = ref.model_copy(update={"char_start": 0, "char_end": max_turn_chars})
        out.append(TurnInput(ref, t.role, text, count_tokens(text, encoding), turn_vectors[row]))
    return out


@dataclass
class SegmentationResult:
    """Segments of one conversation, the decision trace, and the turn vectors (for reuse)."""

    segments: list[Segment]
    decisions: list[Decision]
    turn_vectors: np.ndarray  # (num_turns, dim), rows in Conversation.iter_turns() order
    mode: ExchangeMode


def segment_conversation(
    conv: Conversation,
    embedder: Any | None = None,
    cfg: SegmenterConfig | None = None,
    *,
    turn_vectors: np.ndarray | None = None,
    encoding: str = DEFAULT_ENCODING,
) -> SegmentationResult:
    """Segment a whole conversation. Embeds every turn once (unless ``turn_vectors`` are given)."""
    cfg = cfg or SegmenterConfig.model_validate({})  # every key at its default
    if turn_vectors is None:
        if embedder is None:
            raise ValueError("segment_conversation needs an embedder or turn_vectors")
        turn_vectors = embed_turns(conv, embedder, cfg.max_turn_chars)
    turns = conversation_turn_inputs(conv, turn_vectors, encoding, cfg.max_turn_chars)
    mode = resolve_exchange_mode(cfg.exchange_mode, (t.role for t in turns), cfg.auto_without_roles)
    segments, decisions = segment_turn_inputs(turns, cfg, mode=mode, encoding=encoding)
    return SegmentationResult(segments, decisions, np.asarray(turn_vectors), mode)


@dataclass
class StreamSegmentation:
    """Segments of a turn stream, split by what closed them, and the segmenter's resume point.

    ``closed`` were closed by later turns: final, whatever comes next. ``tail`` were closed only
    because the input ended (:meth:`BaseSegmenter.finish`); more turns could have extended them.
    ``state`` is the segmenter's state *before* that end of input, so a continuation restored from
    it decides every later turn exactly as one uninterrupted run would (docs/incremental.md).
    """

    closed: list[Segment]
    tail: list[Segment]
    state: dict[str, Any]

    @property
    def segments(self) -> list[Segment]:
        return self.closed + self.tail


def segment_stream(
    turns: Sequence[TurnInput],
    cfg: SegmenterConfig | None = None,
    *,
    state: dict[str, Any] | None = None,
    encoding: str = DEFAULT_ENCODING,
    finish: bool = True,
) -> StreamSegmentation:
    """Segment ``turns`` with a fresh segmenter (``auto`` mode resolved on ``turns``) or one restored
    from ``state`` (a resume point of an earlier call); ``finish=False`` leaves the open segment open
    (``tail`` empty). A fresh call with ``finish=True`` gives exactly :func:`segment_turn_inputs`' segments."""
    cfg = cfg or SegmenterConfig.model_validate({})  # every key at its default
    if state is not None:
        seg = BaseSegmenter.from_state(state, cfg)
    else:
        mode = resolve_exchange_mode(cfg.exchange_mode, (t.role for t in turns), cfg.auto_without_roles)
        seg = make_segmenter(cfg, mode=mode, encoding=encoding)
    closed = seg.push_turns(turns)
    resume = seg.state_dict()
    return StreamSegmentation(closed, seg.finish() if finish else [], resume)


def open_turn_refs(state: dict[str, Any]) -> list[TurnRef]:
    """References of the turns a saved segmenter state holds undecided: its open segment's turns, the
    turns of the unit held for the look-ahead, then those of its pending (not yet complete) exchange."""
    refs = [TurnRef(**r) for r in (state.get("open") or {}).get("turns", [])]
    held = state.get("held")
    refs += [TurnRef(**r) for r in held["unit"]["turns"]] if held else []
    return refs + [TurnRef(**t["ref"]) for t in state.get("pending", [])]


@dataclass(frozen=True, slots=True)
class ResolvedTurn:
    """A turn of a segment with the text that belongs to the segment (a piece for split turns)."""

    ref: TurnRef
    turn: Turn
    text: str


def segment_turns(conv: Conversation, segment: Segment) -> list[ResolvedTurn]:
    """Resolve a segment's references against its conversation (what the encoder reads)."""
    out = []
    for r in segment.turns:
        t = conv.sessions[r.session_index].turns[r.turn_index]
        out.append(ResolvedTurn(r, t, r.slice(t.text)))
    return out
