"""A memory record's status as a reader sees it (records are append-only; the status is derived).

``current`` — nothing replaced it; ``superseded`` — a newer record replaced what it states;
``conflicting`` — a record it contradicts is not superseded either; ``history`` — an old record a
query that asks for history shows as such.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

Status = Literal["current", "superseded", "conflicting", "history"]
STATUSES: Final[tuple[Status, ...]] = get_args(Status)
CURRENT_STATUS: Final[Status] = "current"
SUPERSEDED_STATUS: Final[Status] = "superseded"
CONFLICTING_STATUS: Final[Status] = "conflicting"
HISTORY_STATUS: Final[Status] = "history"

__all__ = ["CONFLICTING_STATUS", "CURRENT_STATUS", "HISTORY_STATUS", "STATUSES", "SUPERSEDED_STATUS", "Status"]
