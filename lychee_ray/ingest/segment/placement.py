"""Turn-level placement of a semantic cut: the off-by-one of pair units (docs/segmenter.md §3.4).

The decision is taken per unit, but a topic does not have to start at a unit's first turn: with
``pair`` units a topic that starts at a pair's second turn can only be cut one turn early (before the
pair) or one turn late (before the next pair). When a cut fires before a unit, three gaps compete:

* ``-1``: before the open segment's last turn (that turn opens the new topic, the unit continues it);
* ``0``: before the unit (the default);
* ``+1``: inside the unit, after its first turn (the first turn still closes the old topic).

Each gap is scored by the cosine between the mean of the (centred) turn vectors on its left and on its
right, at most ``window`` turns each and never past the unit (no look-ahead): the least coherent gap is
the boundary, as in TextTiling's depth. A neighbour wins only when it is less coherent than the unit's
own gap by more than ``margin``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

SHIFTS = (-1, 0, 1)


def _mean_direction(vectors: Sequence[np.ndarray]) -> np.ndarray | None:
    """Normalised sum of the vectors that carry signal; None when none does."""
    acc: np.ndarray | None = None
    for v in vectors:
        if np.any(v):
            acc = v.copy() if acc is None else acc + v
    if acc is None:
        return None
    n = float(np.linalg.norm(acc))
    return acc / n if n > 0 else None


def gap_coherence(left: Sequence[np.ndarray], right: Sequence[np.ndarray]) -> float | None:
    """Cosine between the mean directions of ``left`` and ``right``; None when a side has no signal."""
    a, b = _mean_direction(left), _mean_direction(right)
    if a is None or b is None:
        return None
    return float(a @ b)


def choose_shift(
    before: Sequence[np.ndarray],
    unit: Sequence[np.ndarray],
    window: int,
    margin: float,
    *,
    allow_back: bool,
) -> tuple[int, dict[int, float]]:
    """The gap a cut before ``unit`` should use: -1, 0 or +1 turns (see the module docstring).

    ``before``: turn vectors of the open segment's last turns (oldest first); ``unit``: the unit's turn
    vectors. ``allow_back`` says whether the open segment's last turn may move (it must be a whole turn
    and not the segment's only one). Returns the shift and the coherence of every candidate gap.
    """
    seq = list(before) + list(unit)
    here = len(before)  # index in seq of the unit's first turn
    cands = {0: here}
    if allow_back and len(before) >= 2:
        cands[-1] = here - 1
    if len(unit) >= 2:
        cands[1] = here + 1
    scores: dict[int, float] = {}
    for shift, g in cands.items():
        c = gap_coherence(seq[max(0, g - window) : g], seq[g : g + window])
        if c is not None:
            scores[shift] = c
    if 0 not in scores:
        return 0, scores
    best = min(scores, key=lambda k: (scores[k], abs(k)))
    return (best, scores) if scores[best] < scores[0] - margin else (0, scores)
