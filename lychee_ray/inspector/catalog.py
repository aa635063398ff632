"""The conversation list: pages of a store's conversations in a request's scope, with filters.

Everything a row shows but one comes from the commit markers the query engine's reader already holds
(counts, failed and degenerate segments, build date): sorting and filtering 10,000 markers costs
milliseconds (``benchmarks/inspector_speed.py``). The exception is read once per commit, apart from
the page, and remembered: a conversation's *kind* (agent log, chat, dialogue: the shape of its turns,
never words in their text or metadata; :func:`~lychee_ray.core.kinds.conversation_kind`), from its
turns' ``role`` and ``meta`` columns, for the rows a page shows and, when the kind filter asks, for
every conversation in scope — a compacted file's conversations in one read
(:func:`~lychee_ray.io.store.read_parts`). A page itself reads no table: it carries the kinds
already known, and the list asks :meth:`ConversationCatalog.kinds_of` for the rest of its rows. The
conversations that failed to build come from the ``errors/`` table, re-read when the store's commits
change.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from typing import Any

from lychee_ray.core.kinds import ConversationKind, conversation_kind
from lychee_ray.inspector.models import ConversationList, ConversationRow
from lychee_ray.io.store import CommitMarker, StoreReader, StoreLayout, read_parts

Allows = Callable[[str | None], bool]


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
    def kinds(self, markers: list[CommitMarker], read: bool = True) -> dict[str, ConversationKind]:
        """The conversations' kinds (their turns' roles read once per commit, a compacted file's
        conversations in one read; one that cannot be read now is left out). ``read`` False: only
        the kinds already known (no table is read)."""
        out: dict[str, ConversationKind] = {}
        todo: list[CommitMarker] = []
        with self._lock:
            for m in markers:
                k = self._kinds.get((m.conversation_id, m.key, m.committed_at))
                if k is None:
                    todo.append(m)
                else:
                    out[m.conversation_id] = k
        if todo and read:
            parts = read_parts(self.layout, "turns", todo, columns=["role", "meta"])
            found = {cid: conversation_kind(t.column("role").to_pylist(), t.column("meta").to_pylist())
                     for cid, t in parts.items()}
            with self._lock:
                for m in todo:
                    if m.conversation_id in found:
                        self._kinds[(m.conversation_id, m.key, m.committed_at)] = found[m.conversation_id]
            out.update(found)
        return out

    def failed_builds(self, reader: StoreReader) -> list[ConversationRow]:
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
    def row(self, marker: CommitMarker, kind: ConversationKind | None = None) -> ConversationRow:
        c = marker.counts
        return ConversationRow(conversation_id=marker.conversation_id, user_id=marker.owner, status="built",
                               turns=c.turns, segments=c.segments, records=c.records, failed_segments=c.failed_segments,
                               degenerate_segments=degenerate(marker), committed_at=marker.committed_at, kind=kind)

    def kinds_of(self, reader: StoreReader, allows: Allows, conversation_ids: list[str]) -> dict[str, ConversationKind]:
        """The kinds of the conversations of ``conversation_ids`` in scope (others are left out)."""
        ms = [m for cid in conversation_ids if (m := reader.markers.get(cid)) is not None and allows(m.owner)]
        return self.kinds(ms)

    def page(self, reader: StoreReader, allows: Allows, admin: bool, *, user: str | None = None,
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
            known = self.kinds(ms)
            ms = [m for m in ms if known.get(m.conversation_id) == kind]
        rows: list[ConversationRow | CommitMarker] = list(ms)
        if admin and user is None and kind is None and status in (None, "failed"):
            rows += [r for r in self.failed_builds(reader) if not text or text.lower() in r.conversation_id.lower()]
        shown = rows[offset: offset + limit]
        kinds = self.kinds([r for r in shown if isinstance(r, CommitMarker)], read=False)  # the rest: kinds_of()
        page = [r if isinstance(r, ConversationRow) else self.row(r, kinds.get(r.conversation_id)) for r in shown]
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


__all__ = ["ConversationCatalog", "degenerate", "parse_meta"]
