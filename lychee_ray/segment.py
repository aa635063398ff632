"""Online semantic segmenter (DESIGN §1 step 1) and the fixed-window baseline.

Turns go in one at a time, already embedded by the caller (the same vectors later feed the raw-turn
index, so nothing is embedded twice); closed :class:`Segment` objects come out. The segmenter never
looks ahead: the decision for exchange ``x_t`` uses only ``x_1..x_t``.

Pipeline per turn::

    TurnInput ──(exchange building: role | pair | turn)──► exchange ──(fit to the token cap)──►
    unit(s) ──(decision: cut before it or append)──► open segment ──► closed Segment

Decision for an exchange with unit vector ``e_t`` against the open segment ``S_k`` (docs/segmenter.md).
All cosines are taken after subtracting the stream's running mean vector (``center_embeddings``):
sentence embeddings share a large common direction that otherwise drowns the topic signal.

* surprise ``s_t = 1 - max(cos(e_t, c_k), cos(e_t, h_k))``, ``c_k`` the normalised centroid of
  ``S_k`` and ``h_k`` the normalised mean of its last ``trajectory_window`` exchanges;
* cohesion drop ``d_t = max(0, Coh(S_k) - Coh(S_k + x_t))`` with ``Coh(V) = mean_v cos(v, centroid)``,
  which for unit vectors equals ``|sum V| / |V|`` (kept as a running sum: O(dim) per exchange);
* length pressure ``L_t`` (tokens already in ``S_k``) and count pressure ``N_t`` (exchanges in ``S_k``);
* ``phi(s) = max(A, robust_weight * R)``: ``A`` an absolute calibration of ``s``, ``R`` its robust
  z-score against the stream's last surprises (data-adaptive: it follows the embedding model and corpus);
* ``p_t = sigmoid(b + w_s*phi(s_t) + w_c*min(cmax, d_t/cscale) + w_l*L_t + w_n*N_t)``; cut before
  ``x_t`` when ``p_t > threshold`` or when appending would pass ``max_segment_tokens``.

Every decision is recorded as a :class:`Decision` (signals, p_t, reason) in ``segmenter.decisions``.

Invariants (tested): a segment never spans two sessions; a segment never has more than
``max_segment_tokens`` tokens (a longer turn is split into character-range pieces that all carry the
turn's vector); every turn of the input appears in exactly one segment, in order (the pieces of a split
turn in order, possibly in several segments), nothing is dropped (with ``max_turn_chars`` set, a longer turn enters
as its first ``max_turn_chars`` characters: the bound on one turn's cost); the state round-trips through JSON and a restored
segmenter makes exactly the decisions an uninterrupted one would.

Degenerate input: an exchange whose turns are all empty/whitespace (or have zero vectors) carries no
semantic signal and is appended to the open segment (only the session boundary and the token cap can
cut before it); a single turn yields one segment; identical turns have zero surprise (centring keeps their
common direction), so only the pressures or the cap cut them; a turn over the
cap is split into pieces of at most ``max_segment_tokens`` tokens, preferably at whitespace.

Pure numpy + the offline tokenizer; no Ray.
"""

from __future__ import annotations

import json
import math
from collections import deque
from dataclasses import dataclass, field, replace
from typing import Any, Iterable, Literal, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from .config import PressureConfig, SegmenterConfig, SurpriseConfig
from .models import Conversation, Turn
from .tokens import DEFAULT_ENCODING, count_tokens, get_encoding

ExchangeMode = Literal["role", "pair", "turn"]
CloseReason = Literal["semantic", "window", "length_cap", "session_boundary", "end_of_stream"]
DecisionReason = Literal["start", "append", "semantic", "window", "length_cap", "session_boundary", "end_of_stream"]

STATE_VERSION = 1
# Below this norm a centred vector is rounding noise (float64 arithmetic on unit vectors), not signal.
_CENTERED_MIN_NORM = 1e-6


# --------------------------------------------------------------------------------------------
# Typed inputs and outputs
# --------------------------------------------------------------------------------------------


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
    method: Literal["semantic", "fixed"] = "semantic"

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
    p: float | None = None  # p_t


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
    def from_dict(cls, d: dict[str, Any]) -> "TurnInput":
        return cls(TurnRef(**d["ref"]), d["role"], d["text"], int(d["tokens"]), np.asarray(d["vector"]))


@dataclass(slots=True)
class Exchange:
    """A decision unit: one exchange (or a cap-sized part of an oversized one)."""

    session_index: int
    session_id: str
    turns: list[TurnRef]
    tokens: int
    vector: np.ndarray  # unit float64, or zeros when the exchange carries no semantic signal

    @property
    def has_signal(self) -> bool:
        return bool(np.any(self.vector))


# --------------------------------------------------------------------------------------------
# Exchange building and the token cap
# --------------------------------------------------------------------------------------------


def resolve_exchange_mode(mode: str, roles: Iterable[str]) -> ExchangeMode:
    """Concrete mode for ``auto``: ``role`` when any turn is an assistant turn, else ``pair``."""
    if mode != "auto":
        return mode  # type: ignore[return-value]
    return "role" if any(r == "assistant" for r in roles) else "pair"


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return v / n if n > 0 else np.zeros_like(v)


def split_text_by_tokens(text: str, max_tokens: int, encoding: str = DEFAULT_ENCODING) -> list[tuple[int, int]]:
    """Character spans covering ``text`` whose pieces have at most ``max_tokens`` tokens each.

    Pieces end at a whitespace when one lies in the second half of the piece, so words are not cut
    when avoidable. The spans are contiguous and cover the whole text (nothing is dropped).
    """
    if count_tokens(text, encoding) <= max_tokens:
        return [(0, len(text))]
    enc = get_encoding(encoding)
    spans: list[tuple[int, int]] = []
    start = 0
    while start < len(text):
        # Tokenise a window of the rest, not all of it (a 10 MB turn would cost O(n^2)); the window
        # grows until it holds more than max_tokens tokens or reaches the end of the text.
        window = max_tokens * 8
        while True:
            rest = text[start : start + window]
            ids = enc.encode(rest, disallowed_special=())
            if len(ids) > max_tokens or start + window >= len(text):
                break
            window *= 2
        if len(ids) <= max_tokens:
            spans.append((start, len(text)))
            break
        # Characters fully covered by the first max_tokens tokens (a token may end inside a character).
        nbytes = sum(len(b) for b in enc.decode_tokens_bytes(ids[:max_tokens]))
        cut = max(1, len(rest.encode("utf-8")[:nbytes].decode("utf-8", errors="ignore")))
        ws = max(rest.rfind(" ", cut // 2, cut), rest.rfind("\n", cut // 2, cut))
        if ws > 0:
            cut = ws + 1
        # Re-tokenising a piece can merge differently at its edge: shrink until it fits.
        while cut > 1 and count_tokens(rest[:cut], encoding) > max_tokens:
            cut -= max(1, cut // 20)
        spans.append((start, start + cut))
        start += cut
    return spans


def _exchange_vector(turns: Sequence[tuple[TurnInput, int]], weighting: str) -> np.ndarray:
    """Normalised (optionally token-weighted) mean of the turn vectors that carry signal."""
    acc: np.ndarray | None = None
    for t, tokens in turns:
        if not t.text.strip():
            continue  # empty turns say nothing about the topic
        u = _unit(t.vector)
        w = float(tokens) if weighting == "tokens" else 1.0
        acc = u * w if acc is None else acc + u * w
    if acc is None:
        dim = turns[0][0].vector.shape[0] if turns else 0
        return np.zeros(dim, dtype=np.float64)
    return _unit(acc)


def fit_to_cap(
    turns: Sequence[TurnInput], max_tokens: int, weighting: str = "mean", encoding: str = DEFAULT_ENCODING
) -> list[Exchange]:
    """Turn one exchange into decision units of at most ``max_tokens`` tokens each.

    Usually this is the exchange itself. An oversized exchange is packed greedily by turns; a turn
    over the cap is split into character-range pieces that all reuse the turn's vector.
    """
    items: list[tuple[TurnInput, TurnRef, int]] = []  # (turn, ref or piece ref, tokens)
    for t in turns:
        if t.tokens <= max_tokens:
            items.append((t, t.ref, t.tokens))
            continue
        for a, b in split_text_by_tokens(t.text, max_tokens, encoding):
            piece = t.ref.model_copy(update={"char_start": a, "char_end": b})
            items.append((t, piece, count_tokens(t.text[a:b], encoding)))
    groups: list[list[tuple[TurnInput, TurnRef, int]]] = []
    total = max_tokens + 1  # forces a new group for the first item
    for it in items:
        if total + it[2] > max_tokens:
            groups.append([])
            total = 0
        groups[-1].append(it)
        total += it[2]
    first = turns[0].ref
    return [
        Exchange(
            session_index=first.session_index,
            session_id=first.session_id,
            turns=[r for _, r, _ in g],
            tokens=sum(n for _, _, n in g),
            vector=_exchange_vector([(t, n) for t, _, n in g], weighting),
        )
        for g in groups
    ]


class _ExchangeBuilder:
    """Streaming exchange building; holds the turns of a not yet complete exchange."""

    def __init__(self, mode: ExchangeMode) -> None:
        self.mode = mode
        self.pending: list[TurnInput] = []

    def add(self, t: TurnInput) -> list[list[TurnInput]]:
        out: list[list[TurnInput]] = []
        if self.pending and t.ref.session_index != self.pending[0].ref.session_index:
            out.append(self.pending)  # exchanges never cross a session boundary
            self.pending = []
        if self.mode == "turn":
            out.append([t])
        elif self.mode == "pair":
            self.pending.append(t)
            if len(self.pending) == 2:
                out.append(self.pending)
                self.pending = []
        else:  # role: a user turn opens an exchange; other turns reply to it
            if t.role == "user" and self.pending:
                out.append(self.pending)
                self.pending = []
            self.pending.append(t)
        return out

    def flush(self) -> list[list[TurnInput]]:
        out = [self.pending] if self.pending else []
        self.pending = []
        return out


def build_exchanges(
    turns: Sequence[TurnInput],
    mode: str = "auto",
    max_tokens: int = 2048,
    weighting: str = "mean",
    encoding: str = DEFAULT_ENCODING,
) -> list[Exchange]:
    """All decision units of a finished turn sequence (batch form of what the segmenter streams)."""
    b = _ExchangeBuilder(resolve_exchange_mode(mode, (t.role for t in turns)))
    groups = [g for t in turns for g in b.add(t)] + b.flush()
    return [u for g in groups for u in fit_to_cap(g, max_tokens, weighting, encoding)]


# --------------------------------------------------------------------------------------------
# Signals
# --------------------------------------------------------------------------------------------


def sigmoid(x: float) -> float:
    """Numerically safe logistic function."""
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    z = math.exp(x)
    return z / (1.0 + z)


def ramp(x: float, cfg: PressureConfig) -> float:
    """Pressure curve: 0 up to ``start``, +1 per ``scale`` units beyond it, at most ``max``."""
    return min(cfg.max, max(0.0, x - cfg.start) / cfg.scale)


def calibrated_surprise(s: float, history: Sequence[float], cfg: SurpriseConfig) -> float:
    """phi(s) = max(A, robust_weight * R) with the absolute part A and the robust z-score R."""
    a = min(cfg.clip_max, max(cfg.clip_min, (s - cfg.center) / cfg.scale))
    r = 0.0
    if len(history) >= cfg.robust_min_history:
        h = np.fromiter(history, dtype=np.float64)
        med = float(np.median(h))
        sigma = max(cfg.mad_floor, float(np.median(np.abs(h - med))) * cfg.mad_to_sigma)
        r = min(cfg.robust_clip_max, max(cfg.robust_clip_min, (s - med) / sigma))
    return max(a, cfg.robust_weight * r)


# --------------------------------------------------------------------------------------------
# The segmenters
# --------------------------------------------------------------------------------------------


@dataclass
class _OpenSegment:
    index: int
    session_index: int
    session_id: str
    first_exchange: int
    turns: list[TurnRef] = field(default_factory=list)
    tokens: int = 0
    n_exchanges: int = 0
    n_vec: int = 0  # exchanges with signal (the cohesion denominator)
    vec_sum: np.ndarray | None = None  # running sum of their unit vectors
    recent: list[np.ndarray] = field(default_factory=list)  # last trajectory_window vectors

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "session_index": self.session_index,
            "session_id": self.session_id,
            "first_exchange": self.first_exchange,
            "turns": [r.model_dump() for r in self.turns],
            "tokens": self.tokens,
            "n_exchanges": self.n_exchanges,
            "n_vec": self.n_vec,
            "vec_sum": None if self.vec_sum is None else self.vec_sum.tolist(),
            "recent": [v.tolist() for v in self.recent],
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "_OpenSegment":
        return cls(
            index=d["index"],
            session_index=d["session_index"],
            session_id=d["session_id"],
            first_exchange=d["first_exchange"],
            turns=[TurnRef(**r) for r in d["turns"]],
            tokens=d["tokens"],
            n_exchanges=d["n_exchanges"],
            n_vec=d["n_vec"],
            vec_sum=None if d["vec_sum"] is None else np.asarray(d["vec_sum"], dtype=np.float64),
            recent=[np.asarray(v, dtype=np.float64) for v in d["recent"]],
        )


class BaseSegmenter:
    """Shared streaming machinery: exchange building, session boundaries, token cap, state.

    Subclasses decide only whether to cut before an exchange that fits under the cap.
    """

    method: Literal["semantic", "fixed"] = "semantic"

    def __init__(
        self, cfg: SegmenterConfig | None = None, *, mode: ExchangeMode | None = None, encoding: str = DEFAULT_ENCODING
    ) -> None:
        self.cfg = cfg or SegmenterConfig()
        self.encoding = encoding
        if mode is None and self.cfg.exchange_mode != "auto":
            mode = self.cfg.exchange_mode
        self._fixed_mode = mode  # None = resolve `auto` from the first turns of each stream
        self._builder: _ExchangeBuilder | None = _ExchangeBuilder(mode) if mode else None
        self._open: _OpenSegment | None = None
        self._next_exchange = 0
        self._next_segment = 0
        self._last_session = -1
        self._surprises: deque[float] = deque(maxlen=self.cfg.surprise.robust_window)
        # Background mean of the exchange vectors seen so far (for centering); survives new_stream().
        self._bg_sum: np.ndarray | None = None
        self._bg_n = 0
        self.decisions: list[Decision] = []  # trace since construction / restore (not in the state)

    # ---- public API ------------------------------------------------------------------------

    @property
    def mode(self) -> ExchangeMode | None:
        """The exchange mode in use (None while ``auto`` has not seen a turn yet)."""
        return self._builder.mode if self._builder else None

    def push_turns(self, turns: Iterable[TurnInput]) -> list[Segment]:
        """Feed turns in conversation order; returns the segments closed by them.

        With ``exchange_mode: auto`` the mode is fixed by the first call: ``role`` when that batch has
        an assistant turn, else ``pair`` (pass the whole first session, or set the mode explicitly).
        """
        turns = list(turns)
        if not turns:
            return []
        if self._builder is None:
            self._builder = _ExchangeBuilder(resolve_exchange_mode("auto", (t.role for t in turns)))
        closed: list[Segment] = []
        for t in turns:
            if t.ref.session_index < self._last_session:
                raise ValueError(f"turn {t.ref.turn_id!r}: session {t.ref.session_index} after {self._last_session}")
            self._last_session = t.ref.session_index
            for group in self._builder.add(t):
                closed.extend(self._push_group(group))
        return closed

    def finish(self) -> list[Segment]:
        """End of stream: flush the pending exchange and close the open segment."""
        closed: list[Segment] = []
        if self._builder is not None:
            for group in self._builder.flush():
                closed.extend(self._push_group(group))
        if self._open is not None:
            seg = self._close("end_of_stream")
            self.decisions.append(
                Decision(
                    exchange_index=None,
                    segment_index=seg.segment_index,
                    session_index=seg.session_index,
                    cut=True,
                    reason="end_of_stream",
                )
            )
            closed.append(seg)
        return closed

    def push_exchange(self, ex: Exchange) -> list[Segment]:
        """Decide one already built unit (at most ``max_segment_tokens`` tokens)."""
        if ex.tokens > self.cfg.max_segment_tokens:
            raise ValueError("exchange over the token cap: build units with fit_to_cap()")
        closed: list[Segment] = []
        idx = self._next_exchange
        self._next_exchange += 1
        raw, raw_signal = ex.vector, ex.has_signal
        if raw_signal:
            ex = replace(ex, vector=self._centered(raw))
        ids = list(dict.fromkeys(r.turn_id for r in ex.turns))
        sig: dict[str, float | None] = {}
        if self._open is None:
            reason: DecisionReason = "start"
        elif ex.session_index != self._open.session_index:
            reason = "session_boundary"
        else:
            sig = self._signals(ex)
            if self._open.tokens + ex.tokens > self.cfg.max_segment_tokens:
                reason = "length_cap"
            elif self._wants_cut(sig):
                reason = "semantic" if self.method == "semantic" else "window"
            else:
                reason = "append"
        cut = reason not in ("start", "append")
        if cut:
            closed.append(self._close(reason))  # type: ignore[arg-type]
        if self._open is None:
            self._open = _OpenSegment(self._next_segment, ex.session_index, ex.session_id, idx)
            self._next_segment += 1
        self._append(ex)
        if sig.get("surprise") is not None:
            self._surprises.append(float(sig["surprise"]))  # type: ignore[arg-type]
        if raw_signal:
            self._bg_sum = raw.copy() if self._bg_sum is None else self._bg_sum + raw
            self._bg_n += 1
        self.decisions.append(
            Decision(
                exchange_index=idx,
                segment_index=self._open.index,
                session_index=ex.session_index,
                turn_ids=ids,
                tokens=ex.tokens,
                cut=cut,
                reason=reason,
                **sig,  # type: ignore[arg-type]
            )
        )
        return closed

    def state_dict(self) -> dict[str, Any]:
        """Everything needed to continue the stream later, as JSON-able data."""
        return {
            "version": STATE_VERSION,
            "method": self.method,
            "config": self.cfg.model_dump(mode="json"),
            "encoding": self.encoding,
            "mode": self.mode,
            "fixed_mode": self._fixed_mode,
            "pending": [t.to_dict() for t in (self._builder.pending if self._builder else [])],
            "open": None if self._open is None else self._open.to_dict(),
            "next_exchange": self._next_exchange,
            "next_segment": self._next_segment,
            "last_session": self._last_session,
            "surprises": list(self._surprises),
            "bg_sum": None if self._bg_sum is None else self._bg_sum.tolist(),
            "bg_n": self._bg_n,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any] | str, cfg: SegmenterConfig | None = None) -> "BaseSegmenter":
        """Restore a segmenter saved with :meth:`state_dict` (a dict or its JSON text).

        ``cfg`` defaults to the saved configuration; a different one is refused because the
        continued stream would no longer match an uninterrupted run.
        """
        if isinstance(state, str):
            state = json.loads(state)
        if state.get("version") != STATE_VERSION:
            raise ValueError(f"unsupported segmenter state version {state.get('version')!r}")
        saved = SegmenterConfig.model_validate(state["config"])
        if cfg is not None and cfg != saved:
            raise ValueError("segmenter config differs from the one the state was saved with")
        klass = _METHODS[state["method"]]
        seg = klass(saved, mode=state["mode"], encoding=state["encoding"])
        seg._fixed_mode = state["fixed_mode"]
        if seg._builder is not None:
            seg._builder.pending = [TurnInput.from_dict(t) for t in state["pending"]]
        seg._open = None if state["open"] is None else _OpenSegment.from_dict(state["open"])
        seg._next_exchange = state["next_exchange"]
        seg._next_segment = state["next_segment"]
        seg._last_session = state["last_session"]
        seg._surprises.extend(float(s) for s in state["surprises"])
        seg._bg_sum = None if state["bg_sum"] is None else np.asarray(state["bg_sum"], dtype=np.float64)
        seg._bg_n = int(state["bg_n"])
        return seg

    def new_stream(self) -> list[Segment]:
        """Finish the current stream and start another (e.g. the next dialogue of a corpus).

        Segment and exchange numbering restart; the background statistics (the surprise history
        behind R and the centering mean) are kept, as a deployed segmenter keeps its experience.
        """
        closed = self.finish()
        self._builder = _ExchangeBuilder(self._fixed_mode) if self._fixed_mode else None
        self._open = None
        self._next_exchange = self._next_segment = 0
        self._last_session = -1
        return closed

    # ---- internals -------------------------------------------------------------------------

    def _centered(self, v: np.ndarray) -> np.ndarray:
        """Unit vector of ``v`` minus the (shrunk) background mean of the exchanges seen before it.

        Sentence embeddings share a large common component (conversational register); removing
        the running mean makes cosines reflect topic rather than style (docs/segmenter.md).
        """
        if not self.cfg.center_embeddings or self._bg_sum is None:
            return v
        d = v - self._bg_sum / (self._bg_n + self.cfg.centering_prior)
        n = float(np.linalg.norm(d))
        # A vector equal to the background (e.g. a stream of identical turns) has no distinctive
        # direction left: it carries no signal (appended) rather than amplified rounding noise.
        return d / n if n > _CENTERED_MIN_NORM else np.zeros_like(v)

    def _push_group(self, group: list[TurnInput]) -> list[Segment]:
        out: list[Segment] = []
        for unit in fit_to_cap(group, self.cfg.max_segment_tokens, self.cfg.exchange_weighting, self.encoding):
            out.extend(self.push_exchange(unit))
        return out

    def _signals(self, ex: Exchange) -> dict[str, float | None]:
        raise NotImplementedError

    def _wants_cut(self, sig: dict[str, float | None]) -> bool:
        raise NotImplementedError

    def _append(self, ex: Exchange) -> None:
        o = self._open
        assert o is not None
        o.turns.extend(ex.turns)
        o.tokens += ex.tokens
        o.n_exchanges += 1
        if ex.has_signal:
            o.n_vec += 1
            o.vec_sum = ex.vector.copy() if o.vec_sum is None else o.vec_sum + ex.vector
            o.recent.append(ex.vector)
            del o.recent[: -self.cfg.trajectory_window]

    def _close(self, reason: CloseReason) -> Segment:
        o = self._open
        assert o is not None
        self._open = None
        return Segment(
            segment_index=o.index,
            session_index=o.session_index,
            session_id=o.session_id,
            turns=o.turns,
            num_exchanges=o.n_exchanges,
            first_exchange=o.first_exchange,
            tokens=o.tokens,
            reason=reason,
            method=self.method,
        )


class OnlineSegmenter(BaseSegmenter):
    """The semantic segmenter: cut when the boundary probability p_t exceeds the threshold."""

    method = "semantic"

    def _signals(self, ex: Exchange) -> dict[str, float | None]:
        cfg, o = self.cfg, self._open
        assert o is not None
        lp = ramp(o.tokens, cfg.length_pressure)
        npr = ramp(o.n_exchanges, cfg.count_pressure)
        out: dict[str, float | None] = {"length_pressure": lp, "count_pressure": npr}
        if not ex.has_signal or o.vec_sum is None:
            return out  # no semantic evidence either way: never a semantic cut
        norm_sum = float(np.linalg.norm(o.vec_sum))
        cos_c = float(ex.vector @ o.vec_sum) / norm_sum if norm_sum > 0 else 0.0
        traj = _unit(np.sum(o.recent, axis=0))
        cos_h = float(ex.vector @ traj)
        s = 1.0 - max(cos_c, cos_h)
        coh_before = norm_sum / o.n_vec
        coh_after = float(np.linalg.norm(o.vec_sum + ex.vector)) / (o.n_vec + 1)
        d = max(0.0, coh_before - coh_after)
        phi = calibrated_surprise(s, self._surprises, cfg.surprise)
        z = (
            cfg.bias
            + cfg.w_surprise * phi
            + cfg.w_cohesion * min(cfg.cohesion_max, d / cfg.cohesion_scale)
            + cfg.w_length * lp
            + cfg.w_count * npr
        )
        out.update(surprise=s, phi=phi, cohesion_drop=d, p=sigmoid(z))
        return out

    def _wants_cut(self, sig: dict[str, float | None]) -> bool:
        p = sig.get("p")
        return p is not None and p > self.cfg.threshold


class FixedWindowSegmenter(BaseSegmenter):
    """Baseline/ablation: a segment every ``fixed_window`` exchanges (same cap and session rules).

    Its trace records the open segment's exchange count in ``count_pressure`` and no other signal.
    """

    method = "fixed"

    def _signals(self, ex: Exchange) -> dict[str, float | None]:
        assert self._open is not None
        return {"count_pressure": float(self._open.n_exchanges)}

    def _wants_cut(self, sig: dict[str, float | None]) -> bool:
        return (sig["count_pressure"] or 0) >= self.cfg.fixed_window


_METHODS: dict[str, type[BaseSegmenter]] = {"semantic": OnlineSegmenter, "fixed": FixedWindowSegmenter}


def make_segmenter(
    cfg: SegmenterConfig | None = None, *, mode: ExchangeMode | None = None, encoding: str = DEFAULT_ENCODING
) -> BaseSegmenter:
    """The segmenter named by ``cfg.method`` (``semantic`` or ``fixed``)."""
    cfg = cfg or SegmenterConfig()
    return _METHODS[cfg.method](cfg, mode=mode, encoding=encoding)


def segment_turn_inputs(
    turns: Sequence[TurnInput],
    cfg: SegmenterConfig | None = None,
    *,
    mode: ExchangeMode | None = None,
    encoding: str = DEFAULT_ENCODING,
) -> tuple[list[Segment], list[Decision]]:
    """Segment a finished turn sequence; ``auto`` mode is resolved on the whole sequence."""
    cfg = cfg or SegmenterConfig()
    if mode is None:
        mode = resolve_exchange_mode(cfg.exchange_mode, (t.role for t in turns))
    seg = make_segmenter(cfg, mode=mode, encoding=encoding)
    out = seg.push_turns(turns)
    out.extend(seg.finish())
    return out, seg.decisions


# --------------------------------------------------------------------------------------------
# Conversations
# --------------------------------------------------------------------------------------------


def turn_embedding_text(turn: Turn, max_chars: int = 0) -> str:
    """The text embedded for a turn (segmenter and raw-turn index share it): its content, or its
    first ``max_chars`` characters (``segmenter.max_turn_chars``; 0 = all)."""
    return turn.content[:max_chars] if max_chars and len(turn.content) > max_chars else turn.content


def embed_turns(conv: Conversation, embedder: Any, max_chars: int = 0) -> np.ndarray:
    """One batched ``embedder.encode`` call over every turn, in :meth:`Conversation.iter_turns` order."""
    return np.asarray(embedder.encode([turn_embedding_text(t, max_chars) for _, _, _, t in conv.iter_turns()]))


def conversation_turn_inputs(
    conv: Conversation, turn_vectors: np.ndarray, encoding: str = DEFAULT_ENCODING, max_turn_chars: int = 0
) -> list[TurnInput]:
    """Pair every turn of ``conv`` with its vector (rows in ``iter_turns`` order) and token count.

    A turn longer than ``max_turn_chars`` (0 = no bound) enters as the piece ``[0, max_turn_chars)``:
    only that part is segmented and encoded; the turn itself is kept whole by the caller.
    """
    if len(turn_vectors) != conv.num_turns:
        raise ValueError(f"{len(turn_vectors)} vectors for {conv.num_turns} turns")
    out = []
    for row, (si, s, ti, t) in enumerate(conv.iter_turns()):
        ref = TurnRef(session_index=si, turn_index=ti, turn_id=t.turn_id, session_id=s.session_id)
        text = t.content
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
    cfg = cfg or SegmenterConfig()
    if turn_vectors is None:
        if embedder is None:
            raise ValueError("segment_conversation needs an embedder or turn_vectors")
        turn_vectors = embed_turns(conv, embedder, cfg.max_turn_chars)
    turns = conversation_turn_inputs(conv, turn_vectors, encoding, cfg.max_turn_chars)
    mode = resolve_exchange_mode(cfg.exchange_mode, (t.role for t in turns))
    segments, decisions = segment_turn_inputs(turns, cfg, mode=mode, encoding=encoding)
    return SegmentationResult(segments, decisions, np.asarray(turn_vectors), mode)


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
        out.append(ResolvedTurn(r, t, r.slice(t.content)))
    return out
