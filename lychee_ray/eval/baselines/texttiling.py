"""Embedding TextTiling for eval-seg: the standard method, and the same told the true boundary count.

TextTiling (Hearst 1997) on sentence embeddings: the coherence at the gap after unit ``i`` is the
cosine between the mean vector of the ``window`` units before it and of the ``window`` units after it;
a gap's depth is how far its coherence lies below the nearest peaks on either side. Given the true
number of boundaries ``m`` of a dialogue (which no deployed segmenter knows: hence "oracle"), the ``m``
deepest gaps are the boundaries. It looks at the whole dialogue (both sides of every gap), so it is a
ceiling for unsupervised offline methods rather than a competitor of an online one.

Without the count, standard TextTiling keeps the valleys of the coherence curve whose depth exceeds
Hearst's cut-off ``mean - sd / 2`` of the dialogue's valley depths (:func:`texttiling_hearst`): an
offline, two-sided, unsupervised competitor told nothing about the gold.
"""

from __future__ import annotations

import numpy as np

DEFAULT_WINDOW = 2  # units on each side of a gap (dialogue turns are short; 2 smooths one-word replies)
HEARST_CUTOFF_SD = 0.5  # Hearst (1997): a valley is a boundary when its depth > mean - 0.5 sd of the valley depths


def gap_coherence(vectors: np.ndarray, window: int = DEFAULT_WINDOW) -> np.ndarray:
    """Cosine between the mean of the ``window`` units before each gap and the ``window`` after it."""
    v = np.asarray(vectors, dtype=np.float64)
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    v = np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)
    out = np.zeros(max(0, len(v) - 1))
    for i in range(len(out)):
        left = v[max(0, i + 1 - window) : i + 1].sum(axis=0)
        right = v[i + 1 : i + 1 + window].sum(axis=0)
        den = float(np.linalg.norm(left) * np.linalg.norm(right))
        out[i] = float(left @ right) / den if den > 0 else 0.0
    return out


def depth_scores(coherence: np.ndarray) -> np.ndarray:
    """Hearst's depth: (left peak - c) + (right peak - c), climbing while the coherence rises."""
    c = np.asarray(coherence, dtype=np.float64)
    out = np.zeros_like(c)
    for i in range(len(c)):
        left = i
        while left > 0 and c[left - 1] >= c[left]:
            left -= 1
        right = i
        while right < len(c) - 1 and c[right + 1] >= c[right]:
            right += 1
        out[i] = (c[left] - c[i]) + (c[right] - c[i])
    return out


def _lengths(n: int, gaps: list[int]) -> list[int]:
    """Segment lengths of ``n`` units cut after each gap index in ``gaps`` (sorted)."""
    lengths, prev = [], -1
    for g in gaps:
        lengths.append(g - prev)
        prev = g
    lengths.append(n - 1 - prev)
    return lengths


def texttiling_hearst(vectors: np.ndarray, window: int = DEFAULT_WINDOW, cutoff_sd: float = HEARST_CUTOFF_SD) -> list[int]:
    """Standard TextTiling (not told the count): valleys deeper than ``mean - cutoff_sd * sd`` of the valley depths."""
    n = len(vectors)
    c = gap_coherence(vectors, window)
    if len(c) == 0:
        return [n]
    depth = depth_scores(c)
    # Hearst scores valleys only: a gap on a slope has a depth too, but it is not a boundary candidate.
    valley = np.array([(i == 0 or c[i - 1] >= c[i]) and (i == len(c) - 1 or c[i + 1] >= c[i]) for i in range(len(c))])
    vals = depth[valley]
    cutoff = float(vals.mean() - cutoff_sd * vals.std())
    return _lengths(n, np.flatnonzero(valley & (depth > cutoff) & (depth > 0)).tolist())


def texttiling_oracle(vectors: np.ndarray, num_boundaries: int, window: int = DEFAULT_WINDOW) -> list[int]:
    """Segment lengths with exactly ``num_boundaries`` boundaries at the deepest gaps (earlier gap on ties)."""
    n = len(vectors)
    m = max(0, min(num_boundaries, n - 1))
    if m == 0:
        return [n]
    depth = depth_scores(gap_coherence(vectors, window))
    return _lengths(n, sorted(np.argsort(-depth, kind="stable")[:m].tolist()))
