"""Channels (e) and (f): lexical BM25 (names and numbers need it; vector search misses them).

(e) searches record and turn texts together; (f) the raw turns alone — with (d) it is the hybrid
turn RAG baseline inside the method: a corpus of turns only keeps the turns' own term statistics
(records would dilute them), so lychee's fusion always contains that ranking. The indexes are built
with the view (:mod:`lychee_ray.query.bm25`); the query is the route's search texts plus its
entity and topic words.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lychee_ray.config import RecallConfig
from lychee_ray.query.bm25 import BM25Index
from lychee_ray.query.channels.base import PASSAGE_DEPTH_FACTOR, one_per_turn
from lychee_ray.query.hits import Hit
from lychee_ray.query.plan.model import Route
from lychee_ray.query.view import ConversationView


def route_query_text(route: Route) -> str:
    """BM25 query of a route: its search texts plus its entity and topic words."""
    return " ".join([*route.search_texts, *route.entities, *route.topics])


def recall_bm25(view: ConversationView, query: str, depth: int) -> list[Hit]:
    """(e) Lexical matches over record and turn texts (a long turn: its best passage)."""
    return _ranked(view, view.bm25, query, depth)


def recall_turn_bm25(view: ConversationView, query: str, depth: int) -> list[Hit]:
    """(f) Lexical matches over the raw turns alone (turn-only term statistics; a long turn: its best passage)."""
    return _ranked(view, view.turn_bm25, query, depth)


def _ranked(view: ConversationView, index: BM25Index, query: str, depth: int) -> list[Hit]:
    if not view.num_passages:
        return index.search(query, depth)
    return one_per_turn(view, index.search(query, PASSAGE_DEPTH_FACTOR * depth), depth)


@dataclass(frozen=True)
class RecordTurnBM25:
    """(e) BM25 over record and turn texts."""

    name: str = "bm25"
    depth_keys: tuple[str, ...] = ("bm25_depth",)

    def recall(self, view: ConversationView, route: Route, qvecs: np.ndarray, cfg: RecallConfig) -> list[Hit]:
        return recall_bm25(view, route_query_text(route), cfg.bm25_depth)


@dataclass(frozen=True)
class TurnBM25:
    """(f) BM25 over the raw turns alone."""

    name: str = "turn_bm25"
    depth_keys: tuple[str, ...] = ("turn_bm25_depth",)

    def recall(self, view: ConversationView, route: Route, qvecs: np.ndarray, cfg: RecallConfig) -> list[Hit]:
        return recall_turn_bm25(view, route_query_text(route), cfg.turn_bm25_depth)


__all__ = ["RecordTurnBM25", "TurnBM25", "recall_bm25", "recall_turn_bm25", "route_query_text"]
