"""The segment encoder a build or an append uses, from configuration (one place for both)."""

from __future__ import annotations

from typing import Any

from lychee_ray.ingest.encode.base import SegmentEncoder
from lychee_ray.ingest.encode.rules import RulesEncoder
from lychee_ray.ingest.encode.system_prompt import SystemPromptOnce
from lychee_ray.config import LycheeConfig
from lychee_ray.llm.backend import make_llm_client
from lychee_ray.llm.ratelimit import RateLimiter
from lychee_ray.names import LLMBackend, OPENAI_BACKEND


def make_encoder(cfg: LycheeConfig, backend: LLMBackend, limiter: RateLimiter | None = None,
                 llm_client: Any = None) -> SegmentEncoder:
    """The segment encoder for ``backend``, encoding each distinct system prompt once per process
    (:class:`SystemPromptOnce`). ``openai`` uses ``llm_client`` when given (an append shares the
    caller's client and ledger), else a new client behind ``limiter``."""
    return SystemPromptOnce(_backend_encoder(cfg, backend, limiter, llm_client), cfg.build.system_prompt_cache)


def _backend_encoder(cfg: LycheeConfig, backend: LLMBackend, limiter: RateLimiter | None, llm_client: Any) -> SegmentEncoder:
    if backend == OPENAI_BACKEND:
        # delays the openai SDK's import (about a second) to builds that use it; the default is rules
        from lychee_ray.ingest.encode.openai import OpenAIEncoder

        client = llm_client if llm_client is not None else make_llm_client(cfg, limiter=limiter)
        return OpenAIEncoder(client, cfg.encoder, cfg.tokenizer)
    e = cfg.encoder
    return RulesEncoder(**e.rules.model_dump(), day_first=e.day_first, summary=e.mode == "summary", tools=e.tools)
