"""Errors of the query service, each carrying its HTTP status and a stable code as data.

:class:`ServiceError` is what the service raises and the app turns into an ``ErrorBody`` response;
:func:`llm_error_status` maps an LLM failure kind (``LLMCallFailed.kind``) to 502 or 503.
"""

from __future__ import annotations

from typing import Literal

from fastapi.exceptions import RequestValidationError

# The ``error`` field of every error body: stable, for clients to branch on (``detail`` is prose).
ErrorCode = Literal[
    "unauthorized",  # 401: missing or wrong bearer key
    "forbidden",  # 403: a tenant's key on an admin endpoint (/v1/admin/*)
    "bad_request",  # 400: unreadable request framing (e.g. Content-Length)
    "too_large",  # 413: body over serve.max_request_bytes
    "not_found",  # 404: unknown conversation/user, or a conversation not the user's
    "invalid_request",  # 422: a request the store rejects
    "scope_violation",  # 500: the engine returned a result outside the query's scope (withheld)
    "llm_unavailable",  # 503: the LLM endpoint is unreachable/overloaded, or in its failure cooldown
    "llm_bad_reply",  # 502: the LLM answered unusably
    "history_conflict",  # 409: an appended turn id is stored with other content (``turn_id`` in the body)
    "conversation_deleting",  # 409: an append while the conversation is being erased (refused, not lost)
    "conversation_building",  # 409: a forget in a conversation whose first commit is still being written
    "conversation_replaced",  # 409: the conversation was erased and re-created while the write worked (refused)
    "config_mismatch",  # 409: the conversation was built with other settings/models than this service's
    "conversation_busy",  # 503: another writer held the conversation longer than appends.lock_timeout_s
    "overloaded",  # 503: the replica's bounded admission is full (Retry-After; serve/admission.py)
]

# LLM error kinds that mean "unreachable or overloaded" (503); the rest mean "answered unusably" (502).
UNAVAILABLE_KINDS = frozenset({"connection", "timeout", "rate_limited", "server_error"})


class ServiceError(Exception):
    """An error with an HTTP status, a stable code and a message meant for the client."""

    def __init__(self, status: int, code: ErrorCode, message: str, headers: dict[str, str] | None = None,
                 data: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code: ErrorCode = code
        self.message = message
        self.headers = headers or {}
        self.data = data or {}  # extra fields of the error body, for programs (e.g. the conflicting turn_id)


class EmbedderMismatch(ValueError):
    """The configured embedding model cannot serve this store: query vectors would not match its
    vectors. ``field`` names what differs (``model`` or ``dim``); ``store`` and ``service`` are the
    two values."""

    def __init__(self, field: Literal["model", "dim"], store: str | int, service: str | int) -> None:
        self.field, self.store, self.service = field, store, service
        if field == "model":
            msg = (f"the store was built with embedding model {store!r} but the service is configured "
                   f"with {service!r}: query vectors would not match (set embedding.model)")
        else:
            msg = f"the store's vectors have dimension {store}, the embedding model gives {service}"
        super().__init__(msg)


def invalid_field(field: str, msg: str, kind: str = "value_error", where: str = "body") -> RequestValidationError:
    """A 422 in FastAPI's own shape, for limits that come from configuration (``where``: body | query)."""
    return RequestValidationError([{"loc": [where, field], "msg": msg, "type": kind}])


def llm_error_status(kind: str | None) -> int:
    """HTTP status for an LLM failure of the given kind (``LLMCallFailed.kind``; None = unknown)."""
    return 503 if kind is None or kind in UNAVAILABLE_KINDS else 502


__all__ = ["UNAVAILABLE_KINDS", "EmbedderMismatch", "ErrorCode", "ServiceError", "invalid_field", "llm_error_status"]
