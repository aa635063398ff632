"""The decide step of the write path: what becomes of one conversation, before anything is embedded.

For a build run's input conversation (:class:`Decider`), read from its commit marker — and, when the
input differs from what is stored, the stored turns' identities (a
:class:`~lychee_ray.ingest.increment.turn_log.TurnLog`) — exactly one route or outcome:

=============================================================== ==============================================
the input, against the store                                    decision
=============================================================== ==============================================
unreadable                                                      failed (stage ``input``)
its id claimed by another input line of this run                ``duplicate`` (skipped, a warning)
not stored, or stored with another configuration                route ``build``
stored, ``--retry-failed``, the stored commit has failed        route ``build``, reusing the encodings of the
segments                                                        stored ok segments
the stored turns exactly, nothing open                          ``skipped``
the stored turns open it and more follow (or an open tail to    route ``increment``
close)
an older copy: its turns open the stored ones, which go on      ``skipped`` with a warning; the stored turns
(turns appended since)                                          are kept
a stored turn changed, missing or moved; another owner          failed (stage ``conflict``); with
                                                                ``on_conflict=rebuild`` route ``build``
=============================================================== ==============================================

A marker an older version wrote is migrated first, under the write lock
(:func:`~lychee_ray.ingest.commit.decision_marker`). The commit step re-decides under the lock
(:meth:`~lychee_ray.ingest.commit.Held.redecide`): when another writer committed meanwhile, the
runner decides the conversation again.

An append's route is always an increment; what may write is decided here too, on the marker read
under the write lock (the turns themselves are checked by
:func:`~lychee_ray.ingest.increment.turns.merge_turns` / ``new_turn_rows``):

=============================================================== ==============================================
the append, against the store                                   decision (:func:`decide_append`)
=============================================================== ==============================================
not stored, no ``create``                                       :class:`UnknownConversationError`
not stored, no ``user_id``                                      :class:`UserIdRequired`
another owner                                                   :class:`OwnerMismatch`
stored with another configuration                               :class:`ConfigMismatch`
otherwise                                                       the owner it writes as
=============================================================== ==============================================

:func:`decide_queued`: may it be queued (stored now, segmented by a catch-up)? Not with ``flush``,
for a conversation not stored or stored with another configuration (then it runs inline), else as
:func:`decide_append`. :func:`decide_catch_up`: as :func:`decide_append` for a stored conversation,
and whether any turn waits. :func:`decide_forget`: a forget rewrites a conversation only while it is
the user's.
"""

from __future__ import annotations

import logging
import time

import pyarrow as pa

from lychee_ray.core.conversation import TURN_SCHEMA, Conversation
from lychee_ray.core.turn_identity import turns_digest
from lychee_ray.ingest.commit import LockWait, decision_marker
from lychee_ray.ingest.increment.errors import (
    ConfigMismatch,
    IncrementError,
    OwnerMismatch,
    UnknownConversationError,
    UserIdRequired,
)
from lychee_ray.ingest.increment.models import AppendRequest
from lychee_ray.ingest.increment.turn_log import TURN_LOG_COLUMNS, TurnLog
from lychee_ray.ingest.increment.turns import check_history
from lychee_ray.config import PassagesConfig
from lychee_ray.ingest.outcomes import Outcome, duplicate_outcome, input_warnings, unreadable_outcome
from lychee_ray.ingest.stages.work import StageWork
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store import StoreWriter, read_part
from lychee_ray.io.store.locks import ConversationDeleting
from lychee_ray.io.store.marker import MARKER_VERSION, CommitMarker
from lychee_ray.names import INCREMENT_ROUTE, REBUILD_ON_CONFLICT

log = logging.getLogger(__name__)

# a stored conversation whose turns are read while another writer replaces its generation: read again
_READ_ATTEMPTS = 3


def unchanged_input(conv: Conversation, marker: CommitMarker) -> bool:
    """The stored conversation has exactly these turns and no open tail (``turns_digest`` of the marker)."""
    digest = marker.turns_digest
    if digest is None or marker.open_turns:
        return False
    return digest == turns_digest(pa.Table.from_pylist(conv.turn_rows(), schema=TURN_SCHEMA))


def built_as_is(conv: Conversation, marker: CommitMarker | None, fingerprint: str, retry_failed: bool) -> bool:
    """The decide step's skip without reading stored turns: committed in the current marker version
    with this build's ``fingerprint``, nothing to retry, and exactly these turns."""
    return (marker is not None and marker.version >= MARKER_VERSION and marker.fingerprint == fingerprint
            and not (retry_failed and marker.counts.failed_segments > 0) and unchanged_input(conv, marker))


def stored_ahead_warning(conv: Conversation, log_: TurnLog) -> str:
    """The warning of an input that is an older copy of its stored conversation."""
    later = log_.order[conv.num_turns:]
    named = ", ".join(repr(t) for t in later[:5]) + (" …" if len(later) > 5 else "")
    return (f"conversation {conv.conversation_id!r}: the store holds {len(later)} turn(s) after this input's last "
            f"({named}), added since this input was written (appends); they are kept and nothing was built")


class Decider:
    """The decide step of one build run (``run_id``) for a build of ``fingerprint``."""

    def __init__(self, writer: StoreWriter, run_id: str, fingerprint: str, max_turn_chars: int,
                 retry_failed: bool = False, on_conflict: str = "error",
                 passages: PassagesConfig | None = None) -> None:
        """``passages``: the build's ``passages`` section (its cap is reported as an input warning)."""
        self.writer = writer
        self.run_id = run_id
        self.fingerprint = fingerprint
        self.max_turn_chars = max_turn_chars
        self.retry_failed = retry_failed
        # a stored conversation whose input rewrote its history: "error" (quarantine) or "rebuild"
        self.on_conflict = on_conflict
        self.passages = passages

    def decide(self, item: AdapterItem) -> StageWork:
        """The item as a work: finished (its outcome) or routed (``build`` / ``increment``)."""
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
        try:
            for attempt in range(1, _READ_ATTEMPTS + 1):
                try:
                    self._route(work, conv)
                    break
                except OSError:  # its generation replaced while its turns were read: read the newer one
                    if attempt == _READ_ATTEMPTS or self.writer.commit_marker(cid) == work.marker:
                        raise
        except ConversationDeleting as e:
            work.fail("deleting", str(e))
        except Exception as e:  # noqa: BLE001 — quarantine: one bad conversation never stops the run
            log.exception("conversation %s failed at decide (its stored commit could not be read)", cid)
            work.fail("decide", e)
        return work

    def _route(self, work: StageWork, conv: Conversation) -> None:
        item, cid = work.item, conv.conversation_id
        marker = decision_marker(self.writer, cid)  # an older marker: migrated under the write lock
        work.marker = marker
        if marker is None or marker.fingerprint != self.fingerprint:
            work.route = "build"  # new, or stored with another configuration: built whole again
            return
        if self.retry_failed and marker.counts.failed_segments > 0:
            work.route, work.reuse_encodings = "build", True  # failed segments encoded again, the rest reused
            return
        if unchanged_input(conv, marker):
            work.outcome = Outcome.skipped(item, cid, marker)
            return
        stored = TurnLog(marker)
        stored.add(read_part(self.writer.layout, "turns", marker, columns=TURN_LOG_COLUMNS).to_pylist())
        try:
            matched = check_history(stored, conv)
        except IncrementError as e:
            if self.on_conflict == REBUILD_ON_CONFLICT:
                log.warning("%s; rebuilding it from scratch (on_conflict=rebuild)", e)
                work.route = "build"
                return
            work.fail("conflict", str(e))
            return
        if matched < len(stored.order):
            work.outcome = Outcome.skipped(item, cid, marker, [stored_ahead_warning(conv, stored)])
        elif conv.num_turns == matched and not marker.open_turns:
            work.outcome = Outcome.skipped(item, cid, marker)
        else:
            work.route, work.first_turn = INCREMENT_ROUTE, matched  # the turns after the stored ones are new


def decide_append(conversation_id: str, marker: CommitMarker | None, user_id: str | None, fingerprint: str,
                  create: bool) -> str:
    """The decision on an append (``marker``: the stored commit read under the write lock, None:
    none): the owner it writes as, or the typed error that refuses it, nothing written (module doc)."""
    if marker is None:
        if not create:
            raise UnknownConversationError(conversation_id)
        if user_id is None:
            raise UserIdRequired(conversation_id)
        return user_id
    if user_id is not None and user_id != marker.owner:
        raise OwnerMismatch(conversation_id, marker.owner, user_id)
    if marker.fingerprint != fingerprint:
        raise ConfigMismatch(conversation_id, str(marker.fingerprint), fingerprint)
    return marker.owner


def decide_queued(request: AppendRequest, marker: CommitMarker | None, fingerprint: str) -> str | None:
    """The decision on a queued append (``marker`` read under the write lock): the owner it writes
    as, or None when it cannot be queued (``flush``, not stored, or stored with another
    configuration: it runs inline); raises as :func:`decide_append`."""
    if request.flush or marker is None or marker.generation is None or marker.fingerprint != fingerprint:
        return None
    return decide_append(request.conversation_id, marker, request.user_id, fingerprint, create=False)


def decide_catch_up(request: AppendRequest, writer: StoreWriter, fingerprint: str,
                    wait: LockWait | None = None) -> tuple[CommitMarker, bool]:
    """The decision on a catch-up, taken without the write lock: the marker it builds on (an older
    one migrated first) and whether any turn waits for it; raises as :func:`decide_append` (an
    unknown conversation is never created)."""
    cid = request.conversation_id
    marker = decision_marker(writer, cid, wait)
    decide_append(cid, marker, request.user_id, fingerprint, create=False)
    assert marker is not None  # (decide_append refuses an unknown conversation without create)
    return marker, bool(marker.unsegmented_turns)


def decide_forget(marker: CommitMarker, user_id: str) -> bool:
    """The decision on a forget of one conversation (``marker`` read under its write lock): its
    commit is rewritten only while it is ``user_id``'s (not re-created for another owner since)."""
    return marker.owner == user_id


__all__ = ["Decider", "built_as_is", "decide_append", "decide_catch_up", "decide_forget", "decide_queued", "stored_ahead_warning",
           "unchanged_input"]
