"""The cluster-wide rate limiter: one actor holds the limit state, every process asks it."""

from __future__ import annotations

import time
import uuid
from typing import Any

import ray

from lychee_ray.config import RateLimitConfig
from lychee_ray.llm.ratelimit import RateLimitState, WaitingRateLimiter


@ray.remote(num_cpus=0)
class RateLimiterActor:
    """Hosts the one :class:`RateLimitState` every LLM call of the job goes through."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = RateLimitConfig.model_validate(cfg)
        self.state = RateLimitState(self.cfg, now=time.monotonic())
        self.grants: list[float] = []  # grant times, for calls/min reporting
        self.pauses = 0

    def try_acquire(self, tokens: int, key: str) -> float:
        now = time.monotonic()
        wait = self.state.try_acquire(now, tokens, key)
        if wait <= 0:
            self.grants.append(now)
        return wait

    def reconcile(self, key: str, reserved: int, actual: int) -> int:
        return self.state.reconcile(time.monotonic(), key, reserved, actual)

    def pause(self, seconds: float) -> float:
        self.pauses += 1
        return self.state.pause(time.monotonic(), seconds)

    def stats(self) -> dict[str, Any]:
        now = time.monotonic()
        last_min = sum(1 for t in self.grants if now - t <= 60.0)
        return {"granted": len(self.grants), "calls_last_min": last_min, "pauses": self.pauses,
                "limit_calls_per_min": self.cfg.requests_per_min}


class RayRateLimiter(WaitingRateLimiter):
    """The client-side face of :class:`RateLimiterActor` (same protocol as the local limiter)."""

    def __init__(self, actor: Any) -> None:
        super().__init__()
        self.actor = actor
        self._prefix = uuid.uuid4().hex[:8]  # reservation keys must be unique across processes

    async def _try_acquire(self, tokens: int, key: str) -> float:
        return await self.actor.try_acquire.remote(tokens, f"{self._prefix}-{key}")

    async def _reconcile(self, key: str, reserved: int, actual: int) -> int:
        return await self.actor.reconcile.remote(f"{self._prefix}-{key}", reserved, actual)

    async def _pause(self, seconds: float) -> None:
        await self.actor.pause.remote(seconds)
