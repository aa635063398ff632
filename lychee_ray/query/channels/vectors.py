"""Channels (a) and (d): records and raw turns nearest to a route's search texts (FAISS).

A route with several search texts searches with all of them; an item's score is its best one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lychee_ray.config import RecallConfig
from lychee_ray.query.channels.base import faiss_search, ranked
from lychee_ray.query.hits import Hit
from lychee_ray.query.plan.model import Route
from lychee_ray.query.view import ConversationView


def recall_records(view: ConversationView, qvecs: np.ndarray, depth: int) -> list[Hit]:
    """(a) Records nearest to the route's search texts."""
    best = faiss_search(view.record_index, qvecs, depth, view.num_records)
    return [Hit("record", view.record_ids[i], s) for i, s in ranked(best, depth)]


def recall_turns(view: ConversationView, qvecs: np.ndarray, depth: int) -> list[Hit]:
    """(d) Raw turns nearest to the route's search texts."""
    best = faiss_search(view.turn_index, qvecs, depth, view.num_turns)
    return [Hit("turn", view.turn_ids[i], s) for i, s in ranked(best, depth)]


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
