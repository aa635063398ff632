"""Which LLM backend runs: ``openai`` (a real endpoint) or ``rules`` (deterministic, offline).

The ``rules`` backend implements the same three roles (encode, plan, answer) without a model;
its role logic arrives with the encoder / planner / answer modules. This module only decides
which backend is in effect and builds the ``openai`` transport.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Literal, get_args

from lychee_ray.config import ConfigError, LLMConfig, LycheeConfig
from lychee_ray.llm.client import LLMClient
from lychee_ray.llm.ratelimit import RateLimiter
from lychee_ray.llm.usage import UsageLedger

log = logging.getLogger(__name__)

BackendName = Literal["openai", "rules"]
BACKENDS: tuple[str, ...] = get_args(BackendName)
OPENAI_BACKEND: BackendName = "openai"
RULES_BACKEND: BackendName = "rules"
# Roles every backend provides (the judge is an evaluation concern and needs a real LLM).
ROLES: tuple[str, ...] = ("encode", "plan", "answer")
# What the manifest / reports say about each backend, so results are never mistaken for an LLM's.
BACKEND_DESCRIPTIONS: dict[str, str] = {
    "openai": "LLM via an OpenAI-compatible endpoint (schema-constrained JSON)",
    "rules": "offline deterministic heuristics, no LLM (sentence records, heuristic planner, extractive answer)",
}

_logged_rules = False
_log_lock = threading.Lock()
# Set once the notice was logged, so the processes a command starts after it (a local Ray's
# workers, subprocesses) do not log it again: one notice per command.
NOTICE_ENV = "LYCHEE_BACKEND_NOTICE"


def resolve_backend(llm_cfg: LLMConfig, explicit: str | None = None) -> BackendName:
    """The backend in effect: ``explicit`` (``--llm``) wins, then ``llm.backend``.

    ``auto`` means openai when ``llm.base_url`` or ``llm.api_key`` is set, else rules; choosing
    rules that way logs one line saying so and why, once per command (per process, and not again in
    processes it starts afterwards: :data:`NOTICE_ENV`).
    """
    choice = explicit if explicit is not None else llm_cfg.backend
    if choice not in (*BACKENDS, "auto"):
        raise ConfigError(f"unknown LLM backend {choice!r}; expected one of auto, openai, rules")
    if choice == OPENAI_BACKEND:
        return OPENAI_BACKEND
    if choice == RULES_BACKEND:
        return RULES_BACKEND
    if llm_cfg.base_url or llm_cfg.api_key:
        return OPENAI_BACKEND
    global _logged_rules
    with _log_lock:
        if not _logged_rules and os.environ.get(NOTICE_ENV) != RULES_BACKEND:
            _logged_rules = True
            os.environ[NOTICE_ENV] = RULES_BACKEND  # inherited by the command's workers (Ray, subprocesses)
            log.warning(
                "LLM backend: rules (offline deterministic heuristics, not an LLM) because no endpoint is "
                "configured — set OPENAI_BASE_URL / LYCHEE_LLM_BASE_URL or OPENAI_API_KEY, or llm.base_url, "
                "to use a real model"
            )
    return RULES_BACKEND


def make_llm_client(
    cfg: LycheeConfig | LLMConfig,
    *,
    limiter: RateLimiter | None = None,
    ledger: UsageLedger | None = None,
) -> LLMClient:
    """An :class:`LLMClient` for ``cfg`` (whole config or its ``llm`` section).

    Without ``limiter`` it gets a process-local limiter from ``llm.rate_limit`` (the Ray job passes
    the cluster-wide one instead).
    """
    llm_cfg = cfg.llm if isinstance(cfg, LycheeConfig) else cfg
    return LLMClient(llm_cfg, limiter=limiter, ledger=ledger)
