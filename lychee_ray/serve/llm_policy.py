"""The LLM failure policy of one replica (DESIGN §4).

A failed LLM call (the planner's outage fallback, the answer call) marks the LLM unavailable for
``serve.llm_cooldown_s``. Meanwhile searches plan with the rules planner and ``/v1/query`` answers
503 with ``Retry-After`` at once; an answer call that fails maps to 503 (unreachable, overloaded) or
502 (an unusable reply) by :func:`~lychee_ray.serve.errors.llm_error_status`.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from lychee_ray.names import OPENAI_BACKEND, RULES_BACKEND, LLMBackend
from lychee_ray.query.results import QueryResult, SearchResult
from lychee_ray.serve.errors import ServiceError, llm_error_status

log = logging.getLogger(__name__)

# A plan fallback of this kind is the planner's own doing, not an LLM outage (no cooldown).
_PLAN_KINDS_NOT_OUTAGES = (None, "invalid_plan")


class LLMCooldown:
    """Whether the LLM may be called now, and the last error that said it may not."""

    def __init__(self, cooldown_s: float) -> None:
        self.cooldown_s = cooldown_s
        self.down_until = 0.0
        self.last_error: str | None = None

    def available(self) -> bool:
        """False while the LLM is in its failure cooldown."""
        return time.monotonic() >= self.down_until

    def failed(self, message: str) -> None:
        """Note a failed LLM call; with a cooldown configured the LLM is unavailable for its length."""
        self.last_error = message
        if self.cooldown_s > 0:
            self.down_until = time.monotonic() + self.cooldown_s
            log.warning("LLM marked unavailable for %.0f s: %s", self.cooldown_s, message)

    def planner_backend(self, backend: LLMBackend) -> LLMBackend | None:
        """The planner a search uses with ``backend`` configured: None = the configured one; "rules"
        while the LLM is in its failure cooldown."""
        if backend == OPENAI_BACKEND and not self.available():
            return RULES_BACKEND
        return None

    def note_plan(self, res: SearchResult) -> None:
        """Start the cooldown when the LLM planner fell back for an outage."""
        p = res.plan
        if p.backend == OPENAI_BACKEND and p.fallback and p.fallback_kind not in _PLAN_KINDS_NOT_OUTAGES:
            self.failed(f"plan: {p.fallback_reason}")

    def check_query(self, backend: LLMBackend) -> None:
        """503 (with ``Retry-After``) for a ``/v1/query`` while the LLM is in its cooldown."""
        if backend == OPENAI_BACKEND and not self.available():
            left = max(1, int(self.down_until - time.monotonic() + 0.999))
            raise ServiceError(503, "llm_unavailable",
                               f"the LLM endpoint is unavailable (last error: {self.last_error}); not retried for "
                               f"another {left} s; /v1/search still works", {"Retry-After": str(left)})

    def check_answer(self, res: QueryResult) -> None:
        """A failed answer call: start the cooldown and raise 503 (unavailable) or 502 (unusable reply)."""
        if not res.answer_error:
            return
        kind = res.answer_error_kind or "unknown"
        status = llm_error_status(res.answer_error_kind)
        self.failed(f"answer: {res.answer_error}")
        headers = {"Retry-After": str(max(1, int(self.cooldown_s)))} if status == 503 else {}
        what = "unavailable" if status == 503 else "returned an unusable reply"
        raise ServiceError(status, "llm_unavailable" if status == 503 else "llm_bad_reply",
                           f"the answer call failed: the LLM endpoint {what} ({kind}): {res.answer_error}; "
                           f"/v1/search still works", headers)

    def stats(self, backend: LLMBackend) -> dict[str, Any]:
        """The ``llm`` part of ``/v1/admin/stats``."""
        return {"backend": backend, "available": backend != OPENAI_BACKEND or self.available(),
                "last_error": self.last_error}


__all__ = ["LLMCooldown"]
