"""The decision's signal helpers: logistic, pressure ramps and the calibrated surprise phi(s)."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from lychee_ray.config import PressureConfig, SurpriseConfig


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

