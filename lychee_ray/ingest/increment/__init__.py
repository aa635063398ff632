"""Increments — a stored conversation continued with new turns (docs/incremental.md): the data an
increment reads and makes, and its constructors. The appends that run them are
``lychee_ray.ingest.append``; every lock and commit goes through ``lychee_ray.ingest.commit``.

Constructors, one per kind of change: :func:`construct_increment` (a stored conversation plus its
new turns → the next generation: a build run's increments, inline appends, catch-ups) and
:func:`~.queued_delta.construct_queued` (a queued append's turns, stored unsegmented).

Modules by what they own: :mod:`.models` (request, turns, result) and :mod:`.errors` (typed
errors); :mod:`.stored` (a committed conversation as an increment reads it, with its typed resume
point) and :mod:`.cache` (what a process keeps of it between appends); :mod:`.turns` (turn checks)
and :mod:`.turn_log` (stored turns by id); :mod:`.construct` (the core), :mod:`.tail` (the tail delta)
with :mod:`.node_index`; :mod:`.queued_delta` (a queued append's delta).
"""

from lychee_ray.ingest.increment.cache import StoredCache
from lychee_ray.ingest.increment.errors import (
    AppendErrorKind,
    ConfigMismatch,
    ConflictKind,
    ConversationBusy,
    HistoryConflict,
    IncrementError,
    InvalidTurns,
    OwnerMismatch,
    UnknownConversationError,
    UserIdRequired,
)
from lychee_ray.ingest.increment.construct import Increment, construct_increment
from lychee_ray.ingest.increment.models import AppendRequest, AppendResult, AppendTurn

__all__ = [
    "AppendErrorKind", "AppendRequest", "AppendResult", "AppendTurn", "ConfigMismatch", "ConflictKind",
    "ConversationBusy", "HistoryConflict", "Increment", "IncrementError", "InvalidTurns", "OwnerMismatch",
    "StoredCache", "UnknownConversationError", "UserIdRequired", "construct_increment",
]
