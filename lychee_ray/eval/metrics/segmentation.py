"""Segmentation quality metrics: Pk, WindowDiff and boundary F1 (exact and with a tolerance).

A segmentation of ``n`` units is given as segment lengths (``[4, 2, 2, 8]``, summing to ``n``).
Internally it becomes a boundary string of length ``n`` in NLTK's convention: position ``i`` is
``"1"`` when a segment ends after unit ``i`` (the end of the text is not a boundary). ``pk`` and
``windowdiff`` here give exactly the values of ``nltk.metrics.segmentation.pk/windowdiff`` on those
strings (tested), without importing NLTK.

Corpus figures (:func:`evaluate_corpus`): Pk and WindowDiff are computed per dialogue with
``k = max(min_k, round_half_up(gold mean segment length / 2))`` (capped at the dialogue length) and
averaged over dialogues; boundary F1 is micro-averaged (true positives, predicted and gold boundary
counts are summed over the corpus, so long and short dialogues weigh by their boundaries).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

DEFAULT_MIN_K = 2  # smallest window: k = 1 would make Pk a plain boundary-disagreement rate
Z_95 = 1.959964  # two-sided 95 % normal quantile: the paired intervals are mean ± Z_95 · paired SE


def lengths_to_boundaries(lengths: Sequence[int]) -> list[int]:
    """Indices of the units after which a segment ends, end of text excluded: [4, 2] -> [3]."""
    if any(n <= 0 for n in lengths):
        raise ValueError(f"segment lengths must be positive: {list(lengths)}")
    out, pos = [], 0
    for n in lengths[:-1]:
        pos += n
        out.append(pos - 1)
    return out


def boundary_string(lengths: Sequence[int]) -> str:
    """NLTK-style ``"0"/"1"`` string of length ``sum(lengths)``: [2, 3] -> "01000"."""
    n = sum(lengths)
    marks = ["0"] * n
    for b in lengths_to_boundaries(lengths):
        marks[b] = "1"
    return "".join(marks)


def _check(ref: str, hyp: str, k: int) -> None:
    if len(ref) != len(hyp):
        raise ValueError(f"segmentations have unequal length: {len(ref)} vs {len(hyp)}")
    if k < 1 or k > len(ref):
        raise ValueError(f"window k={k} must lie in 1..{len(ref)}")


def pk(ref: str, hyp: str, k: int, boundary: str = "1") -> float:
    """Pk (Beeferman et al. 1999): share of windows where ref and hyp disagree on 'any boundary'."""
    _check(ref, hyp, k)
    windows = len(ref) - k + 1
    err = sum((boundary in ref[i : i + k]) != (boundary in hyp[i : i + k]) for i in range(windows))
    return err / windows


def windowdiff(ref: str, hyp: str, k: int, boundary: str = "1") -> float:
    """WindowDiff (Pevzner & Hearst 2002): share of windows whose boundary counts differ."""
    _check(ref, hyp, k)
    windows = len(ref) - k + 1
    err = sum(ref[i : i + k].count(boundary) != hyp[i : i + k].count(boundary) for i in range(windows))
    return err / windows


@dataclass(frozen=True)
class BoundaryCounts:
    """Matched (true positive), predicted and gold boundary counts; sums over a corpus."""

    tp: int = 0
    n_hyp: int = 0
    n_ref: int = 0

    def __add__(self, other: BoundaryCounts) -> BoundaryCounts:
        return BoundaryCounts(self.tp + other.tp, self.n_hyp + other.n_hyp, self.n_ref + other.n_ref)

    @property
    def precision(self) -> float:
        return self.tp / self.n_hyp if self.n_hyp else 0.0

    @property
    def recall(self) -> float:
        return self.tp / self.n_ref if self.n_ref else 0.0

    @property
    def f1(self) -> float:
        """Harmonic mean of precision and recall; 1.0 when neither side has a boundary."""
        if self.n_hyp == 0 and self.n_ref == 0:
            return 1.0
        p, r = self.precision, self.recall
        return 2 * p * r / (p + r) if p + r else 0.0


def match_boundaries(ref: Sequence[int], hyp: Sequence[int], tolerance: int = 0) -> BoundaryCounts:
    """One-to-one matching of boundary positions within ``tolerance`` units.

    Exact matches are taken first; then each remaining gold boundary (left to right) takes the
    closest unmatched predicted one within the tolerance (the left one on a tie).
    """
    hyp_left = set(hyp)
    tp = 0
    rest = []
    for b in ref:
        if b in hyp_left:
            hyp_left.remove(b)
            tp += 1
        else:
            rest.append(b)
    for b in rest:
        for dist in range(1, tolerance + 1):
            hit = next((c for c in (b - dist, b + dist) if c in hyp_left), None)
            if hit is not None:
                hyp_left.remove(hit)
                tp += 1
                break
    return BoundaryCounts(tp, len(set(hyp)), len(set(ref)))


def window_k(gold_lengths: Sequence[int], min_k: int = DEFAULT_MIN_K) -> int:
    """Half the gold mean segment length, rounded half up, at least ``min_k``, at most the length."""
    n = sum(gold_lengths)
    half_mean = n / len(gold_lengths) / 2
    return max(1, min(n, max(min_k, math.floor(half_mean + 0.5))))


def _std_error(xs: Sequence[float]) -> float:
    """Standard error of the mean (0 for fewer than two values)."""
    n = len(xs)
    if n < 2:
        return 0.0
    m = sum(xs) / n
    return math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1) / n)


def per_dialogue_scores(
    gold: Sequence[Sequence[int]], hyp: Sequence[Sequence[int]], min_k: int = DEFAULT_MIN_K
) -> dict[str, list[float]]:
    """Pk and WindowDiff of every dialogue (``{"pk": [...], "windowdiff": [...]}``), as averaged by
    :func:`evaluate_corpus`; the input of the paired comparisons."""
    if len(gold) != len(hyp):
        raise ValueError(f"{len(gold)} gold dialogues vs {len(hyp)} hypotheses")
    pks, wds = [], []
    for g, h in zip(gold, hyp, strict=False):
        if sum(g) != sum(h):
            raise ValueError(f"gold covers {sum(g)} units, hypothesis {sum(h)}")
        rs, hs, k = boundary_string(g), boundary_string(h), window_k(g, min_k)
        pks.append(pk(rs, hs, k))
        wds.append(windowdiff(rs, hs, k))
    return {"pk": pks, "windowdiff": wds}


def paired_difference(a: Sequence[float], b: Sequence[float], z: float = Z_95) -> dict[str, float]:
    """Mean of the per-dialogue differences ``a - b`` with its paired standard error and the interval
    ``mean ± z · SE`` (95 % by default; normal approximation, the corpora have 100+ dialogues).

    Pairing removes the between-dialogue variance both systems share (a hard dialogue is hard for
    both), so the interval is much narrower than the two corpus standard errors together.
    """
    if len(a) != len(b) or not a:
        raise ValueError(f"paired difference needs equal, non-empty samples ({len(a)} vs {len(b)})")
    d = [x - y for x, y in zip(a, b, strict=False)]
    mean, se = sum(d) / len(d), _std_error(d)
    return {"mean": mean, "se": se, "ci95_low": mean - z * se, "ci95_high": mean + z * se}


DEFAULT_RESAMPLES = 2000  # paired bootstrap resamples (the 2.5 / 97.5 percentiles are stable to ~0.002 at this count)


def paired_bootstrap(
    a: Sequence[float], b: Sequence[float], resamples: int = DEFAULT_RESAMPLES, seed: int = 0, level: float = 0.95
) -> dict[str, float]:
    """Mean of the per-dialogue differences ``a - b`` with a paired bootstrap percentile interval.

    Dialogues are resampled with replacement (the same draw for both systems, so what they share
    cancels); the interval is the ``(1 - level) / 2`` and ``(1 + level) / 2`` percentiles of the
    resampled means. Deterministic given ``seed``. Makes no normality assumption, which matters for
    the smaller derived corpora (tens of streams).
    """
    if len(a) != len(b) or len(a) == 0:
        raise ValueError(f"paired bootstrap needs equal, non-empty samples ({len(a)} vs {len(b)})")
    if resamples < 1 or not 0 < level < 1:
        raise ValueError(f"bad bootstrap settings: resamples={resamples}, level={level}")
    d = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(resamples, len(d)))].mean(axis=1)
    lo, hi = np.percentile(means, [50 * (1 - level), 50 * (1 + level)])
    return {"mean": float(d.mean()), "boot_low": float(lo), "boot_high": float(hi)}


def evaluate_corpus(
    gold: Sequence[Sequence[int]], hyp: Sequence[Sequence[int]], min_k: int = DEFAULT_MIN_K
) -> dict[str, float]:
    """Pk, WindowDiff (averaged over dialogues, with standard errors), boundary F1 exact and ±1
    (micro), precision, recall and mean length.

    ``gold`` and ``hyp`` hold one list of segment lengths per dialogue; each pair must cover the
    same number of units. ``mean_segment_len`` is the hypothesis' units per segment over the corpus.
    """
    if len(gold) != len(hyp):
        raise ValueError(f"{len(gold)} gold dialogues vs {len(hyp)} hypotheses")
    if not gold:
        raise ValueError("empty corpus")
    scores = per_dialogue_scores(gold, hyp, min_k)
    pks, wds = scores["pk"], scores["windowdiff"]
    exact, tol1 = BoundaryCounts(), BoundaryCounts()
    units = segments = 0
    for g, h in zip(gold, hyp, strict=False):
        rb, hb = lengths_to_boundaries(g), lengths_to_boundaries(h)
        exact += match_boundaries(rb, hb, 0)
        tol1 += match_boundaries(rb, hb, 1)
        units += sum(h)
        segments += len(h)
    return {
        "pk": sum(pks) / len(pks),
        "windowdiff": sum(wds) / len(wds),
        "pk_se": _std_error(pks),
        "windowdiff_se": _std_error(wds),
        "f1": exact.f1,
        "f1_tol1": tol1.f1,
        "precision": exact.precision,
        "recall": exact.recall,
        "mean_segment_len": units / segments,
    }
