"""Channel (c): items whose time overlaps the route's time constraint, closest first."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date

import numpy as np

from lychee_ray.config import RecallConfig
from lychee_ray.core.records import TimeSpan
from lychee_ray.query.hits import Hit
from lychee_ray.query.plan.model import Route
from lychee_ray.query.view import ConversationView, day_ordinal


def time_bounds(span: TimeSpan | None) -> tuple[int, int] | None:
    """A constraint's (start, end) day ordinals; open ends become the far past/future."""
    if span is None or not (span.start or span.end):
        return None
    a, b = day_ordinal(span.start), day_ordinal(span.end)
    return (a if a is not None else 1, b if b is not None else date.max.toordinal())


def _gaps(lo: np.ndarray, hi: np.ndarray, c_lo: int, c_hi: int) -> np.ndarray:
    """Days between each [lo, hi] span and the constraint [c_lo, c_hi] (0 = overlap)."""
    return np.where(hi < c_lo, c_lo - hi, np.where(lo > c_hi, lo - c_hi, 0))


def recall_time(
    view: ConversationView, qvecs: np.ndarray, constraint: TimeSpan | None, depth: int,
    slack_days: int = 0, use_session_date: bool = True, include_turns: bool = True,
) -> list[Hit]:
    """(c) Items whose time overlaps the constraint: closest first, then most similar.

    Records match by their content time; with ``use_session_date`` also by their session date
    (what was said in a period is often about it, and questions like "what did X show on
    13 Oct?" name the day it was said) — ranked after content-time matches at the same distance.
    With ``include_turns`` raw turns match by their session date too. Closeness = days between
    the item's span and the constraint (0 when they overlap); items within ``slack_days`` are kept.
    """
    bounds = time_bounds(constraint)
    if bounds is None or depth <= 0:
        return []
    c_lo, c_hi = bounds
    gap_content = _gaps(view.rec_lo, view.rec_hi, c_lo, c_hi)
    tier = np.zeros(view.num_records, dtype=np.int64)
    gap = gap_content
    if use_session_date:
        gap_said = _gaps(view.rec_said, view.rec_said, c_lo, c_hi)
        tier = (gap_said < gap_content).astype(np.int64)
        gap = np.minimum(gap_content, gap_said)
    rec = np.flatnonzero(gap <= slack_days)
    turn = np.flatnonzero(_gaps(view.turn_said, view.turn_said, c_lo, c_hi) <= slack_days) if include_turns else np.zeros(0, np.int64)
    if len(rec) + len(turn) == 0:
        return []
    vecs = np.concatenate([view.record_vecs[rec], view.turn_vecs[turn]])
    sims = (vecs @ qvecs.T).max(axis=1) if len(qvecs) else np.zeros(len(vecs), dtype=np.float32)
    gaps = np.concatenate([gap[rec], _gaps(view.turn_said[turn], view.turn_said[turn], c_lo, c_hi)])
    tiers = np.concatenate([tier[rec], np.ones(len(turn), dtype=np.int64)])
    order = np.lexsort((-sims, tiers, gaps))[:depth]
    n_rec = len(rec)
    out = []
    for j in order.tolist():
        if j < n_rec:
            out.append(Hit("record", view.record_ids[rec[j]], 1.0 / (1 + gaps[j]) + float(sims[j])))
        else:
            out.append(Hit("turn", view.turn_ids[turn[j - n_rec]], 1.0 / (1 + gaps[j]) + float(sims[j])))
    return out


@dataclass(frozen=True)
class TimeOverlap:
    """(c) The time filter: applies to routes with a time constraint (an empty list otherwise)."""

    name: str = "time"
    depth_keys: tuple[str, ...] = ("time_depth",)

    def recall(self, view: ConversationView, route: Route, qvecs: np.ndarray, cfg: RecallConfig) -> list[Hit]:
        if route.time is None:
            return []
        return recall_time(view, qvecs, route.time, cfg.time_depth, cfg.time_slack_days, cfg.time_use_session_date,
                           cfg.time_include_turns)


__all__ = ["TimeOverlap", "recall_time", "time_bounds"]
