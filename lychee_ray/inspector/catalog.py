"""The conversation list: pages of a store's conversations in a request's scope, with filters.

Everything a row shows comes from the commit markers the query engine's reader already holds (counts,
failed and degenerate segments, build date), so a page of a large store reads no table: sorting and
filtering 10,000 markers costs milliseconds (``benchmarks/inspector_speed.py``). Two things are read
once and remembered: a conversation's *kind* (agent log, chat, dialogue: the shape of its turns; the
store keeps no input format), read from its turns' ``role`` and ``meta`` columns only when the kind
filter asks for it or a page shows the row, and the conversations that failed to build (the
``errors/`` table, re-read when the store's commits change).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from lychee_ray.core.tools import TOOL_META_KEY
from lychee_ray.inspector.models import ConversationKind, ConversationList, ConversationRow
from lychee_ray.io.store import CommitMarker, MemoryStoreReader, StoreLayout, read_part

Allows = Callable[[str | None], bool]


def kind_of_turns(roles: Iterable[str], metas: Iterable[str | None]) -> ConversationKind:
    """agent: tool turns, tool calls or a system prompt; chat: an assistant answers; else a dialogue."""
    roles = list(roles)
    if any(r in ("tool", "system") for r in roles) or any(m and TOOL_META_KEY in m for m in metas):
        return "agent"
    return "chat" if "assistant" in roles else "dialogue"


def degenerate(marker: CommitMarker) -> int:
    """Segments of the conversation the memory checks failed as degenerate (docs/llm-quality.md)."""
    q = marker.quality or {}
    return int(q.get("segments_degenerate") or 0)


class ConversationCatalog:
    """Pages of conversation rows over a store reader's markers (``reader.markers`` / ``by_user``)."""

    def __init__(self, layout: StoreLayout) -> None:
        self.layout = layout
        self._kinds: dict[tuple[str, str, str | None], ConversationKind] = {}  # (id, key, committed_at)
        self._failed: tuple[Any, list[ConversationRow]] | None = None
        self._lock = threading.Lock()

    # -- what is remembered ----------------------------------------------------------------------
    def kind(self, marker: CommitMarker) -> ConversationKind | None:
        """The conversation's kind (its turns' roles read once per commit; None when unreadable)."""
        memo = (marker.conversation_id, marker.key, marker.committed_at)
        with self._lock:
            if memo in self._kinds:
                return self._kinds[memo]
        try:
            t = read_part(self.layout, "turns", marker, columns=["role", "meta"]).to_pydict()
        except (OSError, KeyError, ValueError):  # compacted away meanwhile: tried again next time
            return None
        k = kind_of_turns(t["role"], t["meta"])
        with self._lock:
            self._kinds[memo] = k
        return k

    def failed_builds(self, reader: MemoryStoreReader) -> list[ConversationRow]:
        """Conversations only in ``errors/`` (never built), with their last error; re-read when the
        store's commits changed."""
        stamp = self.layout.commit_state()
        cached = self._failed
        if cached is not None and cached[0] == stamp:
            return cached[1]
        last: dict[str, dict[str, Any]] = {}
        for e in sorted(reader.errors().to_pylist(), key=lambda r: r.get("time") or ""):
            cid = e.get("conversation_id")
            if cid and e.get("stage") != "warning" and cid not in reader.markers:
                last[cid] = e
        rows = [ConversationRow(conversation_id=cid, user_id=None, status="failed", turns=0, segments=0, records=0,
                                failed_segments=0, degenerate_segments=0, committed_at=e.get("time"),
                                error=f"{e.get('stage')}: {' '.join(str(e.get('message') or '').split())}")
                for cid, e in sorted(last.items())]
        self._failed = (stamp, rows)
        return rows

    # -- pages -----------------------------------------------------------------------------------
    def row(self, marker: CommitMarker, with_kind: bool = True) -> ConversationRow:
        c = marker.counts
        return ConversationRow(conversation_id=marker.conversation_id, user_id=marker.owner, status="built",
                               turns=c.turns, segments=c.segments, records=c.records, failed_segments=c.failed_segments,
                               degenerate_segments=degenerate(marker), committed_at=marker.committed_at,
                               kind=self.kind(marker) if with_kind else None)

    def page(self, reader: MemoryStoreReader, allows: Allows, admin: bool, *, user: str | None = None,
             kind: str | None = None, status: str | None = None, text: str | None = None, offset: int = 0,
             limit: int = 50, max_users: int = 200) -> ConversationList:
        """Conversations in scope (``allows``: a principal's test of an owner), ordered by id, that
        pass every filter: ``user`` (its owner), ``kind``, ``status`` (``failed``: failed segments or
        a failed build; ``degenerate``: degenerate segments; ``built``), ``text`` (in the id)."""
        t0 = time.perf_counter()
        markers = reader.markers
        owners = sorted(u for u in reader.by_user if allows(u))
        if user is not None:
            ids = sorted(reader.by_user.get(user, [])) if allows(user) else []
        else:
            ids = sorted(cid for u in owners for cid in reader.by_user.get(u, []))
        if text:
            needle = text.lower()
            ids = [cid for cid in ids if needle in cid.lower()]
        ms = [markers[cid] for cid in ids if cid in markers]
        if status == "failed":
            ms = [m for m in ms if m.counts.failed_segments > 0]
        elif status == "degenerate":
            ms = [m for m in ms if degenerate(m) > 0]
        if kind:
            ms = [m for m in ms if self.kind(m) == kind]
        rows: list[ConversationRow | CommitMarker] = list(ms)
        if admin and user is None and kind is None and status in (None, "failed"):
            rows += [r for r in self.failed_builds(reader) if not text or text.lower() in r.conversation_id.lower()]
        page = [r if isinstance(r, ConversationRow) else self.row(r) for r in rows[offset: offset + limit]]
        end = offset + limit
        return ConversationList(rows=page, total=len(rows), offset=offset, limit=limit,
                                next_offset=end if end < len(rows) else None,
                                filters={"user": user, "kind": kind, "status": status, "text": text},
                                users=owners[:max_users], server_ms=round((time.perf_counter() - t0) * 1000.0, 3))


def parse_meta(meta: str | None) -> dict[str, Any]:
    """A stored turn's ``meta`` JSON as a mapping (anything else: empty)."""
    if not meta:
        return {}
    try:
        v = json.loads(meta)
    except ValueError:
        return {}
    return v if isinstance(v, dict) else {}


__all__ = ["ConversationCatalog", "degenerate", "kind_of_turns", "parse_meta"]
