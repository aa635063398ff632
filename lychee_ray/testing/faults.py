"""Fault injection for the test server: error statuses, broken bodies, dropped connections, delays.

Together with :class:`~lychee_ray.testing.replies.Reply` these make the server's script language
(:data:`Action`): a queue of actions, one per request, e.g. ``[status(503), delay(2.0), ok("{}")]``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from email.utils import formatdate
from typing import Any
from collections.abc import Callable

from lychee_ray.testing.replies import Reply


@dataclass(frozen=True)
class Status:
    """An error status with an OpenAI-style error body and optional ``Retry-After`` header."""

    code: int
    retry_after: float | str | None = None
    message: str | None = None


@dataclass(frozen=True)
class RawBody:
    """An arbitrary HTTP body (e.g. malformed JSON) with the given status."""

    body: str
    code: int = 200
    content_type: str = "application/json"


@dataclass(frozen=True)
class Reset:
    """Close the connection without any reply (the client sees a connection reset)."""


@dataclass(frozen=True)
class Delay:
    """Wait ``seconds`` then perform ``then`` (None = the handler/default reply)."""

    seconds: float
    then: Action | None = None


Action = Reply | Status | RawBody | Reset | Delay
Handler = Callable[[dict[str, Any]], Action | str | dict | None]

# The error message a scripted status carries when the script names none (OpenAI's wording).
DEFAULT_MESSAGES = {
    400: "Bad request",
    401: "Unauthorized",
    404: "Not found",
    429: "Rate limit reached",
    500: "The server had an error while processing your request",
    502: "Bad gateway",
    503: "The engine is currently overloaded, please try again later",
}


def status(code: int, retry_after: float | str | None = None, message: str | None = None) -> Status:
    """An HTTP error (429, 500, 502, 503, 400, ...)."""
    return Status(code, retry_after=retry_after, message=message)


def delay(seconds: float, then: Action | None = None) -> Delay:
    """Reply after ``seconds`` (longer than the client's timeout = a timeout)."""
    return Delay(seconds, then)


def malformed_body(text: str = '{"id": "chatcmpl-broken", "choices": [') -> RawBody:
    """A 200 whose HTTP body is not valid JSON."""
    return RawBody(text)


def reset() -> Reset:
    """Drop the connection without replying."""
    return Reset()


def http_date(seconds_from_now: float) -> str:
    """An HTTP-date ``seconds_from_now`` in the future (for Retry-After date tests)."""
    return formatdate(time.time() + seconds_from_now, usegmt=True)


__all__ = [
    "DEFAULT_MESSAGES", "Action", "Delay", "Handler", "RawBody", "Reset", "Status", "delay", "http_date",
    "malformed_body", "reset", "status",
]
