"""The loaded-conversation cache: a bounded LRU of :class:`~lychee_ray.query.view.ConversationView`.

Loading a conversation (columns, FAISS indexes, BM25) is the expensive part of a cold query, so
views are kept; a conversation rebuilt since it was loaded (its commit marker changed) is reloaded —
when the new commit only added delta generations, by reading just those (io/store/deltas.py), and
when those only appended turns, by extending the view with them (query/view_extend.py).

A commit that changed records, nodes or segments (an encoding, a flush) needs the view built again,
which costs the whole conversation. With ``rebuild="background"`` a conversation of at least
``background_min_rows`` rows is rebuilt in the cache's own thread instead of on the request:
meanwhile requests get the previous view with every turn of the new commit added (a *lagging*
view: new records show up when the rebuild lands, appended turns at once). A commit that changed or
removed a turn the cached view shows is always rebuilt on the request.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from contextlib import contextmanager
from collections.abc import Callable, Iterator

from lychee_ray.io.store import ConversationData, StoreReader
from lychee_ray.query.errors import UnknownConversation
from lychee_ray.query.pacing import Pause
from lychee_ray.query.view import ConversationView
from lychee_ray.query.view_extend import DERIVED_TABLES, extend_with_turns
from lychee_ray.names import BACKGROUND, Scheduling

log = logging.getLogger(__name__)


_TURNS = ("turns", "passages")  # what a lagging view is brought up to date with on a request


def _stamp(data: ConversationData) -> str | None:
    return data.marker.committed_at if data.marker is not None else None


class _Closed(Exception):
    """Raised at a rebuild's pause point once the cache is closed: the rebuild stops there."""


# how often a paused rebuild looks whether the searches it waits for are done (a search takes
# milliseconds; a finer poll would only cost CPU)
_PAUSE_POLL_S = 0.001


class ConversationCache:
    """Bounded LRU of :class:`ConversationView` (one load at a time per conversation).

    Bounded by count (``max_items``) and, when ``max_bytes`` > 0, by the views' approximate size
    (``ConversationView.nbytes``); the most recently used view is always kept. ``prepare`` runs on
    every view built in the background before it is installed (the engine primes line token
    counts there, as it does for views loaded on a request).
    """

    def __init__(self, reader: StoreReader, max_items: int, bm25_k1: float, bm25_b: float,
                 max_bytes: int = 0, *, rebuild: Scheduling = "inline",
                 background_min_rows: int = 0, max_pause_ms: float = 0.0,
                 prepare: Callable[[ConversationView, Pause], None] | None = None) -> None:
        self.reader = reader
        self.max_items = max_items
        self.max_bytes = max_bytes
        self.nbytes = 0
        self._k1, self._b = bm25_k1, bm25_b
        self.rebuild = rebuild
        self.background_min_rows = background_min_rows
        self.max_pause_s = max_pause_ms / 1000.0
        self.prepare = prepare
        self._requests = 0  # searches in flight (request()): a background rebuild pauses for them
        self._items: OrderedDict[str, ConversationView] = OrderedDict()
        self._lock = threading.Lock()
        self._loading: dict[str, threading.Lock] = {}
        self._pending: OrderedDict[str, None] = OrderedDict()  # conversations to rebuild, oldest first
        self._cond = threading.Condition(self._lock)
        self._worker: threading.Thread | None = None
        self._busy = False
        self._closed = False
        self.loads = 0
        self.extended = 0  # loads that extended the cached view with appended turns (exactly)
        self.lagged = 0  # loads answered by a lagging view while the rebuild runs in the background
        self.background_rebuilds = 0  # rebuilt views installed by the background thread
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
            view, how = None, "built"
            if v is not None and self._in_background(v) and self._derived_changed(conversation_id, v):
                # only the turns now (the new deltas' turn rows); records and nodes in the background
                turns = self.reader.load(conversation_id, previous=v.source, tables=_TURNS)
                view, how = extend_with_turns(v, turns, stamp, allow_lag=True), "lagged"
            if view is None:
                # an older view's data: a commit that only added deltas to it is read as those deltas
                prev = None if v is None else (v.derived_from if v.lagging else v.source)
                data = self.reader.load(conversation_id, previous=prev)
                if v is not None and not v.lagging:
                    view, how = extend_with_turns(v, data, stamp), "extended"
                if view is None:
                    view, how = ConversationView.from_data(data, self._k1, self._b, committed_at=stamp), "built"
            with self._lock:
                self._install(conversation_id, view)
                self.loads += 1
                self.extended += how == "extended"
                if how == "lagged":
                    self.lagged += 1
                    self._schedule(conversation_id)
            return view, True

    # -- background rebuilds -------------------------------------------------------------------------
    def _in_background(self, view: ConversationView) -> bool:
        return self.rebuild == BACKGROUND and view.num_turns + view.num_records >= self.background_min_rows

    def _derived_changed(self, conversation_id: str, view: ConversationView) -> bool:
        """Whether the view's records, nodes or segments are (or may be) behind the current commit."""
        if view.lagging or view.source is None:
            return True
        changed = self.reader.changed_tables(conversation_id, view.source)
        return changed is None or not DERIVED_TABLES.isdisjoint(changed)

    def _schedule(self, conversation_id: str) -> None:
        """Queue a rebuild of the conversation's view (holding ``_lock``)."""
        if self._closed:
            return
        self._pending[conversation_id] = None
        if self._worker is None:
            self._worker = threading.Thread(target=self._rebuild_loop, name="lychee-view-rebuild", daemon=True)
            self._worker.start()
        self._cond.notify_all()

    def _rebuild_loop(self) -> None:
        while True:
            with self._cond:
                while not self._pending and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                cid, _ = self._pending.popitem(last=False)
                self._busy = True
            try:
                self._rebuild(cid)
            except _Closed:
                return
            except Exception:  # noqa: BLE001 — the thread outlives one failed load; requests rebuild inline
                if self._closed:  # the store went away under a rebuild that was stopping anyway
                    return
                log.exception("background rebuild of %r failed; the next request rebuilds it", cid)
                with self._lock:
                    cur = self._items.get(cid)
                    if cur is not None and cur.lagging:
                        self._items.pop(cid)
                        self.nbytes -= cur.nbytes
            finally:
                with self._cond:
                    self._busy = False
                    self._cond.notify_all()

    def _rebuild(self, conversation_id: str) -> None:
        """Load the conversation whole (from the lagging view's records' data: only the deltas since)
        and build its view off the request path; install it — extended to the newest commit's turns
        when appends came meanwhile — unless the view is no longer lagging (rebuilt on a request,
        evicted, erased). A commit that changed records again meanwhile is built again, in turn."""
        with self._lock:
            cur = self._items.get(conversation_id)
        if cur is None or not cur.lagging:
            return
        base = cur.derived_from
        while True:
            self._pause()  # the request that queued this is still running: let it finish first
            data = self.reader.load(conversation_id, previous=base)
            self._pause()
            view = ConversationView.from_data(data, self._k1, self._b, committed_at=_stamp(data), pause=self._pause)
            if self.prepare is not None:
                self.prepare(view, self._pause)
            with self._lock:
                key_lock = self._loading.get(conversation_id)
            if key_lock is None:
                return  # evicted meanwhile
            with key_lock:  # no request loads the conversation while the result is installed
                with self._lock:
                    cur = self._items.get(conversation_id)
                if cur is None or not cur.lagging:
                    return
                marker = self.reader.markers.get(conversation_id)
                if marker is None:
                    return  # erased: the service's reload drops the view
                if data.marker is not None and not marker.same_commit(data.marker):
                    newer = self.reader.load(conversation_id, previous=data)  # appends since: their turns
                    grown = extend_with_turns(view, newer, _stamp(newer))
                    if grown is None:  # records changed again: build from the newer data
                        base = newer
                        continue
                    view = grown
                with self._lock:
                    if self._items.get(conversation_id) is cur:
                        self._install(conversation_id, view, touch=False)
                        self.background_rebuilds += 1
                return

    @contextmanager
    def request(self) -> Iterator[None]:
        """Mark a search in flight for its duration: background rebuilds pause while any is."""
        with self._lock:
            self._requests += 1
        try:
            yield
        finally:
            with self._lock:
                self._requests -= 1

    def _pause(self) -> None:
        """A background rebuild's pause point: wait (sleeping, so searches hold the interpreter
        lock undisturbed) while searches are in flight, at most ``max_pause_ms``; after
        :meth:`close`, stop the rebuild here."""
        deadline = time.monotonic() + self.max_pause_s
        while self._requests > 0 and not self._closed and time.monotonic() < deadline:
            time.sleep(_PAUSE_POLL_S)
        if self._closed:
            raise _Closed

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Wait until no background rebuild is queued or running (tests, benchmarks); False on timeout."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending and not self._busy, timeout)

    def close(self) -> None:
        """Stop the background thread (a rebuild in progress stops at its next pause point; nothing
        queued runs)."""
        with self._cond:
            self._closed = True
            self._pending.clear()
            self._cond.notify_all()

    # -- the LRU -------------------------------------------------------------------------------------
    def _install(self, conversation_id: str, view: ConversationView, touch: bool = True) -> None:
        """Put ``view`` in (holding ``_lock``), evicting least recently used views over the bounds."""
        old = self._items.get(conversation_id)
        if old is not None:
            self.nbytes -= old.nbytes
        self._items[conversation_id] = view  # a replaced view keeps its place ...
        if touch:
            self._items.move_to_end(conversation_id)  # ... unless this is a use (not a background install)
        self.nbytes += view.nbytes
        while len(self._items) > self.max_items or (
                self.max_bytes > 0 and self.nbytes > self.max_bytes and len(self._items) > 1):
            cid, gone = self._items.popitem(last=False)
            self.nbytes -= gone.nbytes
            self._loading.pop(cid, None)
            self._pending.pop(cid, None)
            self.evictions += 1

    def discard(self, conversation_id: str) -> bool:
        """Drop one view (e.g. a conversation no longer in the store); True when it was cached."""
        with self._lock:
            self._pending.pop(conversation_id, None)
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
                    "max_bytes": self.max_bytes, "loads": self.loads, "extended": self.extended,
                    "lagged": self.lagged, "background_rebuilds": self.background_rebuilds,
                    "rebuilds_pending": len(self._pending), "evictions": self.evictions}

    def __contains__(self, conversation_id: str) -> bool:
        with self._lock:
            return conversation_id in self._items

    def __len__(self) -> int:
        with self._lock:
            return len(self._items)

    def clear(self) -> None:
        with self._lock:
            self._items.clear()
            self._pending.clear()
            self.nbytes = 0


__all__ = ["ConversationCache"]
