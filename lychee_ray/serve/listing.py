"""``GET /v1/conversations``: a page of the conversations a request may read, from commit markers;
``GET /v1/conversations/{id}``: one conversation's details (:func:`conversation_info`).

The counts come from each conversation's commit marker (held by the store reader: no file is read
per request). Markers do not count sessions; that one number is read once per conversation build
(one column of one row group) and remembered, so a listing reads at most a page's worth of small
column chunks, and only the first time it shows a conversation.
"""

from __future__ import annotations

import logging
import threading
from typing import Any
from collections.abc import Callable

from lychee_ray.io.store import CommitMarker, StoreLayout, read_part
from lychee_ray.serve.errors import ServiceError
from lychee_ray.serve.schemas import ConversationInfo, ConversationPage, ConversationSummary

log = logging.getLogger(__name__)


class ConversationLister:
    """Pages of conversation summaries over a store reader's markers (``reader.markers`` / ``by_user``)."""

    def __init__(self, layout: StoreLayout) -> None:
        self.layout = layout
        # (conversation id, marker key, commit time) -> sessions: a rebuild gets a new entry
        self._sessions: dict[tuple[str, str, str], int] = {}
        self._lock = threading.Lock()

    def page(self, reader: Any, user_id: str | None, offset: int, limit: int,
             allows: Callable[[str], bool] | None = None) -> ConversationPage:
        """Conversations in scope (all, or ``user_id``'s; ``allows``: only those whose owner it
        accepts, a tenant's scope), ordered by id, ``limit`` from ``offset``."""
        if user_id is not None:
            ids = sorted(reader.by_user.get(user_id, []))
        elif allows is not None:
            ids = sorted(cid for owner, cids in reader.by_user.items() if allows(owner) for cid in cids)
        else:
            ids = sorted(reader.markers)
        rows = []
        for cid in ids[offset: offset + limit]:
            m = reader.markers.get(cid)
            if m is not None:  # dropped by a concurrent reload: left out of this page
                rows.append(self.summary(cid, m))
        end = offset + limit
        return ConversationPage(conversations=rows, total=len(ids), offset=offset, limit=limit,
                                next_offset=end if end < len(ids) else None)

    def summary(self, conversation_id: str, marker: CommitMarker) -> ConversationSummary:
        """One conversation's summary from its commit marker."""
        c = marker.counts
        return ConversationSummary(
            conversation_id=conversation_id, user_id=marker.owner,
            sessions=self._sessions_of(conversation_id, marker),
            turns=c.turns, records=c.records, segments=c.segments,
            failed_segments=c.failed_segments, committed_at=marker.committed_at,
            key=marker.key,
        )

    def forget(self, conversation_ids: list[str]) -> None:
        """Drop what is remembered of erased conversations."""
        gone = set(conversation_ids)
        with self._lock:
            self._sessions = {k: v for k, v in self._sessions.items() if k[0] not in gone}

    def _sessions_of(self, conversation_id: str, marker: CommitMarker) -> int | None:
        memo = (conversation_id, marker.key, marker.committed_at)
        with self._lock:
            if memo in self._sessions:
                return self._sessions[memo]
        n = self._read_sessions(marker)
        if n is not None:  # a failed read (e.g. compaction moved the part) is tried again next time
            with self._lock:
                self._sessions[memo] = n
        return n

    def _read_sessions(self, marker: CommitMarker) -> int | None:
        """Distinct session ids among the conversation's turns: one column of its Parquet part."""
        try:
            col = read_part(self.layout, "turns", marker, columns=["session_id"]).column(0)
        except (OSError, KeyError, ValueError) as e:  # compacted away meanwhile, or unreadable: say so, don't fail
            log.warning("sessions of %s unknown: %s", marker.conversation_id, e)
            return None
        return len(set(col.to_pylist()))


def conversation_info(layout: StoreLayout, markers: dict[str, CommitMarker], conversation_id: str,
                      cached: bool) -> ConversationInfo:
    """One conversation's details: its marker's counts, and its sessions, dates, speakers and failed
    segments read from its Parquet parts (``cached``: whether this replica holds its view). 404 for a
    conversation ``markers`` does not hold; FileNotFoundError when a build compacted its parts away."""
    m = markers.get(conversation_id)
    if m is None:
        raise ServiceError(404, "not_found", f"unknown conversation {conversation_id!r}")
    turns = read_part(layout, "turns", m).select(["session_id", "session_started_at", "speaker"]).to_pydict()
    segs = read_part(layout, "segments", m).select(["segment_id", "status"]).to_pydict()
    started: dict[str, str | None] = {}
    for sid, at in zip(turns["session_id"], turns["session_started_at"], strict=False):
        started.setdefault(sid, at)
    dates = sorted(d for d in started.values() if d)
    failed = [s for s, status in zip(segs["segment_id"], segs["status"], strict=False) if status == "failed"]
    return ConversationInfo(
        conversation_id=conversation_id, user_id=m.owner,
        committed_at=m.committed_at, sessions=len(started), turns=len(turns["session_id"]),
        records=m.counts.records, segments=len(segs["segment_id"]), failed_segments=len(failed),
        failed_segment_ids=failed, nodes=m.counts.nodes,
        speakers=list(dict.fromkeys(turns["speaker"])), date_from=dates[0] if dates else None,
        date_to=dates[-1] if dates else None, backend=m.backend, model=m.model,
        embedder=m.embedder, cached=cached, quality=m.quality,
        encode_pending_turns=m.unsegmented_turns,
    )


__all__ = ["ConversationLister", "conversation_info"]
