"""Decide stage: what to do with each input conversation, before anything is embedded.

Reads the conversation's commit marker (one small read, no lock: a marker is written atomically)
and routes the conversation: **skip** (committed with this configuration and exactly these turns),
**build** (not committed, or committed with another configuration) through the stages, or
**classic** (a stored conversation with new turns, ``--retry-failed``, a marker to migrate) through
the one-conversation path under the write lock. Unreadable inputs are quarantined here; a later line
repeating an id of the run is skipped with a warning (``duplicate``). The commit stage checks the marker again under the lock.
"""

from __future__ import annotations

import time

from lychee_ray.ingest.outcomes import Outcome, duplicate_outcome, input_warnings, unreadable_outcome
from lychee_ray.ingest.processor import unchanged_input
from lychee_ray.ingest.stages.work import MarkerSeen, StageWork
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store import MemoryStoreWriter
from lychee_ray.io.store.marker import MARKER_VERSION
from lychee_ray.config import PassagesConfig


class Decider:
    """Routes items of one run (``run_id``) for a build of ``fingerprint``."""

    def __init__(self, writer: MemoryStoreWriter, run_id: str, fingerprint: str, max_turn_chars: int,
                 retry_failed: bool = False, passages: PassagesConfig | None = None) -> None:
        """``passages``: the build's ``passages`` section (its cap is reported as an input warning)."""
        self.writer = writer
        self.run_id = run_id
        self.fingerprint = fingerprint
        self.max_turn_chars = max_turn_chars
        self.retry_failed = retry_failed
        self.passages = passages

    def decide(self, item: AdapterItem) -> StageWork:
        """The item as a work: finished (skipped or failed) or routed (``build`` / ``classic``)."""
        work = StageWork(item, t0=time.time())
        conv = item.conversation
        if conv is None:
            work.outcome = unreadable_outcome(item)
            return work
        cid = conv.conversation_id
        dup = self.writer.claim(cid, self.run_id, item.where)
        if dup is not None:
            work.outcome = duplicate_outcome(item, cid, dup)
            return work
        work.warnings = input_warnings(item, self.max_turn_chars, self.passages)
        marker = self.writer.commit_marker(cid)
        work.seen = MarkerSeen.of(marker)
        if marker is None or marker.fingerprint != self.fingerprint:
            work.route = "build"  # new, or stored with another configuration: built whole again
        elif marker.version < MARKER_VERSION or (self.retry_failed and marker.counts.failed_segments > 0):
            work.route = "classic"  # migrated under the lock / failed segments re-encoded
        elif unchanged_input(conv, marker):
            work.outcome = Outcome("skipped", cid, counts=marker.counts.as_dict(), file=item.file, line=item.line)
        else:
            work.route = "classic"  # new turns (or a rewritten history): the increment path decides
        return work


__all__ = ["Decider"]
