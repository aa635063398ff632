"""Reading a provider's HTTP error replies: Retry-After headers and error bodies.

Kept apart from the retry loop so the parsing rules (header forms, which words mean "this
parameter is not supported") are plain functions with their own tests.
"""

from __future__ import annotations

import email.utils
import json
import time
from datetime import datetime, timezone
from typing import TYPE_CHECKING
from collections.abc import Mapping

from lychee_ray.llm.errors import MAX_ERROR_TEXT

if TYPE_CHECKING:  # annotations only: the SDK is imported where a call is made (llm/client.py)
    import openai

_MS_PER_S = 1000.0


def parse_retry_after(headers: Mapping[str, str], now: float | None = None) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``retry-after`` (seconds or HTTP date); None if absent."""
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / _MS_PER_S)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(raw)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=timezone.utc)
    now_dt = datetime.fromtimestamp(time.time() if now is None else now, tz=timezone.utc)
    return max(0.0, (when - now_dt).total_seconds())


def status_text(e: openai.APIStatusError) -> str:
    """``HTTP <code>: <provider message>``, cut to :data:`~lychee_ray.llm.errors.MAX_ERROR_TEXT`."""
    body = e.body
    msg = body.get("message") if isinstance(body, dict) else None
    text = f"HTTP {e.status_code}: {msg or e.message}"
    return text[:MAX_ERROR_TEXT]


def mentions(e: openai.APIStatusError, *words: str) -> bool:
    """Whether the error's message or body names any of ``words`` (case-insensitive).

    Why text: a refused request parameter is only ever reported in the provider's wording."""
    blob = (str(e.message) + " " + json.dumps(e.body, default=str)).lower()
    return any(w in blob for w in words)


__all__ = ["mentions", "parse_retry_after", "status_text"]
