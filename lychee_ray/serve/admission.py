"""Overload as a documented error: each replica admits a bounded number of
requests and refuses the rest itself, with the service's JSON error and ``Retry-After``.

:class:`AdmissionMiddleware` (pure ASGI) lets ``max_active`` requests work at once; up to
``max_waiting`` more wait for a slot (at most ``max_wait_s``); any other request gets
``503 {"error": "overloaded", "detail": …}`` with ``Retry-After: retry_after_s`` at once, before
its body is read. Ray Serve is configured to hand the replica more than that
(``lychee_ray/ray/serve.py`` ``deployment_options``), so Serve's own plain-text 503 stays a backstop
nobody meets under normal overload. Liveness, the API docs and ``/v1/admin/*`` are not counted:
operators can look at a replica that is shedding load.
"""

from __future__ import annotations

import asyncio
import json
import sys
import time
from typing import Any
from collections.abc import Callable

from lychee_ray.serve.middleware import ADMIN_PREFIX, OPEN_PATHS, route_path


class Admission:
    """One replica's admission state: the bounds, the counters (``/v1/admin/stats``) and the slots."""

    def __init__(self, max_active: int, max_waiting: int, max_wait_s: float, retry_after_s: int) -> None:
        self.max_active = max_active
        self.max_waiting = max_waiting  # -1: unbounded
        self.max_wait_s = max_wait_s
        self.retry_after_s = retry_after_s
        self.active = 0
        self.waiting = 0
        self.admitted = 0
        self.refused = 0
        self.timed_out = 0
        self._slots: asyncio.Semaphore | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def slots(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        if self._slots is None or self._loop is not loop:  # one per event loop (Serve's replica: one)
            self._slots, self._loop = asyncio.Semaphore(self.max_active), loop
        return self._slots

    def stats(self) -> dict[str, Any]:
        return {"max_active": self.max_active, "max_waiting": self.max_waiting, "active": self.active,
                "waiting": self.waiting, "admitted": self.admitted, "refused": self.refused,
                "timed_out": self.timed_out}


async def _acquire_within(slots: asyncio.Semaphore, timeout_s: float) -> None:
    """Acquire a slot, or raise a timeout error after ``timeout_s``."""
    if sys.version_info >= (3, 11):
        async with asyncio.timeout(timeout_s):
            await slots.acquire()
    else:  # Python 3.10 has no asyncio.timeout (raises asyncio.TimeoutError, not yet the builtin)
        await asyncio.wait_for(slots.acquire(), timeout_s)


class AdmissionMiddleware:
    """Bounded admission in front of the app (see the module doc)."""

    def __init__(self, app: Any, admission: Admission) -> None:
        self.app = app
        self.a = admission

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        path = route_path(scope)
        if path in OPEN_PATHS or path.startswith(ADMIN_PREFIX):
            return await self.app(scope, receive, send)
        a = self.a
        slots = a.slots()
        if slots.locked():  # no free slot: wait in the bounded queue, or be refused now
            if 0 <= a.max_waiting <= a.waiting:
                a.refused += 1
                return await self._overloaded(send, f"{a.active} requests running and {a.waiting} waiting")
            a.waiting += 1
            t0 = time.monotonic()
            try:
                await _acquire_within(slots, a.max_wait_s)
            except (TimeoutError, asyncio.TimeoutError):  # (one class from Python 3.11 on)
                a.timed_out += 1
                return await self._overloaded(send, f"no slot within {time.monotonic() - t0:.1f} s")
            finally:
                a.waiting -= 1
        else:
            await slots.acquire()
        a.active += 1
        a.admitted += 1
        try:
            return await self.app(scope, receive, send)
        finally:
            a.active -= 1
            slots.release()

    async def _overloaded(self, send: Callable, why: str) -> None:
        retry = self.a.retry_after_s
        body = json.dumps({"detail": f"the service is at capacity ({why}); retry after {retry} s",
                           "error": "overloaded"}).encode("utf-8")
        await send({"type": "http.response.start", "status": 503, "headers": [
            (b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
            (b"retry-after", str(retry).encode())]})
        await send({"type": "http.response.body", "body": body})


__all__ = ["Admission", "AdmissionMiddleware"]
