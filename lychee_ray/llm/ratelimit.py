"""Client-side rate limiting for requests/min and tokens/min.

Two layers, so the code can later run cluster-wide inside a Ray actor:

* :class:`RateLimitState` — a plain, synchronous state machine (no I/O, no asyncio, explicit
  ``now``). ``try_acquire(now, tokens, key)`` either grants (returns 0.0) or says how many seconds
  to wait. A Ray actor can host one instance and expose its methods.
* :class:`WaitingRateLimiter` — the async waiting loop around such a state (FIFO per event loop).
  :class:`LocalRateLimiter` hosts the state in-process; a cluster-wide limiter subclasses
  :class:`WaitingRateLimiter` and forwards the three hooks to an actor.

Limit design. Each limited dimension (requests, tokens) has two rules, and a grant needs both:

1. *Hard cap, sliding-window log*: the sum of grants in the last ``60 s + window_margin_s`` plus the
   new one must not exceed the per-minute limit. This makes it impossible to exceed the limit in
   *any* 60 s window (hence in any calendar minute) as a server counts — unlike a plain token bucket
   whose capacity C lets ``C + limit`` through in the first minute. The margin absorbs arrival-time
   jitter (two grants 60.0 s apart may arrive 59.9 s apart).
2. *Pacing, continuous-refill token bucket*: rate = limit/60 per second, capacity = ``burst_s``
   seconds of refill. It spreads traffic evenly (providers also enforce limits over sub-minute
   periods) and prevents a thundering herd after a pause. The bucket may go into debt, so a request
   larger than the capacity is still admitted once the bucket is full, and the debt is repaid.

A single request larger than a whole minute's token limit is admitted alone in an empty window
(otherwise it could never run). Token grants are estimates (prompt + max completion); ``reconcile``
replaces them with the provider-reported usage and returns the difference to the bucket.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
import uuid
import weakref
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import dataclass
from typing import Protocol, runtime_checkable
from collections.abc import Awaitable, Callable

from lychee_ray.config import RateLimitConfig

Clock = Callable[[], float]
Sleep = Callable[[float], Awaitable[None]]

MINUTE_S = 60.0
# Float tolerance (s): waits this small count as zero, so simulated clocks cannot stall on rounding.
_EPS = 1e-9


@dataclass(frozen=True)
class Reservation:
    """A granted slot: one request and ``tokens`` estimated tokens."""

    key: str
    tokens: int
    waited_s: float = 0.0  # time spent in acquire()


@runtime_checkable
class RateLimiter(Protocol):
    """What the LLM client needs from a limiter (local or cluster-wide)."""

    async def acquire(self, estimated_tokens: int) -> Reservation:
        """Wait until one request of ``estimated_tokens`` tokens may be sent; reserve it."""
        ...

    async def reconcile(self, reservation: Reservation, actual_tokens: int) -> int:
        """Replace the estimate by the real usage; returns tokens given back (negative = overdraft)."""
        ...

    async def pause(self, seconds: float) -> None:
        """Make every acquirer wait at least ``seconds`` from now (429 Retry-After)."""
        ...


# ------------------------------------------------------------------------------------------------
# Plain state (hostable by a Ray actor)
# ------------------------------------------------------------------------------------------------


class BudgetState:
    """One limited dimension: sliding-window hard cap plus a pacing token bucket (see module doc)."""

    def __init__(self, limit_per_min: float, *, burst_s: float = 6.0, window_margin_s: float = 1.0, now: float = 0.0):
        if limit_per_min <= 0:
            raise ValueError("limit_per_min must be > 0 (use no BudgetState for 'unlimited')")
        self.limit = float(limit_per_min)
        self.window_s = MINUTE_S + window_margin_s
        self.rate = self.limit / MINUTE_S  # refill per second
        # At least one unit so that a 1-request grant is always possible.
        self.capacity = max(self.limit * burst_s / MINUTE_S, 1.0)
        self.level = self.capacity  # start full: a small burst may go at once
        self._last = now
        # Grants still inside the window: [time, amount, key]; _by_key points at the same lists.
        self._log: deque[list] = deque()
        self._by_key: dict[str, list] = {}
        self.used = 0.0  # sum of amounts in _log

    def _advance(self, now: float) -> None:
        if now > self._last:
            self.level = min(self.capacity, self.level + (now - self._last) * self.rate)
            self._last = now
        while self._log and self._log[0][0] + self.window_s <= now + _EPS:
            entry = self._log.popleft()
            self.used -= entry[1]
            if entry[2] is not None:
                self._by_key.pop(entry[2], None)
        if not self._log:
            self.used = 0.0  # clear float drift

    def wait_for(self, now: float, amount: float) -> float:
        """Seconds until ``amount`` could be granted (0.0 = now). Does not change the grants."""
        self._advance(now)
        a = min(amount, self.limit)  # oversize request: admitted alone in an empty window
        bucket_wait = 0.0
        need = min(a, self.capacity)
        if self.level < need:
            bucket_wait = (need - self.level) / self.rate
        window_wait = 0.0
        excess = self.used + a - self.limit
        if excess > _EPS:
            freed = 0.0
            for t, amt, _ in self._log:
                freed += amt
                if freed >= excess - _EPS:
                    window_wait = t + self.window_s - now
                    break
        return max(bucket_wait, window_wait, 0.0)

    def commit(self, now: float, amount: float, key: str | None = None) -> None:
        """Record a grant (call only right after :meth:`wait_for` returned 0.0)."""
        self.level -= amount  # may go negative: debt repaid by refill
        entry = [now, float(amount), key]
        self._log.append(entry)
        self.used += amount
        if key is not None:
            self._by_key[key] = entry

    def adjust(self, key: str, reserved: float, actual: float) -> None:
        """Replace a grant's reserved amount by the actual one."""
        diff = reserved - actual
        self.level = min(self.capacity, self.level + diff)
        entry = self._by_key.pop(key, None)
        if entry is not None:  # still inside the window: the hard cap counts the real amount
            entry[2] = None
            self.used += actual - entry[1]
            entry[1] = float(actual)

    def used_in_window(self, now: float) -> float:
        """Amount granted in the current hard-cap window."""
        self._advance(now)
        return self.used


class RateLimitState:
    """Requests/min and tokens/min state. Synchronous, clock passed in; not thread-safe by itself."""

    def __init__(self, cfg: RateLimitConfig, now: float = 0.0):
        kw = dict(burst_s=cfg.burst_s, window_margin_s=cfg.window_margin_s, now=now)
        self.requests = BudgetState(cfg.requests_per_min, **kw) if cfg.requests_per_min > 0 else None
        self.tokens = BudgetState(cfg.tokens_per_min, **kw) if cfg.tokens_per_min > 0 else None
        self.paused_until = float("-inf")

    def try_acquire(self, now: float, tokens: int, key: str) -> float:
        """Grant one request of ``tokens`` tokens under ``key`` and return 0.0, or return the wait."""
        wait = self.paused_until - now
        if self.requests is not None:
            wait = max(wait, self.requests.wait_for(now, 1))
        if self.tokens is not None:
            wait = max(wait, self.tokens.wait_for(now, tokens))
        if wait > _EPS:
            return wait
        if self.requests is not None:
            self.requests.commit(now, 1)
        if self.tokens is not None:
            self.tokens.commit(now, tokens, key)
        return 0.0

    def reconcile(self, now: float, key: str, reserved_tokens: int, actual_tokens: int) -> int:
        """Swap the reserved token estimate for the actual usage; returns reserved - actual."""
        if self.tokens is not None:
            self.tokens._advance(now)
            self.tokens.adjust(key, reserved_tokens, actual_tokens)
        return int(reserved_tokens - actual_tokens)

    def pause(self, now: float, seconds: float) -> float:
        """Nobody is granted anything before ``now + seconds``; returns the pause end."""
        self.paused_until = max(self.paused_until, now + max(0.0, seconds))
        return self.paused_until


# ------------------------------------------------------------------------------------------------
# Async waiting loop
# ------------------------------------------------------------------------------------------------


class _LoopPrims:
    """Per-event-loop primitives: a FIFO lock (only the head of the queue polls) and a wake-up event."""

    def __init__(self) -> None:
        self.lock = asyncio.Lock()
        self.wake = asyncio.Event()


class WaitingRateLimiter(ABC):
    """Async acquire/reconcile/pause around three state hooks (local state or a remote actor).

    Waiters queue FIFO (per event loop) so that a large token request is not starved by small
    ones; only the head polls the state. The head sleeps for the wait the state computed, but is
    woken early when a ``reconcile`` in this process gives tokens back. A cluster-wide limiter
    forwards the hooks to an actor that hosts a :class:`RateLimitState`::

        class ActorRateLimiter(WaitingRateLimiter):
            def __init__(self, actor):            # actor methods call state.<m>(time.monotonic(), ...)
                super().__init__()
                self._actor = actor
            async def _try_acquire(self, tokens, key):
                return await self._actor.try_acquire.remote(tokens, key)
            ...                                   # _reconcile, _pause likewise
    """

    def __init__(self, *, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        self._clock = clock
        self._sleep = sleep
        # Keys must be unique across processes when the state is shared (cluster-wide actor).
        self._key_prefix = uuid.uuid4().hex[:12]
        self._keys = itertools.count()
        self._prims: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopPrims] = weakref.WeakKeyDictionary()
        self._prims_lock = threading.Lock()

    # hooks -------------------------------------------------------------------------------------
    @abstractmethod
    async def _try_acquire(self, tokens: int, key: str) -> float:
        """Grant (0.0) or the seconds to wait."""

    @abstractmethod
    async def _reconcile(self, key: str, reserved: int, actual: int) -> int:
        """Reconcile in the state; returns reserved - actual."""

    @abstractmethod
    async def _pause(self, seconds: float) -> None:
        """Pause everyone in the state."""

    # public API --------------------------------------------------------------------------------
    def _loop_prims(self) -> _LoopPrims:
        loop = asyncio.get_running_loop()
        with self._prims_lock:
            prims = self._prims.get(loop)
            if prims is None:
                prims = self._prims[loop] = _LoopPrims()
        return prims

    async def acquire(self, estimated_tokens: int) -> Reservation:
        """Wait for a slot for one request of ``estimated_tokens`` tokens."""
        tokens = max(0, int(estimated_tokens))
        key = f"{self._key_prefix}-{next(self._keys)}"
        prims = self._loop_prims()
        start = self._clock()
        async with prims.lock:
            while True:
                prims.wake.clear()
                wait = await self._try_acquire(tokens, key)
                if wait <= 0:
                    return Reservation(key=key, tokens=tokens, waited_s=max(0.0, self._clock() - start))
                await self._sleep_or_wake(wait, prims.wake)

    async def _sleep_or_wake(self, seconds: float, wake: asyncio.Event) -> None:
        sleeper = asyncio.ensure_future(self._sleep(seconds))
        waker = asyncio.ensure_future(wake.wait())
        try:
            await asyncio.wait({sleeper, waker}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for t in (sleeper, waker):
                if not t.done():
                    t.cancel()
            await asyncio.gather(sleeper, waker, return_exceptions=True)

    async def reconcile(self, reservation: Reservation, actual_tokens: int) -> int:
        """Swap the estimate for the real usage; wakes the head waiter when tokens came back."""
        diff = await self._reconcile(reservation.key, reservation.tokens, max(0, int(actual_tokens)))
        if diff > 0:
            self._wake_all()
        return diff

    async def pause(self, seconds: float) -> None:
        """Everyone waits until ``seconds`` from now (used on 429 Retry-After)."""
        await self._pause(seconds)

    def _wake_all(self) -> None:
        with self._prims_lock:
            targets = list(self._prims.items())
        for loop, prims in targets:
            if loop.is_closed():
                continue
            try:
                loop.call_soon_threadsafe(prims.wake.set)
            except RuntimeError:  # loop closed in between
                pass


class LocalRateLimiter(WaitingRateLimiter):
    """In-process limiter for one :class:`RateLimitConfig` (0 = that limit is off).

    Safe to share between event loops and threads (the state sits behind a ``threading.Lock``);
    all users in one process then share the limits.
    """

    def __init__(self, cfg: RateLimitConfig, *, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep):
        super().__init__(clock=clock, sleep=sleep)
        self.config = cfg
        self._state_lock = threading.Lock()
        self.state = RateLimitState(cfg, now=clock())

    async def _try_acquire(self, tokens: int, key: str) -> float:
        with self._state_lock:
            return self.state.try_acquire(self._clock(), tokens, key)

    async def _reconcile(self, key: str, reserved: int, actual: int) -> int:
        with self._state_lock:
            return self.state.reconcile(self._clock(), key, reserved, actual)

    async def _pause(self, seconds: float) -> None:
        with self._state_lock:
            self.state.pause(self._clock(), seconds)


class NoopRateLimiter:
    """No limits. ``pause`` still works, so a 429 Retry-After is honoured even without limits."""

    def __init__(self, *, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> None:
        self._clock = clock
        self._sleep = sleep
        self._keys = itertools.count()
        self.paused_until = float("-inf")

    async def acquire(self, estimated_tokens: int) -> Reservation:
        start = self._clock()
        while (wait := self.paused_until - self._clock()) > 0:
            await self._sleep(wait)
        return Reservation(key=f"n{next(self._keys)}", tokens=max(0, int(estimated_tokens)),
                           waited_s=max(0.0, self._clock() - start))

    async def reconcile(self, reservation: Reservation, actual_tokens: int) -> int:
        return int(reservation.tokens - max(0, int(actual_tokens)))

    async def pause(self, seconds: float) -> None:
        self.paused_until = max(self.paused_until, self._clock() + max(0.0, seconds))


def make_rate_limiter(cfg: RateLimitConfig, *, clock: Clock = time.monotonic, sleep: Sleep = asyncio.sleep) -> RateLimiter:
    """A :class:`LocalRateLimiter` when any limit is set, else a :class:`NoopRateLimiter`."""
    if cfg.requests_per_min > 0 or cfg.tokens_per_min > 0:
        return LocalRateLimiter(cfg, clock=clock, sleep=sleep)
    return NoopRateLimiter(clock=clock, sleep=sleep)
