"""Segmentation and encoding off the request path: a bounded per-process queue.

Part of the service runtime. A queued append (:func:`~lychee_ray.ingest.append.queued.append_queued`) stores its turns and
returns; :class:`EncodeQueue` then runs the conversation's *catch-up* — an append of no turns,
which segments every unsegmented turn from the saved resume point and encodes the segments that
close — on one worker thread. A conversation waits in the queue at most once (one catch-up covers
every turn queued before it starts). The queue is bounded (``appends.queue_max``): a full
queue refuses, and the caller encodes inline instead, so work never piles up unbounded.

Nothing here is needed for durability: the queued turns are committed, and the marker counts them
(``unsegmented_turns``), so if this process dies the next append, flush or replica start picks them up.
"""

from __future__ import annotations

import logging
import math
import os
import threading
import time
from collections import OrderedDict, deque
from typing import Any
from collections.abc import Callable

log = logging.getLogger(__name__)

# Catch-up lags the stats' percentiles are taken over (the most recent ones): a reporting window,
# not a behaviour setting.
LAG_WINDOW = 1000


class EncodeQueue:
    """One daemon worker running ``catch_up(conversation_id)`` for submitted conversations, in
    submission order; ``retry_s``: a catch-up that found the conversation busy (another writer) is
    tried again after this long."""

    def __init__(self, catch_up: Callable[[str], object], max_pending: int, retry_s: float, nice: int = 0,
                 warm: Callable[[], object] | None = None) -> None:
        """``warm``: run first on the worker thread (e.g. load the encoding's own model), so the first
        catch-up does not pay for it."""
        self._catch_up = catch_up
        self._warm = warm
        self.max_pending = max_pending
        self.retry_s = retry_s
        self.nice = nice
        self._pending: OrderedDict[str, float] = OrderedDict()  # conversation id -> first submit time
        self._running: str | None = None
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.done = 0
        self.errors = 0
        # seconds from submit to catch-up committed, the last ones (a deque: the stats' window)
        self._lags: deque[float] = deque(maxlen=LAG_WINDOW)

    def submit(self, conversation_id: str) -> bool:
        """Queue a conversation's catch-up; False when the queue is full (the caller encodes inline)."""
        with self._cond:
            if self._stopped:
                return False
            if conversation_id not in self._pending:
                if len(self._pending) >= self.max_pending:
                    return False
                self._pending[conversation_id] = time.monotonic()
            self._start()
            self._cond.notify_all()
            return True

    def cancel(self, conversation_id: str) -> bool:
        """Drop a conversation's waiting catch-up (its erasure: nothing of it is left to encode);
        True when one was waiting. A catch-up already running is fenced at its commit instead (it
        read the erased conversation's lineage: ingest/append/queued.py)."""
        with self._cond:
            found = self._pending.pop(conversation_id, None) is not None
            self._cond.notify_all()
            return found

    def start(self) -> None:
        """Start the worker (and its ``warm``) now rather than on the first submit."""
        with self._cond:
            if not self._stopped:
                self._start()

    def _start(self) -> None:
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="lychee-encode-queue", daemon=True)
            self._thread.start()

    def pending(self) -> list[str]:
        """Conversations waiting (and the one running)."""
        with self._cond:
            return list(self._pending) + ([self._running] if self._running and self._running not in self._pending else [])

    def drain(self, timeout_s: float) -> bool:
        """Wait until nothing is queued or running (tests, benchmarks, shutdown); True when idle."""
        end = time.monotonic() + timeout_s
        with self._cond:
            while self._pending or self._running:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(left)
        return True

    def stop(self) -> None:
        """Stop taking work (a catch-up already running finishes: its commit is atomic)."""
        with self._cond:
            self._stopped = True
            self._pending.clear()
            self._cond.notify_all()

    def stats(self) -> dict[str, Any]:
        with self._cond:
            lags = sorted(self._lags)

            def pct(q: float) -> float | None:  # nearest rank
                return round(lags[max(0, math.ceil(q * len(lags)) - 1)] * 1e3, 1) if lags else None

            return {"pending": len(self._pending) + (1 if self._running else 0), "done": self.done,
                    "errors": self.errors, "max_pending": self.max_pending,
                    "lag_p50_ms": pct(0.5), "lag_p95_ms": pct(0.95)}

    def _loop(self) -> None:
        _lower_priority(self.nice)
        if self._warm is not None:
            try:
                self._warm()
            except Exception:  # noqa: BLE001 — the first catch-up tries again and reports it
                log.exception("encode queue warm-up failed")
        while True:
            with self._cond:
                while not self._stopped and not self._pending:
                    self._cond.wait()
                if self._stopped:
                    return
                cid, since = self._pending.popitem(last=False)
                self._running = cid
            retry = False
            try:
                self._catch_up(cid)
                with self._cond:
                    self.done += 1
                    self._lags.append(time.monotonic() - since)
            except Exception as e:  # noqa: BLE001 — the worker outlives one bad catch-up; its turns stay queued in the store
                retry = getattr(e, "kind", None) in ("conversation_busy", "lease_lost")  # passes by itself
                with self._cond:
                    self.errors += 1
                log.warning("background encoding of %r not done (%s): %s", cid, getattr(e, "kind", type(e).__name__), e)
            finally:
                with self._cond:
                    self._running = None
                    self._cond.notify_all()
            if retry:
                threading.Timer(self.retry_s, self.submit, args=(cid,)).start()


def _lower_priority(nice: int) -> None:
    """Run the calling thread (and threads it starts later, e.g. a model's pool made on first use
    here) at a higher nice value: background encoding then yields the CPU to requests. Linux
    schedules threads as tasks, so this touches this thread only; elsewhere it does nothing."""
    if nice <= 0 or not hasattr(os, "setpriority"):
        return
    try:
        tid = threading.get_native_id()
        os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))
    except OSError as e:  # not permitted here: run at normal priority
        log.info("encode queue priority unchanged: %s", e)


__all__ = ["EncodeQueue"]
