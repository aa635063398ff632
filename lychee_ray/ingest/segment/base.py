"""Shared streaming machinery of the segmenters: sessions, token cap, centring, trace, state."""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

import numpy as np

from lychee_ray.ingest.segment.cues import WordRate, content_words
from lychee_ray.ingest.segment.exchanges import (
    _ExchangeBuilder,
    _unit,
    fit_to_cap,
    resolve_exchange_mode,
)
from lychee_ray.ingest.segment.placement import choose_shift
from lychee_ray.ingest.segment.state import READABLE_STATE_VERSIONS, STATE_VERSION, _OpenSegment, _TurnPart
from lychee_ray.ingest.segment.types import (
    CloseReason,
    Decision,
    DecisionReason,
    Exchange,
    Segment,
    TurnInput,
)
from lychee_ray.names import AUTO, ExchangeMode, SegmentationMethod
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

    method: SegmentationMethod = "semantic"

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        _METHODS[cls.method] = cls

    def __init__(
        self, cfg: SegmenterConfig | None = None, *, mode: ExchangeMode | None = None, encoding: str = DEFAULT_ENCODING
    ) -> None:
        self.cfg = cfg or SegmenterConfig.model_validate({})  # every key at its default
        self.encoding = encoding
        if mode is None and self.cfg.exchange_mode != AUTO:
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
        # The stream's recent words per turn (the question cue's gate); survives new_stream() like the background mean.
        self._word_rate = WordRate(self.cfg.cues.words_window, self.cfg.cues.words_min_history)
        # The unit waiting for the next one (cues.ahead_modes: decided once the next unit has arrived).
        self._held: tuple[Exchange, list[_TurnPart] | None] | None = None
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
            self._builder = _ExchangeBuilder(resolve_exchange_mode(AUTO, (t.role for t in turns), self.cfg.auto_without_roles))
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
        closed.extend(self._decide_held())
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
        closed.extend(self._decide_held())
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

    def push_exchange(self, ex: Exchange, parts: list[_TurnPart] | None = None) -> list[Segment]:
        """Decide one already built unit (at most ``max_segment_tokens`` tokens).

        ``parts``: the unit's whole turns with their (uncentred) vectors, when every turn of the unit is
        whole; they let a semantic cut move by one turn (``placement``). None = the cut stays at the unit.
        In the modes of ``cues.ahead_modes`` the unit is held and decided when the next unit arrives (or
        at the end of its session or stream): the segments returned are those the previous unit closed.
        """
        if ex.tokens > self.cfg.max_segment_tokens:
            raise ValueError("exchange over the token cap: build units with fit_to_cap()")
        if self.mode not in self.cfg.cues.ahead_modes:
            return self._decide(ex, parts, None)
        held, self._held = self._held, (ex, parts)
        if held is None:
            return []
        # the look-ahead never reaches across a session boundary (the next session opens a segment anyway)
        return self._decide(held[0], held[1], ex if ex.session_index == held[0].session_index else None)

    def _decide_held(self) -> list[Segment]:
        """Decide the held unit without a next one (end of its session or of the stream)."""
        if self._held is None:
            return []
        (ex, parts), self._held = self._held, None
        return self._decide(ex, parts, None)

    def _decide(self, ex: Exchange, parts: list[_TurnPart] | None, nxt: Exchange | None) -> list[Segment]:
        """Decide ``ex`` (``nxt``: the unit after it in its session, for the look-ahead; None = none)."""
        closed: list[Segment] = []
        idx = self._next_exchange
        self._next_exchange += 1
        raw, raw_signal = ex.vector, ex.has_signal
        cparts = None
        if parts is not None and self.mode in self.cfg.placement.modes:
            cparts = [replace(p, vector=self._centered(p.vector)) if np.any(p.vector) else p for p in parts]
        if raw_signal:
            ex = replace(ex, vector=self._centered(raw))
        ids = list(dict.fromkeys(r.turn_id for r in ex.turns))
        sig: dict[str, float | None] = {}
        if self._open is None:
            reason: DecisionReason = "start"
        elif ex.session_index != self._open.session_index:
            reason = "session_boundary"
        else:
            ahead = self._centered(nxt.vector) if nxt is not None and nxt.has_signal else None
            sig = self._signals(ex, ahead)
            if self._open.tokens + ex.tokens > self.cfg.max_segment_tokens:
                reason = "length_cap"
            elif self._wants_cut(sig):
                reason = "semantic" if self.method == "semantic" else "window"
            else:
                reason = "append"
        cut = reason not in ("start", "append")
        shift, moved = 0, None
        if reason != "start" and reason != "append":  # (= cut; spelled out so the closing reason's type is known)
            if reason == "semantic" and cparts is not None:
                shift = self._placement(ex, cparts)
                assert self._open is not None
                if shift == -1:
                    moved = self._open.pop_last_turn()  # that turn opens the new segment
                elif shift == 1:
                    self._open.add_part(cparts[0], self.cfg, new_exchange=True)  # the unit's first turn closes the old one
            closed.append(self._close(reason))
        if self._open is None:
            first = idx - 1 if moved is not None else idx
            self._open = _OpenSegment(self._next_segment, ex.session_index, ex.session_id, first)
            self._next_segment += 1
        if moved is not None:
            self._open.add_part(moved, self.cfg, new_exchange=True)
        if shift == 1 and cparts is not None:
            for k, part in enumerate(cparts[1:]):
                self._open.add_part(part, self.cfg, new_exchange=k == 0)
        else:
            self._open.add_exchange(ex, cparts, self.cfg)
        surprise = sig.get("surprise")
        if surprise is not None:
            self._surprises.append(float(surprise))
        if raw_signal:
            self._bg_sum = raw.copy() if self._bg_sum is None else self._bg_sum + raw
            self._bg_n += 1
        self._last_question = ex.closer_question
        self._word_rate.observe(ex.word_counts)
        self._observe(ex, sig)
        self.decisions.append(
            Decision(
                exchange_index=idx,
                segment_index=self._open.index,
                session_index=ex.session_index,
                turn_ids=ids,
                tokens=ex.tokens,
                cut=cut,
                reason=reason,
                placement=shift if reason == "semantic" and cparts is not None else None,
                **sig,
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
            "turn_words": list(self._word_rate.counts),
            "held": None if self._held is None else {
                "unit": self._held[0].to_dict(),
                "parts": None if self._held[1] is None else [p.to_dict() for p in self._held[1]],
            },
            **self._extra_state(),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any] | str, cfg: SegmenterConfig | None = None) -> BaseSegmenter:
        """Restore a segmenter saved with :meth:`state_dict` (a dict or its JSON text).

        ``cfg`` defaults to the saved configuration; a different one is refused because the
        continued stream would no longer match an uninterrupted run.
        """
        data: dict[str, Any] = json.loads(state) if isinstance(state, str) else state
        if data.get("version") not in READABLE_STATE_VERSIONS:
            raise ValueError(f"unsupported segmenter state version {data.get('version')!r}")
        saved = SegmenterConfig.model_validate(data["config"])
        if cfg is not None and cfg != saved:
            raise ValueError("segmenter config differs from the one the state was saved with")
        klass = _METHODS[data["method"]]
        seg = klass(saved, mode=data["mode"], encoding=data["encoding"])
        seg._fixed_mode = data["fixed_mode"]
        if seg._builder is not None:
            seg._builder.pending = [TurnInput.from_dict(t) for t in data["pending"]]
        seg._open = None if data["open"] is None else _OpenSegment.from_dict(data["open"])
        seg._next_exchange = data["next_exchange"]
        seg._next_segment = data["next_segment"]
        seg._last_session = data["last_session"]
        # (states saved before context units: every session seen had dialogue)
        seg._dialogue_session = data.get("dialogue_session", data["last_session"])
        seg._surprises.extend(float(s) for s in data["surprises"])
        seg._bg_sum = None if data["bg_sum"] is None else np.asarray(data["bg_sum"], dtype=np.float64)
        seg._bg_n = int(data["bg_n"])
        seg._last_question = bool(data.get("last_question", False))
        seg._word_rate.counts.extend(int(c) for c in data.get("turn_words", []))
        held = data.get("held")
        if held is not None:
            parts = None if held["parts"] is None else [_TurnPart.from_dict(p) for p in held["parts"]]
            seg._held = (Exchange.from_dict(held["unit"]), parts)
        seg._load_extra_state(data)
        return seg

    def new_stream(self) -> list[Segment]:
        """Finish the current stream and start another (e.g. the next dialogue of a corpus).

        Segment and exchange numbering restart; the background statistics (the surprise history
        behind R, the centering mean and the words per turn) are kept, as a deployed segmenter keeps its experience.
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
        by_pos = {t.ref.position: t for t in group}
        for unit in fit_to_cap(group, cfg.max_segment_tokens, cfg.exchange_weighting, self.encoding, cfg.cues.min_word_chars):
            out.extend(self.push_exchange(unit, self._parts(unit, by_pos)))
        return out

    def _parts(self, unit: Exchange, by_pos: dict[tuple[int, int], TurnInput]) -> list[_TurnPart] | None:
        """The unit's whole turns for placement (None when placement is off here or a turn is a piece)."""
        if self.mode not in self.cfg.placement.modes or any(r.is_piece for r in unit.turns):
            return None
        out = []
        for r in unit.turns:
            t = by_pos[r.position]
            vec = _unit(t.vector) if t.text.strip() else np.zeros_like(t.vector)
            out.append(_TurnPart(r, vec, t.tokens, content_words([t.text], self.cfg.cues.min_word_chars)))
        return out

    def _placement(self, ex: Exchange, parts: list[_TurnPart]) -> int:
        """Turns by which a semantic cut before ``ex`` moves (:mod:`~lychee_ray.ingest.segment.placement`)."""
        o = self._open
        assert o is not None
        placement = self.cfg.placement
        # The last turn may move only when it is a whole turn of the open segment (the tail is exactly its
        # last turns), the segment keeps at least one turn, and the new segment stays under the cap.
        back = (
            len(o.tail) >= 2
            and o.n_turns >= 2
            and o.tail[-1].ref == o.turns[-1]
            and o.tail[-1].tokens + ex.tokens <= self.cfg.max_segment_tokens
        )
        shift, _ = choose_shift([p.vector for p in o.tail], [p.vector for p in parts], placement.window, placement.margin,
                                allow_back=back)
        return shift

    def _signals(self, ex: Exchange, ahead: np.ndarray | None = None) -> dict[str, float | None]:
        """The decision's inputs for ``ex`` (centred); ``ahead``: the next unit's centred vector, if any."""
        raise NotImplementedError

    def _wants_cut(self, sig: dict[str, float | None]) -> bool:
        raise NotImplementedError

    def _observe(self, ex: Exchange, sig: dict[str, float | None]) -> None:
        """Hook after every decided unit (the stream threshold learns from it)."""

    def _extra_state(self) -> dict[str, Any]:
        """A subclass's own JSON-able state, merged into :meth:`state_dict`."""
        return {}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        """Restore what :meth:`_extra_state` saved."""

    def _close(self, reason: CloseReason) -> Segment:
        o = self._open
        assert o is not None
        self._open = None
        return o.closed(reason, self.method)
