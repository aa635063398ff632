"""What every recall channel returns: ranked :class:`Hit` items (a record, a raw turn, or a passage
of a long turn: core/passages.py)."""

from __future__ import annotations

from typing import Literal, NamedTuple

ItemKind = Literal["record", "turn", "passage"]


class Hit(NamedTuple):
    """One recalled item: its kind, id and the channel's own score (only the rank is fused)."""

    kind: ItemKind
    id: str
    score: float


__all__ = ["Hit", "ItemKind"]
