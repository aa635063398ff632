"""Shared streaming machinery of the segmenters: sessions, token cap, centring, trace, state."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, Literal

import numpy as np

from lychee_ray.build.segment.exchanges import (
    _ExchangeBuilder,
    fit_to_cap,
    resolve_exchange_mode,
)
from lychee_ray.build.segment.state import READABLE_STATE_VERSIONS, STATE_VERSION, _OpenSegment
from lychee_ray.build.segment.types import (
    CloseReason,
    Decision,
    DecisionReason,
    Exchange,
    ExchangeMode,
    Segment,
    TurnInput,
)
from lychee_ray.config import SegmenterConfig
from lychee_ray.text.tokens import DEFAULT_ENCODING

# Below this norm a centred vector is rounding noise (float64 arithmetic on unit vectors), not signal.
_CENTERED_MIN_NORM = 1e-6


# Segmenter classes by their ``method`` name (filled as subclasses are defined; used by from_state).
_METHODS: dict[str, type[BaseSegmenter]] = {}


class BaseSegmenter:
    """Shared streaming machinery: exchange building, session boundaries, token cap, state.

    Subclasses decide only whether to cut before an exchange that fits under the cap.
    """

    method: Literal["semantic", "fixed"] = "semantic"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _METHODS[cls.method] = cls

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
        # the session whose dialogue has started (a system turn before it is a context unit)
        self._dialogue_session = -1
        self._surprises: deque[float] = deque(maxlen=self.cfg.surprise.robust_window)
        # Background mean of the exchange vectors seen so far (for centering); survives new_stream().
        self._bg_sum: np.ndarray | None = None
        self._bg_n = 0
        # The last unit of the stream ended with a question (the answer cue of the next unit).
        self._last_question = False
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
            if t.role == "system" and t.ref.session_index != self._dialogue_session:
                closed.extend(self._push_context(t))
                continue
            self._dialogue_session = t.ref.session_index
            for group in self._builder.add(t):
                closed.extend(self._push_group(group))
        return closed

    def _push_context(self, t: TurnInput) -> list[Segment]:
        """A system turn that opens a session (a system prompt): its own closed segment, after the
        earlier session's pending exchange and open segment are closed. It is context for the
        conversation, not dialogue: no signal, no effect on the statistics of later cuts."""
        closed: list[Segment] = []
        assert self._builder is not None
        for group in self._builder.flush():
            closed.extend(self._push_group(group))
        if self._open is not None:  # (of an earlier session: this session has no dialogue yet)
            seg = self._close("session_boundary")
            self.decisions.append(Decision(exchange_index=None, segment_index=seg.segment_index,
                                           session_index=seg.session_index, cut=True, reason="session_boundary"))
            closed.append(seg)
        idx = self._next_exchange
        self._next_exchange += 1
        seg = Segment(segment_index=self._next_segment, session_index=t.ref.session_index, session_id=t.ref.session_id,
                      turns=[t.ref], num_exchanges=1, first_exchange=idx, tokens=t.tokens, reason="system_prompt",
                      method=self.method)
        self._next_segment += 1
        self.decisions.append(Decision(exchange_index=idx, segment_index=seg.segment_index, session_index=seg.session_index,
                                       turn_ids=[t.ref.turn_id], tokens=t.tokens, cut=True, reason="system_prompt"))
        closed.append(seg)
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
        self._last_question = ex.closer_question
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
            "dialogue_session": self._dialogue_session,
            "surprises": list(self._surprises),
            "bg_sum": None if self._bg_sum is None else self._bg_sum.tolist(),
            "bg_n": self._bg_n,
            "last_question": self._last_question,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any] | str, cfg: SegmenterConfig | None = None) -> BaseSegmenter:
        """Restore a segmenter saved with :meth:`state_dict` (a dict or its JSON text).

        ``cfg`` defaults to the saved configuration; a different one is refused because the
        continued stream would no longer match an uninterrupted run.
        """
        if isinstance(state, str):
            state = json.loads(state)
        if state.get("version") not in READABLE_STATE_VERSIONS:
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
        # (states saved before context units: every session seen had dialogue)
        seg._dialogue_session = state.get("dialogue_session", state["last_session"])
        seg._surprises.extend(float(s) for s in state["surprises"])
        seg._bg_sum = None if state["bg_sum"] is None else np.asarray(state["bg_sum"], dtype=np.float64)
        seg._bg_n = int(state["bg_n"])
        seg._last_question = bool(state.get("last_question", False))
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
        self._dialogue_session = -1
        self._last_question = False  # a new dialogue answers nothing of the previous one
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
        cfg = self.cfg
        for unit in fit_to_cap(group, cfg.max_segment_tokens, cfg.exchange_weighting, self.encoding, cfg.cues.min_word_chars):
            out.extend(self.push_exchange(unit))
        return out

    def _signals(self, ex: Exchange) -> dict[str, float | None]:
        raise NotImplementedError

    def _wants_cut(self, sig: dict[str, float | None]) -> bool:
        raise NotImplementedError

    def _append(self, ex: Exchange) -> None:
        o = self._open
        assert o is not None
        last = o.turns[-1].position if o.turns else None
        for r in ex.turns:  # pieces of one turn are adjacent and count once
            if r.position != last:
                o.n_turns += 1
                last = r.position
        o.turns.extend(ex.turns)
        o.tokens += ex.tokens
        o.n_exchanges += 1
        if ex.has_signal:
            o.n_vec += 1
            o.vec_sum = ex.vector.copy() if o.vec_sum is None else o.vec_sum + ex.vector
            o.recent.append(ex.vector)
            del o.recent[: -self.cfg.trajectory_window]
        if ex.words:  # units without content words (greetings, "ok") neither add nor displace vocabulary
            o.recent_words.append(list(ex.words))
            del o.recent_words[: -self.cfg.cues.lexical_window]

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

