"""Increments — a stored conversation continued with new turns — and the appends that make them
(docs/incremental.md).

Entry points:

* **construct** — :func:`construct_increment`: a stored conversation plus its new turns → the next
  generation (the core a build run's increments and every append run);
* **append** — :func:`append_turns` / :func:`append_turns_async` and :class:`AppendService`
  (queued, inline or catch-up, chosen once: :mod:`.service`);
* **catch up** — :func:`catch_up`: segment and encode what queued appends stored.

Modules by what they own: :mod:`.models` (request, turns, result) and :mod:`.errors` (typed
errors); :mod:`.stored` (a committed conversation as an increment reads it, with its typed resume
point) and :mod:`.cache` (what a process keeps of it between appends); :mod:`.turns` (turn checks)
and :mod:`.turn_log` (stored turns by id); :mod:`.construct` (the core), :mod:`.tail` (the tail delta)
with :mod:`.node_index`; :mod:`.inline` and :mod:`.queued` (the two ways an append runs) and
:mod:`.service` (which one runs). Every lock and commit goes through the write path's commit step
(``lychee_ray.ingest.commit``).
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
from lychee_ray.ingest.increment.queued import append_queued, catch_up
from lychee_ray.ingest.increment.service import AppendService, append_turns, append_turns_async

__all__ = [
    "AppendErrorKind", "AppendRequest", "AppendResult", "AppendService", "AppendTurn", "ConfigMismatch", "ConflictKind",
    "ConversationBusy", "HistoryConflict", "Increment", "IncrementError", "InvalidTurns", "OwnerMismatch",
    "StoredCache", "UnknownConversationError", "UserIdRequired", "append_queued", "append_turns", "append_turns_async",
    "catch_up", "construct_increment",
]
