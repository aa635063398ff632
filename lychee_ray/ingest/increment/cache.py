"""What an appending process keeps of the conversations it appends to, refreshed by delta.

:class:`StoredCache` holds per conversation (each part bounded to ``appends.cache_conversations``)
its :class:`~lychee_ray.ingest.increment.turn_log.TurnLog` (queued appends), the state after its
last increment (appends that encode) and its tables as last read; :func:`stored_state` is the
committed conversation an increment starts from, taken from there when it can be.
"""

from __future__ import annotations

import threading
from typing import Generic, TypeVar

import numpy as np
from cachetools import FIFOCache

from lychee_ray.ingest.increment.stored import StoredConversation, load_stored
from lychee_ray.ingest.increment.turn_log import TURN_LOG_COLUMNS, TurnLog
from lychee_ray.io.store.deltas import read_delta_manifest
from lychee_ray.io.store.layout import StoreLayout
from lychee_ray.io.store.marker import CommitMarker
from lychee_ray.io.store.reader import ConversationData, read_delta, read_part

V = TypeVar("V")

# what a queued append's delta writes: turn rows and the passages of long ones (a kept state takes
# those in; a delta touching anything else means another process changed the segmentation)
_APPENDED_TABLES = ("turns", "passages")


class _Bounded(Generic[V]):
    """A map bounded to ``max_items`` entries, least recently put dropped first (thread-safe):
    cachetools' FIFOCache (a put moves its key to the end) behind our lock."""

    def __init__(self, max_items: int) -> None:
        self.max_items = max_items
        self._items: FIFOCache[str, V] = FIFOCache(maxsize=max_items)
        self._lock = threading.Lock()

    def get(self, key: str) -> V | None:
        with self._lock:
            return self._items.get(key)

    def take(self, key: str) -> V | None:
        """The entry, removed (the caller owns it until it puts it back)."""
        with self._lock:
            return self._items.pop(key, None)

    def drop(self, key: str) -> None:
        with self._lock:
            self._items.pop(key, None)

    def put(self, key: str, value: V) -> None:
        with self._lock:
            self._items[key] = value


class StoredCache:
    """What an appending process keeps of the conversations it appends to, each bounded to
    ``max_items`` conversations: their :class:`TurnLog` (queued appends), the state after their
    last increment (:class:`~lychee_ray.ingest.increment.stored.StoredConversation`: appends that encode) and
    their tables as last read (a whole read of a newer commit then reads only its new deltas)."""

    def __init__(self, max_items: int) -> None:
        self._logs: _Bounded[TurnLog] = _Bounded(max_items)
        self._stored: _Bounded[StoredConversation] = _Bounded(max_items)
        self._data: _Bounded[ConversationData] = _Bounded(max_items)

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
                    log.add(d.upserts.select(TURN_LOG_COLUMNS).to_pylist())
        else:
            log = TurnLog(marker)
            log.add(read_part(layout, "turns", marker, columns=TURN_LOG_COLUMNS).to_pylist())
        return log

    def put(self, log: TurnLog) -> None:
        """Keep ``log`` (most recently used; it must name a commit)."""
        assert log.marker is not None
        self._logs.put(log.marker.key, log)

    def take_stored(self, layout: StoreLayout, marker: CommitMarker) -> StoredConversation | None:
        """The kept :class:`~lychee_ray.ingest.increment.stored.StoredConversation` of the commit ``marker``
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
            if doc.get("deletes") or any(n for t, n in doc["tables"].items() if t not in _APPENDED_TABLES):
                return None
            deltas = read_delta(layout, marker.key, gen, list(_APPENDED_TABLES), kept.turn_vectors.shape[1])
            d = deltas.get("turns")
            if d is not None and d.upserts.num_rows:
                kept.add_turns(d.upserts.to_pylist(), d.vectors.vectors if d.vectors is not None else
                               np.zeros((0, kept.turn_vectors.shape[1]), np.float32), marker, gen)
            p = deltas.get("passages")
            if p is not None and p.vectors is not None:
                kept.add_passages(p.upserts, p.vectors)
            kept.applied.add(gen)
        kept.marker = marker
        return kept

    def keep_stored(self, stored: StoredConversation) -> None:
        """Keep a conversation's state for its next increment."""
        self._stored.put(stored.marker.key, stored)

    def data(self, key: str) -> ConversationData | None:
        """The conversation's tables as this process read them last (None: not kept): a load of a
        newer commit that only added deltas reads just those."""
        return self._data.get(key)

    def put_data(self, key: str, data: ConversationData) -> None:
        """Keep a conversation's loaded tables."""
        self._data.put(key, data)

    def forget(self, key: str) -> None:
        """Drop everything kept of conversation ``key`` (erased: nothing of it may seed a re-created
        id's state; entries are also checked by lineage when taken, see ``CommitMarker.extends``)."""
        for part in (self._logs, self._stored, self._data):
            part.drop(key)


def stored_state(layout: StoreLayout, marker: CommitMarker, cache: StoredCache | None) -> StoredConversation:
    """The committed conversation an increment starts from: the state this process kept after its
    last increment (taken out of ``cache``, brought up to ``marker`` by turn deltas), else read
    whole (only the deltas since, when ``cache`` holds its tables)."""
    stored = cache.take_stored(layout, marker) if cache is not None else None
    if stored is None:
        stored = load_stored(layout, marker, cache.data(marker.key) if cache is not None else None)
        if cache is not None and stored.data is not None:
            cache.put_data(marker.key, stored.data)
    return stored


def marker_open_turns(layout: StoreLayout, marker: CommitMarker, cache: StoredCache | None) -> list[str]:
    """Ids of the turns no segment covers in ``marker``'s commit (its last ``open_turns`` turns)."""
    if not marker.open_turns:
        return []
    cache = cache or StoredCache(1)
    log = cache.turn_log(layout, marker)
    cache.put(log)
    return log.waiting_turn_ids()


__all__ = ["StoredCache", "marker_open_turns", "stored_state"]
