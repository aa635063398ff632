"""The open segment's running state (JSON-able, so a stream can be saved and resumed)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lychee_ray.build.segment.types import TurnRef

STATE_VERSION = 3  # 2: n_turns in the open segment (count pressure over turns); 3: recent_words, last_question
# Older states this code still reads (the fields added since get their empty values).
READABLE_STATE_VERSIONS = (2, 3)


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
        )

