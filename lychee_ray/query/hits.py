"""What every recall channel returns: ranked :class:`Hit` items (a record or a raw turn)."""

from __future__ import annotations

from typing import Literal, NamedTuple

ItemKind = Literal["record", "turn"]


class Hit(NamedTuple):
    """One recalled item: its kind, id and the channel's own score (only the rank is fused)."""

    kind: ItemKind
    id: str
    score: float


__all__ = ["Hit", "ItemKind"]
