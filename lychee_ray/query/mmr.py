"""The greedy MMR loop both selections run (``query.select.units`` turns and items).

At each step the live candidate with the best ``λ·gain − (1−λ)·redundancy`` is offered to the
selection (``place``); redundancy is the candidate's highest cosine similarity to what is selected
(and whatever the selection adds to it). A candidate the selection rejects leaves the pool (the
next best is offered without recomputing: a rejection changes nothing the scores depend on); one it
places updates the similarities and a new round starts. The loop ends when no candidate is left,
or ``stop`` says so.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

# (placed, stays a candidate): a candidate can be placed and stay (a turn shown through one of its
# records may be picked again for its next one)
Placed = tuple[bool, bool]


def greedy_mmr(
    gain: np.ndarray,
    vecs: np.ndarray,
    lam: float,
    place: Callable[[int], Placed],
    *,
    redundancy: Callable[[np.ndarray], np.ndarray] | None = None,
    prune: Callable[[np.ndarray], None] | None = None,
    stop: Callable[[], bool] | None = None,
) -> None:
    """Offer candidates to ``place`` in greedy MMR order until none is left.

    ``gain``: each candidate's gain (read every round: ``place`` may lower it in place); ``vecs``:
    unit vectors (cosine = dot product); ``redundancy(max_sim)``: the redundancy term from the
    similarities (default: themselves); ``prune(alive)``: called each round before scoring, clears
    candidates that can never be placed any more; ``stop()``: checked before each round.
    """
    n = len(gain)
    max_sim = np.zeros(n, dtype=np.float64)
    alive = np.ones(n, dtype=bool)
    while alive.any() and not (stop is not None and stop()):
        if prune is not None:
            prune(alive)
        red = max_sim if redundancy is None else redundancy(max_sim)
        mmr = lam * gain - (1 - lam) * red
        mmr[~alive] = -np.inf
        while True:  # best candidate first; rejected ones leave the pool for good
            i = int(np.argmax(mmr))
            if mmr[i] == -np.inf:
                return
            mmr[i] = -np.inf
            placed, keep = place(i)
            alive[i] = keep
            if placed:
                max_sim = np.maximum(max_sim, vecs @ vecs[i])
                break


__all__ = ["Placed", "greedy_mmr"]
