"""Errors raised by the LLM layer.

Callers only ever see :class:`LLMCallFailed` (a call that ran out of attempts or met a permanent
error). :class:`AttemptError` is the per-attempt classification the retry loop works with.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from lychee_ray.llm.usage import CallUsage

# Error texts (provider messages, reply excerpts) are cut here: enough to diagnose, small in ledgers.
MAX_ERROR_TEXT = 500

# Why one attempt failed. The retry loop decides from the kind whether to try again.
ErrorKind = Literal[
    "rate_limited",  # HTTP 429
    "server_error",  # HTTP 5xx, 408, 409
    "timeout",  # no reply within llm.timeout_s
    "connection",  # refused / reset / closed without a reply
    "invalid_response",  # HTTP body the client could not read as a chat completion
    "invalid_json",  # message content is not JSON
    "schema_violation",  # JSON that does not validate against the requested schema
    "empty_reply",  # no content (or a refusal)
    "truncated",  # finish_reason == "length"
    "wrong_language",  # valid JSON whose text is in another language (script) than its source (caller's check)
    "client_error",  # other 4xx: bad request, auth, not found — permanent
]

RETRYABLE_KINDS: frozenset[str] = frozenset(
    {
        "rate_limited",
        "server_error",
        "timeout",
        "connection",
        "invalid_response",
        "invalid_json",
        "schema_violation",
        "empty_reply",
        "truncated",
        "wrong_language",
    }
)

# Kinds that mean "the server answered but the answer is unusable" (billed tokens, no result).
INVALID_REPLY_KINDS: frozenset[str] = frozenset(
    {"invalid_response", "invalid_json", "schema_violation", "empty_reply", "truncated", "wrong_language"}
)


class LLMError(Exception):
    """Base class of every error raised by :mod:`lychee_ray.llm`."""


class AttemptError(LLMError):
    """One attempt failed; ``kind`` says why and whether another attempt may help."""

    def __init__(self, kind: ErrorKind, message: str, *, retry_after_s: float | None = None,
                 reply_text: str | None = None) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind: ErrorKind = kind
        self.message = message
        # Server-requested pause (429 Retry-After), already capped; None when not sent.
        self.retry_after_s = retry_after_s
        # The content of a reply cut at the token limit (``truncated``): its complete parts may be
        # salvaged by the caller; None for other kinds.
        self.reply_text = reply_text

    @property
    def retryable(self) -> bool:
        """True when another attempt may succeed."""
        return self.kind in RETRYABLE_KINDS


class LLMCallFailed(LLMError):
    """An LLM call that did not produce a valid reply after all allowed attempts."""

    def __init__(self, stage: str, attempts: int, kind: str, message: str, *, model: str = "",
                 usage: CallUsage | None = None, reply_text: str | None = None) -> None:
        self.stage = stage
        self.attempts = attempts
        self.kind = kind
        self.error_text = message
        self.model = model
        # The ledger entry of the failed call (tokens the failed attempts still cost).
        self.usage = usage
        # The last attempt's content when it was cut at the token limit (kind ``truncated``), else None.
        self.reply_text = reply_text
        retry_note = "permanent error, not retried" if kind not in RETRYABLE_KINDS else "attempts exhausted"
        super().__init__(
            f"LLM call failed: stage={stage} model={model or '?'} after {attempts} attempt(s) "
            f"({retry_note}); last error [{kind}]: {message}"
        )

    def __reduce__(self):  # keep the structured fields when pickled (Ray ships exceptions)
        return (_rebuild_call_failed,
                (self.stage, self.attempts, self.kind, self.error_text, self.model, self.usage, self.reply_text))


def _rebuild_call_failed(stage: str, attempts: int, kind: str, message: str, model: str,
                         usage: CallUsage | None = None, reply_text: str | None = None) -> LLMCallFailed:
    return LLMCallFailed(stage, attempts, kind, message, model=model, usage=usage, reply_text=reply_text)
