"""The turn log: a stored conversation's turns as an append sees them (identity by id, sessions).

An append whose segmentation is queued (:func:`~lychee_ray.ingest.append.queued.append_queued`)
checks the new turns against the stored ones (duplicates, edits, session order) and numbers them;
it reads nothing else. :class:`~lychee_ray.ingest.increment.cache.StoredCache` keeps a
:class:`TurnLog` per conversation and, when the commit marker only added deltas since, reads just
those deltas' turns — so an append costs the same at 10,000 stored turns as at 100.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lychee_ray.core.turn_identity import TURN_IDENTITY
from lychee_ray.io.store.marker import CommitMarker

# turn columns a queued append compares and continues from
TURN_LOG_COLUMNS = list(TURN_IDENTITY)


@dataclass
class TurnLog:
    """A stored conversation's turns as an append sees them (identity columns, in order)."""

    marker: CommitMarker | None  # None: a conversation not stored yet
    rows: dict[str, dict[str, Any]] = field(default_factory=dict)  # turn id -> identity row
    order: list[str] = field(default_factory=list)  # turn ids in conversation order
    sessions: list[str] = field(default_factory=list)  # session ids in order
    session_started_at: str | None = None  # of the last session
    last_session_turns: int = 0  # turns in the last session
    # the last session's position (an input's empty sessions keep their positions: not len(sessions) - 1)
    last_session_index: int = -1

    def add(self, rows: list[dict[str, Any]]) -> None:
        """Take turns rows appended after the ones held (in order)."""
        for r in rows:
            tid = r["turn_id"]
            self.rows[tid] = {c: r.get(c) for c in TURN_LOG_COLUMNS}
            self.order.append(tid)
            if not self.sessions or r["session_id"] != self.sessions[-1]:
                self.sessions.append(r["session_id"])
                self.last_session_turns = 0
                self.session_started_at = r.get("session_started_at")
                self.last_session_index = r["session_index"]
            self.last_session_turns += 1

    def waiting_turn_ids(self) -> list[str]:
        """Turns no segment covers yet (the segmenter's open tail, then the turns it has not reached:
        segments cover a prefix of the conversation, so these are its last ``open_turns``)."""
        n = self.marker.open_turns if self.marker is not None else 0
        return self.order[len(self.order) - n:] if n else []


__all__ = ["TURN_LOG_COLUMNS", "TurnLog"]
