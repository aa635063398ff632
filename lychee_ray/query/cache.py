"""The loaded-conversation cache: a bounded LRU of :class:`~lychee_ray.query.recall.ConversationView`.

Loading a conversation (columns, FAISS indexes, BM25) is the expensive part of a cold query, so
views are kept; a conversation rebuilt since it was loaded (its commit marker changed) is reloaded —
when the new commit only added delta generations, by reading just those (io/store/deltas.py).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from lychee_ray.io.store import MemoryStoreReader
from lychee_ray.query.errors import UnknownConversation
from lychee_ray.query.recall import ConversationView


class ConversationCache:
    """Bounded LRU of :class:`ConversationView` (one load at a time per conversation).

    Bounded by count (``max_items``) and, when ``max_bytes`` > 0, by the views' approximate size
    (``ConversationView.nbytes``); the most recently used view is always kept.
    """

    def __init__(self, reader: MemoryStoreReader, max_items: int, bm25_k1: float, bm25_b: float,
                 max_bytes: int = 0) -> None:
        self.reader = reader
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._k1, self._b = bm25_k1, bm25_b
        self._items: OrderedDict[str, ConversationView] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        self.loads = 0
        self.evictions = 0

    def get(self, conversation_id: str) -> tuple[ConversationView, bool]:
        """The view and whether this call loaded it."""
        marker = self.reader.markers.get(conversation_id)
        if marker is None:
            raise UnknownConversation(conversation_id)
        stamp = marker.committed_at
        with self._lock:
            v = self._items.get(conversation_id)
            if v is not None and v.committed_at == stamp:
                self._items.move_to_end(conversation_id)
                return v, False
            key_lock = self._loading.setdefault(conversation_id, threading.Lock())
        with key_lock:
            with self._lock:  # another thread may have loaded it meanwhile
                v = self._items.get(conversation_id)
                if v is not None and v.committed_at == stamp:
                    self._items.move_to_end(conversation_id)
                    return v, False
            # an older view's data: a commit that only added deltas to it is read as those deltas
            data = self.reader.load(conversation_id, previous=v.source if v is not None else None)
            view = ConversationView.from_data(data, self._k1, self._b, committed_at=stamp)
            with self._lock:
                old = self._items.pop(conversation_id, None)
                if old is not None:
                    self.nbytes -= old.nbytes
                self._items[conversation_id] = view
                self.nbytes += view.nbytes
                self.loads += 1
                while len(self._items) > self.max_items or (
                        self.max_bytes > 0 and self.nbytes > self.max_bytes and len(self._items) > 1):
                    cid, gone = self._items.popitem(last=False)
                    self.nbytes -= gone.nbytes
                    self._loading.pop(cid, None)
                    self.evictions += 1
            return view, True

    def discard(self, conversation_id: str) -> bool:
        """Drop one view (e.g. a conversation no longer in the store); True when it was cached."""
        with self._lock:
            v = self._items.pop(conversation_id, None)
            if v is not None:
                self.nbytes -= v.nbytes
            return v is not None

    def cached_ids(self) -> list[str]:
        """Cached conversation ids, least recently used first."""
        with self._lock:
            return list(self._items)

    def stats(self) -> dict[str, int]:
        with self._lock:
            return {"conversations": len(self._items), "bytes": self.nbytes, "max_conversations": self.max_items,
                    "max_bytes": self.max_bytes, "loads": self.loads, "evictions": self.evictions}

    def __contains__(self, conversation_id: str) -> bool:
        with self._lock:
            return conversation_id in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self.nbytes = 0


__all__ = ["ConversationCache"]
