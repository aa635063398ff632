"""The semantic segmenter (boundary probability p_t) and the fixed-window baseline."""

from __future__ import annotations

from typing import Any

import numpy as np

from lychee_ray.ingest.segment.base import BaseSegmenter
from lychee_ray.ingest.segment.calibration import StreamThreshold, logit
from lychee_ray.ingest.segment.cues import lexical_novelty
from lychee_ray.ingest.segment.exchanges import _unit
from lychee_ray.ingest.segment.signals import calibrated_surprise, ramp, sigmoid
from lychee_ray.ingest.segment.types import Exchange
from lychee_ray.names import ExchangeMode, ROLE_MODE
from lychee_ray.config import SegmenterConfig
from lychee_ray.text.tokens import DEFAULT_ENCODING

# Surprise at or below this is float rounding on a repeated direction (an identical turn), not content.
_REPEAT_SURPRISE = 1e-6


class OnlineSegmenter(BaseSegmenter):
    """The semantic segmenter: cut when the boundary probability p_t exceeds the threshold.

    ``p_t = sigmoid(b + r_t + w_s*phi(s_t) + w_c*D_t + w_l*L_t + w_n*N_t + w_q*Q_t + w_a*A_t + w_x*X_t + w_h*H_t)``
    where ``r_t`` is the structural prior of the decision point: ``role_bias`` when, in ``role`` mode,
    the unit opens with a user turn (a new request: support dialogues shift topic there), else 0; and
    ``Q_t, A_t, X_t`` are the surface cues of :mod:`lychee_ray.ingest.segment.cues` (question, answer,
    lexical novelty; X_t counts as 0 for a unit without content words) and ``H_t`` the look-ahead (the
    next unit's cosine to this unit minus its cosine to the open segment's trajectory; in
    ``cues.ahead_modes`` only, where each unit is decided once the next one has arrived).
    """

    method = "semantic"

    def __init__(self, cfg: SegmenterConfig | None = None, *, mode: ExchangeMode | None = None, encoding: str = DEFAULT_ENCODING) -> None:
        super().__init__(cfg, mode=mode, encoding=encoding)
        self._calibration = StreamThreshold(self.cfg.calibration)
        self._z: float | None = None  # the logit of the unit being decided (for the stream threshold)
        self._pressure = 0.0  # the pressure part of that logit

    def _signals(self, ex: Exchange, ahead: np.ndarray | None = None) -> dict[str, float | None]:
        cfg, o = self.cfg, self._open
        assert o is not None
        lp = ramp(o.tokens, cfg.length_pressure)
        npr = ramp(o.n_turns, cfg.count_pressure)
        out: dict[str, float | None] = {"length_pressure": lp, "count_pressure": npr}
        if not ex.has_signal or o.vec_sum is None:
            return out  # no semantic evidence either way: never a semantic cut
        norm_sum = float(np.linalg.norm(o.vec_sum))
        trajectory = _unit(np.sum(o.recent, axis=0))
        cos_h = float(ex.vector @ trajectory)
        if cfg.surprise.reference == "max":  # the authors' form: the closer of centroid and trajectory
            cos_c = float(ex.vector @ o.vec_sum) / norm_sum if norm_sum > 0 else 0.0
            cos_h = max(cos_h, cos_c)
        s = 1.0 - cos_h
        coh_before = norm_sum / o.n_vec
        coh_after = float(np.linalg.norm(o.vec_sum + ex.vector)) / (o.n_vec + 1)
        d = max(0.0, coh_before - coh_after)
        phi = calibrated_surprise(s, self._surprises, cfg.surprise)
        prior = self._prior(ex, s)
        cues = cfg.cues
        # A cue counts only in the exchange modes it is gated to (cues.*_modes): a cue's meaning depends
        # on the unit (in role mode the answer cue is "the user answers the assistant's question").
        # Q_t is also gated on the stream's words per turn (cues.question_max_words; 0 = no gate).
        words = self._word_rate.mean()
        q_open = self.mode in cues.question_modes and self._word_rate.at_most(cues.question_max_words)
        q = 1.0 if ex.opener_question and q_open else 0.0
        a = 1.0 if self._last_question and self.mode in cues.answer_modes else 0.0
        x = lexical_novelty(ex.words, o.recent_words) if self.mode in cues.lexical_modes else None
        # H_t: does the next unit side with this one rather than with the open segment? (0 without a next unit)
        h = None
        if self.mode in cues.ahead_modes:
            h = 0.0 if ahead is None else float(ahead @ ex.vector) - float(ahead @ trajectory)
        z = (
            cfg.bias
            + prior
            + cfg.w_surprise * phi
            + cfg.w_cohesion * min(cfg.cohesion_max, d / cfg.cohesion_scale)
            + cfg.w_length * lp
            + cfg.w_count * npr
            + cues.w_question * q
            + cues.w_answer * a
            + cues.w_lexical * (x or 0.0)
            + cues.w_ahead * (h or 0.0)
        )
        # The stream threshold moves the cut point; p_t is reported against the configured threshold
        # (p_t > threshold <=> z_t > the calibrated logit threshold), so the trace reads as before.
        fixed = logit(cfg.threshold)
        self._z, self._pressure = z, cfg.w_length * lp + cfg.w_count * npr
        p = sigmoid(z - self._calibration.threshold(fixed) + fixed)
        out.update(surprise=s, phi=phi, cohesion_drop=d, prior=prior, question=q, words_per_turn=words, answer=a,
                   lexical_novelty=x, ahead=h, p=p)
        return out

    def _observe(self, ex: Exchange, sig: dict[str, float | None]) -> None:
        self._calibration.observe(self._z, self._pressure, len({r.position for r in ex.turns}))
        self._z, self._pressure = None, 0.0

    def _extra_state(self) -> dict[str, Any]:
        return {"calibration": self._calibration.state_dict()}

    def _load_extra_state(self, state: dict[str, Any]) -> None:
        self._calibration.load(state.get("calibration"))

    def _prior(self, ex: Exchange, s: float) -> float:
        """Structural log-odds of a boundary at this decision point (from roles, not from a corpus).

        A unit that repeats the open segment's direction (surprise at rounding level) says nothing new,
        so it gets no prior: identical turns stay together in every mode.
        """
        if s <= _REPEAT_SURPRISE:
            return 0.0
        return self.cfg.role_bias if self.mode == ROLE_MODE and ex.opener_role == "user" else 0.0

    def _wants_cut(self, sig: dict[str, float | None]) -> bool:
        p = sig.get("p")
        return p is not None and p > self.cfg.threshold


class FixedWindowSegmenter(BaseSegmenter):
    """Baseline/ablation: a segment every ``fixed_window`` exchanges (same cap and session rules).

    Its trace records the open segment's exchange count in ``count_pressure`` and no other signal.
    """

    method = "fixed"

    def _signals(self, ex: Exchange, ahead: np.ndarray | None = None) -> dict[str, float | None]:
        assert self._open is not None
        return {"count_pressure": float(self._open.n_exchanges)}

    def _wants_cut(self, sig: dict[str, float | None]) -> bool:
        return (sig["count_pressure"] or 0) >= self.cfg.fixed_window



def make_segmenter(
    cfg: SegmenterConfig | None = None, *, mode: ExchangeMode | None = None, encoding: str = DEFAULT_ENCODING
) -> BaseSegmenter:
    """The segmenter named by ``cfg.method`` (``semantic`` or ``fixed``)."""
    cfg = cfg or SegmenterConfig.model_validate({})  # every key at its default
    cls = OnlineSegmenter if cfg.method == "semantic" else FixedWindowSegmenter
    return cls(cfg, mode=mode, encoding=encoding)
