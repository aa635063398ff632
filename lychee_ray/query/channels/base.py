"""What a recall channel is (DESIGN §1 step 5), and the search helpers the vector channels share.

A channel takes a :class:`~lychee_ray.query.view.ConversationView`, one route of the plan (its
search texts already embedded as ``qvecs``) and the recall section of the configuration, and
returns a ranked list of :class:`~lychee_ray.query.hits.Hit`. Its ``name`` keys its ranked lists
in fusion, its weight (``query.fusion.weights.<name>``) and the provenance of every fused item.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from lychee_ray.config import RecallConfig
from lychee_ray.query.hits import Hit
from lychee_ray.query.plan.model import Route
from lychee_ray.query.view import ConversationView


class RecallChannel(Protocol):
    """One recall channel; registered in :mod:`lychee_ray.query.channels`."""

    # read-only properties: the channels are frozen dataclasses (a plain attribute here would ask
    # for a settable one)
    @property
    def name(self) -> str:
        """Its ranked lists' channel name, and its key under query.fusion.weights."""
        ...

    @property
    def depth_keys(self) -> tuple[str, ...]:
        """The query.recall keys that bound its depth (all 0 = the channel is off: evaluation
        variants switch channels off by them)."""
        ...

    def recall(self, view: ConversationView, route: Route, qvecs: np.ndarray, cfg: RecallConfig) -> list[Hit]:
        """The route's items in this channel, best first (an empty list when it does not apply)."""
        ...


def faiss_search(index, qvecs: np.ndarray, depth: int, ntotal: int) -> dict[int, float]:
    """Best score per row position over all query vectors."""
    k = min(depth, ntotal)
    if k <= 0 or len(qvecs) == 0:
        return {}
    scores, ids = index.search(np.ascontiguousarray(qvecs, dtype=np.float32), k)
    best: dict[int, float] = {}
    for row_s, row_i in zip(scores, ids, strict=False):
        for s, i in zip(row_s, row_i, strict=False):
            if i >= 0 and s > best.get(int(i), -np.inf):
                best[int(i)] = float(s)
    return best


# a channel ranking passages asks its index for this many times its depth: after keeping the best
# passage of each turn, ``depth`` items are left (a long turn has several passages near a query)
PASSAGE_DEPTH_FACTOR = 3


def one_per_turn(view: ConversationView, hits: list[Hit], depth: int) -> list[Hit]:
    """``hits`` with only the best passage of each long turn (the turn is the unit a list ranks: a
    turn of many matching passages takes one place, as a short turn does), at most ``depth``."""
    seen: set[int] = set()
    out: list[Hit] = []
    for h in hits:
        if h.kind == "passage":
            tp = view.passage_turn(view.passage_pos[h.id])
            if tp in seen:
                continue
            seen.add(tp)
        out.append(h)
        if len(out) >= depth:
            break
    return out


def ranked(best: dict[int, float], depth: int) -> list[tuple[int, float]]:
    """The ``depth`` best (position, score) pairs, score descending, ties by position."""
    return sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))[:depth]


__all__ = ["PASSAGE_DEPTH_FACTOR", "RecallChannel", "faiss_search", "one_per_turn", "ranked"]
