"""Appends: turns added to a stored conversation by id, and the catch-up of the queued ones — the
write path's runners for the API (docs/incremental.md). Each decides through ingest/decide.py,
constructs through the increment package (``construct_increment``, or ``construct_queued`` for a
queued append's turns) and re-decides and commits through ingest/commit.py.

:mod:`.inline` (an append segmented and encoded before it returns), :mod:`.queued` (an append stored
now, and the catch-up that segments and encodes it later) and :mod:`.service` (which one runs,
chosen once; :class:`AppendService` for long-lived processes).
"""

from lychee_ray.ingest.append.inline import append_inline
from lychee_ray.ingest.append.queued import append_queued, catch_up
from lychee_ray.ingest.append.service import AppendService, ContextFactory, append_turns, append_turns_async

__all__ = ["AppendService", "ContextFactory", "append_inline", "append_queued", "append_turns", "append_turns_async",
           "catch_up"]
