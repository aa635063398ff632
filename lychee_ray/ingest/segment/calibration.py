"""The cut threshold calibrated from the stream itself, without gold labels (docs/segmenter.md §3).

The fixed rule cuts when the decision logit ``z_t`` exceeds ``logit(threshold)``: its cut rate is
whatever the logit's distribution on a stream makes it, and that distribution shifts between corpora
(cue base rates, embedding spread). The stream rule instead cuts the units whose evidence lies in the
top ``rho`` of the stream's recent evidence, where ``rho`` follows from a segment-length prior set in
the configuration: ``rho = (turns per unit, measured on this stream) / segment_turns`` — about one cut
per ``segment_turns`` turns, placed where this stream's own evidence is strongest. The evidence is the
logit without the length/count pressures (which grow with the open segment and fall after every cut:
ranking them would push the cuts apart); the pressures still add to the decision, against their
recent mean: stream threshold = ``quantile(evidence, 1 - rho) + mean(pressure)`` (``kind: quantile``).

``kind: robust`` calibrates the scale instead of the rate: stream threshold = ``median(evidence) +
spread * 1.4826 * MAD(evidence) + mean(pressure)`` — cut a unit whose evidence is ``spread`` robust
standard deviations above what is typical *in this stream* (the robust z-score the surprise already
gets, applied to the whole logit). The rate then follows the stream's own tail: a stream of long topics
has few outliers and is cut rarely; the length/count pressures remain the segment-length prior.

The threshold used is the blend ``(1 - blend) * fixed + blend * stream`` (``blend: 0`` = the fixed rule). A per-unit
quantile makes the rule adapt to the stream's exchange mode (a ``pair`` or ``role`` unit holds about
two turns) and to the scale of its scores, but not to a corpus' topic granularity: MiniLM's signals do
not reveal it (docs/segmenter.md §5.1), which is why the prior is configuration.

The state (recent logits, the turn and unit counts) is JSON-able and survives ``new_stream()``,
like the surprise history.
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

import numpy as np

from lychee_ray.config import CalibrationConfig

MAD_TO_SIGMA = 1.4826  # median absolute deviation -> standard deviation of normal data (a constant of the normal law)


def logit(p: float) -> float:
    """log(p / (1 - p)) for 0 < p < 1."""
    return math.log(p / (1.0 - p))


class StreamThreshold:
    """Running calibration of the cut threshold on one stream (see the module docstring)."""

    def __init__(self, cfg: CalibrationConfig) -> None:
        self.cfg = cfg
        self.scores: deque[float] = deque(maxlen=cfg.window)  # evidence: logit minus the pressures
        self.pressures: deque[float] = deque(maxlen=cfg.window)
        self.turns = 0  # turns in the units decided so far (the turns-per-unit estimate)
        self.units = 0

    @property
    def active(self) -> bool:
        """Whether the stream part takes part in the threshold (blend > 0 and enough history)."""
        return self.cfg.blend > 0 and len(self.scores) >= self.cfg.min_history

    def rate(self) -> float:
        """rho: the share of units the stream rule cuts."""
        per_unit = self.turns / self.units if self.units else 1.0
        return min(self.cfg.max_rate, per_unit / self.cfg.segment_turns)

    def threshold(self, fixed: float) -> float:
        """The logit threshold: the fixed one blended with the stream's (1 - rho) quantile."""
        if not self.active:
            return fixed
        ev = np.fromiter(self.scores, dtype=np.float64)
        if self.cfg.kind == "robust":
            med = float(np.median(ev))
            sigma = max(self.cfg.mad_floor, float(np.median(np.abs(ev - med))) * MAD_TO_SIGMA)
            q = med + self.cfg.spread * sigma
        else:
            q = float(np.quantile(ev, 1.0 - self.rate()))
        stream = q + float(np.mean(np.fromiter(self.pressures, dtype=np.float64)))
        return (1.0 - self.cfg.blend) * fixed + self.cfg.blend * stream

    def observe(self, z: float | None, pressure: float, turns: int) -> None:
        """Record a decided unit: its logit (None for a unit without a decision), the pressure part of
        that logit, and the unit's turn count."""
        self.turns += turns
        self.units += 1
        if z is not None:
            self.scores.append(float(z) - pressure)
            self.pressures.append(float(pressure))

    def state_dict(self) -> dict[str, Any]:
        return {"scores": list(self.scores), "pressures": list(self.pressures), "turns": self.turns, "units": self.units}

    def load(self, state: dict[str, Any] | None) -> None:
        """Restore :meth:`state_dict` output (None = a stream saved before calibration existed)."""
        if not state:
            return
        self.scores.extend(float(s) for s in state.get("scores", []))
        self.pressures.extend(float(s) for s in state.get("pressures", []))
        self.turns = int(state.get("turns", 0))
        self.units = int(state.get("units", 0))
