"""What makes a stored turn the turn it is: its identity columns, and the digest chained over them.

An incremental build compares these columns to tell a changed history from a duplicate; the
commit marker keeps the digest, so an unchanged input is recognised without reading the turns.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pyarrow as pa

# Columns of the turns table that make a turn what it is: a stored turn whose values differ is a
# changed history (incremental builds), and the digest over them tells an unchanged input at once.
TURN_IDENTITY = ("session_id", "session_index", "turn_index", "turn_id", "role", "speaker", "content", "timestamp",
                 "session_started_at", "meta")


def turn_identity(row: dict[str, Any]) -> tuple[Any, ...]:
    """The identity values of one turns-table row (see :data:`TURN_IDENTITY`)."""
    return tuple(row.get(c) for c in TURN_IDENTITY)


def turns_digest(turns: pa.Table, previous: str | None = None) -> str:
    """SHA-256 hash chain over the identity columns of a conversation's turns, in order (saved in
    the marker): each turn's link hashes the previous link with the turn, so an append continues
    the chain from the stored digest (``previous``) over its new turns alone, and any split of the
    same turns into appends gives the digest one build of them gives."""
    link = previous or ""
    for row in turns.select(list(TURN_IDENTITY)).to_pylist():
        payload = json.dumps(turn_identity(row), ensure_ascii=False)
        link = hashlib.sha256(f"{link}\n{payload}".encode()).hexdigest()
    return link


__all__ = ["TURN_IDENTITY", "turn_identity", "turns_digest"]
