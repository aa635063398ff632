"""LLM layer: the ``openai`` transport, rate limiting, token accounting and backend selection."""

from lychee_ray.llm.backend import (
    BACKEND_DESCRIPTIONS,
    ROLES,
    make_llm_client,
    resolve_backend,
)
from lychee_ray.llm.client import ChatResult, LLMClient
from lychee_ray.llm.errors import AttemptError, ErrorKind, LLMCallFailed, LLMError
from lychee_ray.llm.provider_errors import parse_retry_after
from lychee_ray.llm.prompts import prompt_tokens_estimate, schema_tokens
from lychee_ray.llm.ratelimit import (
    BudgetState,
    LocalRateLimiter,
    NoopRateLimiter,
    RateLimiter,
    RateLimitState,
    Reservation,
    WaitingRateLimiter,
    make_rate_limiter,
)
from lychee_ray.llm.schema import schema_for
from lychee_ray.llm.usage import STAGES, USAGE_SCHEMA, CallUsage, Stage, UsageLedger, UsageTotals

__all__ = [
    "AttemptError",
    "BACKEND_DESCRIPTIONS",
    "BudgetState",
    "CallUsage",
    "ChatResult",
    "ErrorKind",
    "LLMCallFailed",
    "LLMClient",
    "LLMError",
    "LocalRateLimiter",
    "NoopRateLimiter",
    "ROLES",
    "RateLimitState",
    "RateLimiter",
    "Reservation",
    "STAGES",
    "Stage",
    "USAGE_SCHEMA",
    "UsageLedger",
    "UsageTotals",
    "WaitingRateLimiter",
    "make_llm_client",
    "make_rate_limiter",
    "parse_retry_after",
    "prompt_tokens_estimate",
    "resolve_backend",
    "schema_for",
    "schema_tokens",
]
