"""The open segment's running state (JSON-able, so a stream can be saved and resumed) and its
bookkeeping: units and turns added, the last turn taken back (placement), the closed segment."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lychee_ray.config import SegmenterConfig
from lychee_ray.ingest.segment.types import CloseReason, Exchange, Segment, TurnRef
from lychee_ray.names import SegmentationMethod

# 2: n_turns in the open segment (count pressure over turns); 3: recent_words, last_question;
# 4: the open segment's last turns (turn-level placement) and the stream threshold's history;
# 5: the stream's recent words per turn (the question cue's gate); 6: the unit held for the look-ahead.
STATE_VERSION = 6
# Older states this code still reads (the fields added since get their empty values).
READABLE_STATE_VERSIONS = (2, 3, 4, 5, 6)


@dataclass
class _TurnPart:
    """One whole turn of a unit as placement needs it: reference, centred vector, tokens, content words."""

    ref: TurnRef
    vector: np.ndarray
    tokens: int
    words: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return {"ref": self.ref.model_dump(), "vector": self.vector.tolist(), "tokens": self.tokens, "words": list(self.words)}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> _TurnPart:
        return cls(TurnRef(**d["ref"]), np.asarray(d["vector"], dtype=np.float64), int(d["tokens"]), tuple(d["words"]))


@dataclass
class _OpenSegment:
    index: int
    session_index: int
    session_id: str
    first_exchange: int
    turns: list[TurnRef] = field(default_factory=list)
    tokens: int = 0
    n_exchanges: int = 0
    # Distinct turns (the pieces of a split turn count once): the count pressure's unit, so that it
    # means the same whatever the exchange mode (a pair or role exchange holds about two turns).
    n_turns: int = 0
    n_vec: int = 0  # exchanges with signal (the cohesion denominator)
    vec_sum: np.ndarray | None = None  # running sum of their unit vectors
    recent: list[np.ndarray] = field(default_factory=list)  # last trajectory_window vectors
    recent_words: list[list[str]] = field(default_factory=list)  # content words of the last lexical_window units
    # The open segment's last whole turns (placement.window + 1 at most); emptied by a unit of pieces.
    tail: list[_TurnPart] = field(default_factory=list)

    def add_exchange(self, ex: Exchange, parts: list[_TurnPart] | None, cfg: SegmenterConfig) -> None:
        """Append a whole unit (``parts``: its whole turns for placement, None when it has pieces)."""
        last = self.turns[-1].position if self.turns else None
        for r in ex.turns:  # pieces of one turn are adjacent and count once
            if r.position != last:
                self.n_turns += 1
                last = r.position
        self.turns.extend(ex.turns)
        self.tokens += ex.tokens
        self.n_exchanges += 1
        if ex.has_signal:
            self._add_vector(ex.vector, cfg)
        if ex.words:  # units without content words (greetings, "ok") neither add nor displace vocabulary
            self._add_words(list(ex.words), cfg)
        if parts is None:
            self.tail = []  # a unit without whole-turn parts breaks the run of known last turns
        else:
            self.tail.extend(parts)
            del self.tail[: -(cfg.placement.window + 1)]

    def add_part(self, part: _TurnPart, cfg: SegmenterConfig, *, new_exchange: bool) -> None:
        """Append one turn of a unit split by placement (``new_exchange``: the first piece of that unit here)."""
        if not self.turns or self.turns[-1].position != part.ref.position:
            self.n_turns += 1
        self.turns.append(part.ref)
        self.tokens += part.tokens
        self.n_exchanges += int(new_exchange)
        if np.any(part.vector):
            self._add_vector(part.vector, cfg)
        if part.words:
            self._add_words(list(part.words), cfg)
        self.tail.append(part)
        del self.tail[: -(cfg.placement.window + 1)]

    def pop_last_turn(self) -> _TurnPart:
        """Take the last (whole) turn out, just before the segment is closed (placement moved it)."""
        part = self.tail.pop()
        self.turns.pop()
        self.tokens -= part.tokens
        self.n_turns -= 1
        return part

    def closed(self, reason: CloseReason, method: SegmentationMethod) -> Segment:
        """The segment this one becomes when it is closed for ``reason``."""
        return Segment(
            segment_index=self.index,
            session_index=self.session_index,
            session_id=self.session_id,
            turns=self.turns,
            num_exchanges=self.n_exchanges,
            first_exchange=self.first_exchange,
            tokens=self.tokens,
            reason=reason,
            method=method,
        )

    def _add_vector(self, vector: np.ndarray, cfg: SegmenterConfig) -> None:
        self.n_vec += 1
        self.vec_sum = vector.copy() if self.vec_sum is None else self.vec_sum + vector
        self.recent.append(vector)
        del self.recent[: -cfg.trajectory_window]

    def _add_words(self, words: list[str], cfg: SegmenterConfig) -> None:
        self.recent_words.append(words)
        del self.recent_words[: -cfg.cues.lexical_window]

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "session_index": self.session_index,
            "session_id": self.session_id,
            "first_exchange": self.first_exchange,
            "turns": [r.model_dump() for r in self.turns],
            "tokens": self.tokens,
            "n_exchanges": self.n_exchanges,
            "n_turns": self.n_turns,
            "n_vec": self.n_vec,
            "vec_sum": None if self.vec_sum is None else self.vec_sum.tolist(),
            "recent": [v.tolist() for v in self.recent],
            "recent_words": [list(w) for w in self.recent_words],
            "tail": [p.to_dict() for p in self.tail],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> _OpenSegment:
        return cls(
            index=d["index"],
            session_index=d["session_index"],
            session_id=d["session_id"],
            first_exchange=d["first_exchange"],
            turns=[TurnRef(**r) for r in d["turns"]],
            tokens=d["tokens"],
            n_exchanges=d["n_exchanges"],
            n_turns=d["n_turns"],
            n_vec=d["n_vec"],
            vec_sum=None if d["vec_sum"] is None else np.asarray(d["vec_sum"], dtype=np.float64),
            recent=[np.asarray(v, dtype=np.float64) for v in d["recent"]],
            recent_words=[list(w) for w in d.get("recent_words", [])],
            tail=[_TurnPart.from_dict(p) for p in d.get("tail", [])],
        )

