"""Reciprocal rank fusion across channels and routes (DESIGN §1 step 6).

``RRF(d) = Σ_j w_j / (κ + rank_j(d))`` over every ranked list j (one per route × channel ×
conversation), ranks starting at 1, ``w_j`` the channel's weight (1 = plain RRF), κ = 60 by default.
Every fused item remembers which channels and routes found it and its best rank per channel.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple
from collections.abc import Iterable, Mapping, Sequence

from lychee_ray.query.hits import Hit, ItemKind


class ItemKey(NamedTuple):
    """A recalled item across conversations: a record or a raw turn of one conversation."""

    conversation_id: str
    kind: ItemKind
    id: str


@dataclass
class RankedList:
    """One channel's output for one route of one conversation."""

    channel: str
    route: int
    conversation_id: str
    hits: Sequence[Hit]


@dataclass
class FusedItem:
    """An item after fusion: its RRF score and provenance."""

    key: ItemKey
    score: float = 0.0
    channels: set[str] = field(default_factory=set)
    routes: set[int] = field(default_factory=set)
    ranks: dict[str, int] = field(default_factory=dict)  # best (lowest) rank per channel
    first_seen: int = 0  # tie-break: order of first appearance (deterministic output)


def rrf(lists: Iterable[RankedList], k: float = 60.0, weights: Mapping[str, float] | None = None,
        limit: int | None = None) -> list[FusedItem]:
    """Fuse ranked lists; highest score first (ties: first seen first); at most ``limit`` items."""
    items: dict[ItemKey, FusedItem] = {}
    for lst in lists:
        w = 1.0 if weights is None else float(weights.get(lst.channel, 1.0))
        seen: set[ItemKey] = set()
        rank = 0
        for hit in lst.hits:
            key = ItemKey(lst.conversation_id, hit.kind, hit.id)
            if key in seen:  # a list counts an item once (its best rank)
                continue
            seen.add(key)
            rank += 1
            it = items.get(key)
            if it is None:
                it = items[key] = FusedItem(key=key, first_seen=len(items))
            it.score += w / (k + rank)
            it.channels.add(lst.channel)
            it.routes.add(lst.route)
            if rank < it.ranks.get(lst.channel, 1 << 30):
                it.ranks[lst.channel] = rank
    out = sorted(items.values(), key=lambda x: (-x.score, x.first_seen))
    return out if limit is None else out[:limit]


__all__ = ["FusedItem", "ItemKey", "RankedList", "rrf"]
