"""What the test server saw: every request with its arrival time, status and billed tokens, and
the counts a provider's limiter would make of them (per calendar minute, per rolling window).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

CHAT_PATH = "/v1/chat/completions"
EMBED_PATH = "/v1/embeddings"
_MINUTE_S = 60


@dataclass
class RecordedRequest:
    """One request as the server saw it."""

    path: str
    body: Any
    t: float  # unix time of arrival
    t_mono: float  # monotonic time of arrival (for windows)
    headers: dict[str, str] = field(default_factory=dict)
    status: int | None = None  # None = connection dropped
    action: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def tokens(self) -> int:
        """Prompt plus completion tokens billed for this request."""
        return self.prompt_tokens + self.completion_tokens

    @property
    def accepted(self) -> bool:
        """True when the server answered 200."""
        return self.status == 200


def max_in_window(events: list[tuple[float, float]], window_s: float) -> float:
    """Largest sum of weights of events within any half-open window of ``window_s`` seconds."""
    events = sorted(events)
    best = total = 0.0
    lo = 0
    for t, w in events:
        total += w
        while events[lo][0] <= t - window_s:
            total -= events[lo][1]
            lo += 1
        best = max(best, total)
    return best


class RequestStats:
    """Counting over recorded requests; the host class provides :attr:`requests`."""

    @property
    def requests(self) -> list[RecordedRequest]:  # pragma: no cover — provided by the host class
        raise NotImplementedError

    def chat_requests(self) -> list[RecordedRequest]:
        """Requests to the chat endpoint."""
        return [r for r in self.requests if r.path == CHAT_PATH]

    def _select(self, path: str | None, accepted_only: bool) -> list[RecordedRequest]:
        return [r for r in self.requests if (path is None or r.path == path) and (r.accepted or not accepted_only)]

    def requests_per_minute(self, path: str | None = CHAT_PATH, accepted_only: bool = False) -> dict[int, int]:
        """Calendar minute (unix time // 60) → number of requests that arrived in it."""
        out: dict[int, int] = {}
        for r in self._select(path, accepted_only):
            m = int(r.t // _MINUTE_S)
            out[m] = out.get(m, 0) + 1
        return out

    def tokens_per_minute(self, path: str | None = CHAT_PATH) -> dict[int, int]:
        """Calendar minute → tokens billed (prompt + completion) for requests arriving in it."""
        out: dict[int, int] = {}
        for r in self._select(path, False):
            m = int(r.t // _MINUTE_S)
            out[m] = out.get(m, 0) + r.tokens
        return out

    def max_requests_in_window(self, window_s: float = 60.0, path: str | None = CHAT_PATH,
                               accepted_only: bool = False) -> int:
        """Most requests that arrived within any rolling ``window_s`` window."""
        return int(max_in_window([(r.t_mono, 1.0) for r in self._select(path, accepted_only)], window_s))

    def max_tokens_in_window(self, window_s: float = 60.0, path: str | None = CHAT_PATH) -> int:
        """Most tokens billed within any rolling ``window_s`` window (by arrival time)."""
        return int(max_in_window([(r.t_mono, float(r.tokens)) for r in self._select(path, False)], window_s))

    def minutes_over_limit(self, requests_per_min: float, path: str | None = CHAT_PATH) -> list[int]:
        """Calendar minutes in which more than ``requests_per_min`` requests arrived."""
        return sorted(m for m, n in self.requests_per_minute(path).items() if n > requests_per_min)


__all__ = ["CHAT_PATH", "EMBED_PATH", "RecordedRequest", "RequestStats", "max_in_window"]
