"""Typed inputs and outputs of the segmenter: turn references, segments, decisions, exchanges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from lychee_ray.names import SegmentationMethod

# system_prompt: a session's leading system turn is a context unit of its own (agent logs), never
# part of a dialogue segment: closed as soon as it is seen.
CloseReason = Literal["semantic", "window", "length_cap", "session_boundary", "end_of_stream", "system_prompt"]
DecisionReason = Literal["start", "append", "semantic", "window", "length_cap", "session_boundary", "end_of_stream",
                         "system_prompt"]


class TurnRef(BaseModel):
    """Where a turn (or a piece of an oversized turn) lives in its conversation."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    session_index: int = Field(ge=0)
    turn_index: int = Field(ge=0, description="Index of the turn inside its session.")
    turn_id: str = Field(description="The source's own turn id (e.g. LoCoMo dia_id).")
    session_id: str = ""
    # A piece of a turn longer than the token cap: content[char_start:char_end]. None = whole turn.
    char_start: int | None = None
    char_end: int | None = None

    @property
    def position(self) -> tuple[int, int]:
        """``(session_index, turn_index)``."""
        return (self.session_index, self.turn_index)

    @property
    def is_piece(self) -> bool:
        """True when this reference covers only part of the turn's text."""
        return self.char_start is not None

    def slice(self, text: str) -> str:
        """The part of ``text`` this reference covers."""
        return text if self.char_start is None else text[self.char_start : self.char_end]


class Segment(BaseModel):
    """A closed segment: consecutive turns of one session, encoded later by one LLM call."""

    model_config = ConfigDict(extra="forbid")

    segment_index: int = Field(ge=0, description="0-based, in stream order.")
    session_index: int = Field(ge=0, description="Segments never cross sessions: exactly one.")
    session_id: str = ""
    turns: list[TurnRef] = Field(description="Turns (or pieces) in order.")
    num_exchanges: int = Field(ge=1)
    first_exchange: int = Field(ge=0, description="Stream-wide index of the first exchange.")
    tokens: int = Field(ge=0, description="Tokens of the turn texts (the cap applies to this).")
    reason: CloseReason = Field(description="Why the segment was closed.")
    method: SegmentationMethod = "semantic"

    @property
    def turn_ids(self) -> list[str]:
        """Source turn ids, in order, each once (a split turn appears once)."""
        return list(dict.fromkeys(r.turn_id for r in self.turns))

    @property
    def positions(self) -> list[tuple[int, int]]:
        """``(session_index, turn_index)`` of each turn, in order, each once."""
        return list(dict.fromkeys(r.position for r in self.turns))

    @property
    def num_turns(self) -> int:
        """Number of distinct turns (pieces of one turn count once)."""
        return len(self.positions)


class Decision(BaseModel):
    """Trace record: what the segmenter decided for one exchange (or at the end of the stream)."""

    model_config = ConfigDict(extra="forbid")

    exchange_index: int | None = Field(description="Stream-wide exchange index; None for end_of_stream.")
    segment_index: int = Field(description="Segment the exchange went into (the closed one for end_of_stream).")
    session_index: int
    turn_ids: list[str] = Field(default_factory=list)
    tokens: int = 0
    cut: bool = Field(description="True when a segment was closed before this exchange.")
    reason: DecisionReason
    surprise: float | None = None  # s_t
    phi: float | None = None  # phi(s_t)
    cohesion_drop: float | None = None  # d_t
    length_pressure: float | None = None  # L_t
    count_pressure: float | None = None  # N_t
    prior: float | None = None  # r_t, the structural prior (role_bias at a user's new request)
    question: float | None = None  # Q_t: 1 when the unit's opening turn asks a question (and the gates are open)
    words_per_turn: float | None = None  # the stream's recent words per turn before the unit (the question cue's gate)
    answer: float | None = None  # A_t: 1 when the previous unit ended with a question
    lexical_novelty: float | None = None  # X_t: share of content words new to the open segment's recent units
    # H_t, the look-ahead: cos(next unit, this unit) - cos(next unit, the open segment's trajectory); 0 without a next unit
    ahead: float | None = None
    p: float | None = None  # p_t
    # Turns by which a semantic cut moved from the unit's own gap (docs/segmenter.md §3): -1 = before the
    # open segment's last turn (that turn joined the new segment), +1 = after the unit's first turn.
    placement: int | None = None


@dataclass(slots=True)
class TurnInput:
    """One turn as the segmenter sees it: reference, role, text, token count and vector."""

    ref: TurnRef
    role: str
    text: str
    tokens: int
    vector: np.ndarray

    def __post_init__(self) -> None:
        # float64 everywhere so a JSON round trip of the state reproduces the arithmetic exactly.
        self.vector = np.asarray(self.vector, dtype=np.float64).reshape(-1)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ref": self.ref.model_dump(),
            "role": self.role,
            "text": self.text,
            "tokens": self.tokens,
            "vector": self.vector.tolist(),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> TurnInput:
        return cls(TurnRef(**d["ref"]), d["role"], d["text"], int(d["tokens"]), np.asarray(d["vector"]))


@dataclass(slots=True)
class Exchange:
    """A decision unit: one exchange (or a cap-sized part of an oversized one)."""

    session_index: int
    session_id: str
    turns: list[TurnRef]
    tokens: int
    vector: np.ndarray  # unit float64, or zeros when the exchange carries no semantic signal
    # Role of the turn that opens the unit ("" for the second and later cap-sized parts of an exchange).
    opener_role: str = ""
    # Surface cues (lychee_ray.ingest.segment.cues): the opening turn asks a question; the last turn
    # does; the distinct content words of the unit's text.
    opener_question: bool = False
    closer_question: bool = False
    words: tuple[str, ...] = ()
    # Words of each of the unit's turns (or pieces): the stream's words per turn (the question cue's gate).
    word_counts: tuple[int, ...] = ()

    @property
    def has_signal(self) -> bool:
        return bool(np.any(self.vector))

    def to_dict(self) -> dict[str, Any]:
        """JSON-able form (a unit held for the look-ahead is part of the segmenter's state)."""
        return {
            "session_index": self.session_index,
            "session_id": self.session_id,
            "turns": [r.model_dump() for r in self.turns],
            "tokens": self.tokens,
            "vector": self.vector.tolist(),
            "opener_role": self.opener_role,
            "opener_question": self.opener_question,
            "closer_question": self.closer_question,
            "words": list(self.words),
            "word_counts": list(self.word_counts),
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Exchange:
        return cls(
            session_index=int(d["session_index"]),
            session_id=d["session_id"],
            turns=[TurnRef(**r) for r in d["turns"]],
            tokens=int(d["tokens"]),
            vector=np.asarray(d["vector"], dtype=np.float64),
            opener_role=d["opener_role"],
            opener_question=bool(d["opener_question"]),
            closer_question=bool(d["closer_question"]),
            words=tuple(d["words"]),
            word_counts=tuple(int(c) for c in d["word_counts"]),
        )
