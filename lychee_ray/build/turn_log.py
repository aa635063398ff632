"""What an append needs to know of a stored conversation, kept per process and refreshed by delta:
its turns' identity by id and its sessions (a queued append), its loaded tables (an encoding one).

An append whose segmentation is queued (:func:`~lychee_ray.build.incremental.append_turns_queued`)
checks the new turns against the stored ones (duplicates, edits, session order) and numbers them;
it reads nothing else. :class:`StoredCache` keeps that :class:`TurnLog` per conversation and, when
the commit marker only added deltas since, reads just those deltas' turns — so an append costs
the same at 10,000 stored turns as at 100.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lychee_ray.io.store.deltas import read_delta_manifest
from lychee_ray.io.store.layout import StoreLayout
from lychee_ray.io.store.marker import CommitMarker
from lychee_ray.io.store.reader import read_delta, read_part
from lychee_ray.io.store.writer import TURN_IDENTITY

# turn columns a queued append compares and continues from
_COLUMNS = list(TURN_IDENTITY)


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
            self.rows[tid] = {c: r.get(c) for c in _COLUMNS}
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


class _Bounded:
    """A dict bounded to ``max_items`` entries, least recently put dropped first (thread-safe)."""

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self._items: dict[str, Any] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> Any:
        with self._lock:
            return self._items.get(key)

    def take(self, key: str) -> Any:
        """The entry, removed (the caller owns it until it puts it back)."""
        with self._lock:
            return self._items.pop(key, None)

    def drop(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)

    def put(self, key: str, value: Any) -> None:
        with self._lock:
            self._items.pop(key, None)
            self._items[key] = value
            while len(self._items) > self.max_items:
                self._items.pop(next(iter(self._items)))


class StoredCache:
    """What an appending process keeps of the conversations it appends to, each bounded to
    ``max_items`` conversations: their :class:`TurnLog` (queued appends), the state after their
    last increment (:class:`~lychee_ray.build.stored.StoredConversation`: appends that encode) and
    their tables as last read (a whole read of a newer commit then reads only its new deltas)."""

    def __init__(self, max_items: int) -> None:
        self._logs = _Bounded(max_items)
        self._stored = _Bounded(max_items)
        self._data = _Bounded(max_items)

    def turn_log(self, layout: StoreLayout, marker: CommitMarker) -> TurnLog:
        """The turn log of the commit ``marker`` names: cached, extended by the deltas committed
        since, or read whole (a new base: a fold, a full rewrite, another process's first read).
        Taken out of the cache: the caller owns it (it may grow it) and :meth:`put` s it back."""
        old = self._logs.take(marker.key)
        if old is not None and old.marker is not None and old.marker.same_commit(marker):
            log = old
        elif old is not None and old.marker is not None and marker.extends(old.marker):
            log = TurnLog(marker, old.rows, old.order, old.sessions, old.session_started_at, old.last_session_turns,
                          old.last_session_index)
            for gen in marker.deltas[len(old.marker.deltas):]:  # turns are only ever appended
                d = read_delta(layout, marker.key, gen, ["turns"], 0, vectors=False).get("turns")
                if d is not None and d.upserts.num_rows:
                    log.add(d.upserts.select(_COLUMNS).to_pylist())
        else:
            log = TurnLog(marker)
            log.add(read_part(layout, "turns", marker, columns=_COLUMNS).to_pylist())
        return log

    def put(self, log: TurnLog) -> None:
        """Keep ``log`` (most recently used; it must name a commit)."""
        assert log.marker is not None
        self._logs.put(log.marker.key, log)

    def take_stored(self, layout: StoreLayout, marker: CommitMarker) -> Any:
        """The kept :class:`~lychee_ray.build.stored.StoredConversation` of the commit ``marker``
        names, taken out of the cache (the caller owns it while it works; :meth:`keep_stored` puts
        it back), or None. A kept state behind ``marker`` only by turn deltas (queued appends,
        possibly by other processes) takes those turns in; anything else (another process's
        segmentation, a fold, a rewrite) means None: the caller reads the conversation whole."""
        kept = self._stored.take(marker.key)
        if kept is None or (kept.marker.same_commit(marker) and kept.applied >= set(marker.generations)):
            return kept
        if marker.generation not in kept.applied or kept.marker.segmentation_epoch != marker.segmentation_epoch:
            return None
        for gen in marker.deltas:
            if gen in kept.applied:
                continue
            doc = read_delta_manifest(layout.index_dir(marker.key, gen))
            if doc.get("deletes") or any(n for t, n in doc["tables"].items() if t != "turns"):
                return None
            d = read_delta(layout, marker.key, gen, ["turns"], kept.turn_vectors.shape[1]).get("turns")
            if d is not None and d.upserts.num_rows:
                kept.add_turns(d.upserts.to_pylist(), d.vectors.vectors if d.vectors is not None else
                               np.zeros((0, kept.turn_vectors.shape[1]), np.float32), marker, gen)
            kept.applied.add(gen)
        kept.marker = marker
        return kept

    def keep_stored(self, stored: Any) -> None:
        """Keep a conversation's state for its next increment."""
        self._stored.put(stored.marker.key, stored)

    def data(self, key: str) -> Any:
        """The conversation's tables as this process read them last (None: not kept): a load of a
        newer commit that only added deltas reads just those."""
        return self._data.get(key)

    def put_data(self, key: str, data: Any) -> None:
        """Keep a conversation's loaded tables."""
        self._data.put(key, data)

    def forget(self, key: str) -> None:
        """Drop everything kept of conversation ``key`` (erased: nothing of it may seed a re-created
        id's state; entries are also checked by lineage when taken, see ``CommitMarker.extends``)."""
        for part in (self._logs, self._stored, self._data):
            part.drop(key)


__all__ = ["StoredCache", "TurnLog"]
