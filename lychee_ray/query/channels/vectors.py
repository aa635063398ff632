"""Channels (a) and (d): records and raw turns nearest to a route's search texts (FAISS).

A route with several search texts searches with all of them; an item's score is its best one. A
long turn is searched by its passages (query/view_passages.py): channel (d) ranks raw turns and
passages together, by the cosine of their vectors, one place per turn (its best passage), and
leaves out the vector of a turn that has passages (it sees only the embedder's window, which its
first passage covers).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lychee_ray.config import RecallConfig
from lychee_ray.query.channels.base import PASSAGE_DEPTH_FACTOR, faiss_search, one_per_turn, ranked
from lychee_ray.query.hits import Hit
from lychee_ray.query.plan.model import Route
from lychee_ray.query.view import ConversationView


def recall_records(view: ConversationView, qvecs: np.ndarray, depth: int) -> list[Hit]:
    """(a) Records nearest to the route's search texts."""
    best = faiss_search(view.record_index, qvecs, depth, view.num_records)
    return [Hit("record", view.record_ids[i], s) for i, s in ranked(best, depth)]


def recall_turns(view: ConversationView, qvecs: np.ndarray, depth: int) -> list[Hit]:
    """(d) Raw turns and passages of long turns nearest to the route's search texts."""
    split = view.turn_passages
    # deep enough that ``depth`` turns are left once the turns with passages are dropped
    best = faiss_search(view.turn_index, qvecs, depth + len(split), view.num_turns)
    turns = [(s, 0, i) for i, s in best.items() if i not in split]
    passages: list[tuple[float, int, int]] = []
    if view.num_passages and view.passage_index is not None:
        # deep enough for ``depth`` turns when each has several passages among the nearest
        pbest = faiss_search(view.passage_index, qvecs, PASSAGE_DEPTH_FACTOR * depth, view.num_passages)
        passages = [(s, 1, i) for i, s in pbest.items() if view.passages.turn[i] >= 0]
    merged = sorted(turns + passages, key=lambda x: (-x[0], x[1], x[2]))
    return one_per_turn(view, [Hit("turn", view.turn_ids[i], s) if k == 0 else Hit("passage", view.passages.ids[i], s)
                               for s, k, i in merged], depth)


@dataclass(frozen=True)
class RecordVectors:
    """(a) Record vectors."""

    name: str = "records"
    depth_keys: tuple[str, ...] = ("record_depth",)

    def recall(self, view: ConversationView, route: Route, qvecs: np.ndarray, cfg: RecallConfig) -> list[Hit]:
        return recall_records(view, qvecs, cfg.record_depth)


@dataclass(frozen=True)
class TurnVectors:
    """(d) Raw turn vectors."""

    name: str = "turns"
    depth_keys: tuple[str, ...] = ("turn_depth",)

    def recall(self, view: ConversationView, route: Route, qvecs: np.ndarray, cfg: RecallConfig) -> list[Hit]:
        return recall_turns(view, qvecs, cfg.turn_depth)


__all__ = ["RecordVectors", "TurnVectors", "recall_records", "recall_turns"]
