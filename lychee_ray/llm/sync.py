"""The blocking API's event loop: one private loop in a daemon thread per client.

Sync callers (the query engine, the judge) submit coroutines to it, so one HTTP connection pool
stays alive across calls instead of a fresh loop (and pool) per call.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any
from collections.abc import Coroutine

_JOIN_TIMEOUT_S = 5.0  # closing never hangs on a loop that does not stop


class BackgroundLoop:
    """One private event loop in a daemon thread, started on first use."""

    def __init__(self, name: str = "lychee-llm-sync") -> None:
        self._lock = threading.Lock()
        self._name = name
        self.loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None

    def run(self, coro: Coroutine[Any, Any, Any]) -> Any:
        """Run ``coro`` on the loop and block until it finishes; returns its result."""
        with self._lock:
            if self.loop is None:
                self.loop = asyncio.new_event_loop()
                self._thread = threading.Thread(target=self.loop.run_forever, name=self._name, daemon=True)
                self._thread.start()
            loop = self.loop
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def close(self) -> None:
        """Stop the loop and its thread (a later :meth:`run` starts a fresh one)."""
        with self._lock:
            loop, thread, self.loop, self._thread = self.loop, self._thread, None, None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=_JOIN_TIMEOUT_S)
            loop.close()


__all__ = ["BackgroundLoop"]
