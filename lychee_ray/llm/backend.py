"""Which LLM backend runs: ``openai`` (a real endpoint) or ``rules`` (deterministic, offline).

The ``rules`` backend implements the same three roles (encode, plan, answer) without a model;
its role logic arrives with the encoder / planner / answer modules. This module only decides
which backend is in effect and builds the ``openai`` transport.
"""

from __future__ import annotations

import logging
import os
import threading
from lychee_ray.config import ConfigError, LLMConfig, LycheeConfig
from lychee_ray.llm.client import LLMClient
from lychee_ray.llm.ratelimit import RateLimiter
from lychee_ray.llm.usage import UsageLedger
from lychee_ray.names import AUTO, LLM_BACKEND_CHOICES, OPENAI_BACKEND, RULES_BACKEND, LLMBackend

log = logging.getLogger(__name__)

# Roles every backend provides (the judge is an evaluation concern and needs a real LLM).
ROLES: tuple[str, ...] = ("encode", "plan", "answer")
# What the manifest / reports say about each backend, so results are never mistaken for an LLM's.
BACKEND_DESCRIPTIONS: dict[str, str] = {
    OPENAI_BACKEND: "LLM via an OpenAI-compatible endpoint (schema-constrained JSON)",
    RULES_BACKEND: "offline deterministic heuristics, no LLM (sentence records, heuristic planner, extractive answer)",
}

_logged_rules = False
_log_lock = threading.Lock()
# Set once the notice was logged, so the processes a command starts after it (a local Ray's
# workers, subprocesses) do not log it again: one notice per command.
NOTICE_ENV = "LYCHEE_BACKEND_NOTICE"


# The one notice of an automatic choice of the rules backend (short: it is a command's only notice).
RULES_NOTICE = "LLM backend: rules (offline heuristics, no LLM) — no endpoint configured (OPENAI_BASE_URL or llm.base_url)"


def claim_notice() -> bool:
    """True the first time in a command (this process and the processes it starts afterwards:
    :data:`NOTICE_ENV`): whoever gets True says :data:`RULES_NOTICE`, once."""
    global _logged_rules
    with _log_lock:
        if _logged_rules or os.environ.get(NOTICE_ENV) == RULES_BACKEND:
            return False
        _logged_rules = True
        os.environ[NOTICE_ENV] = RULES_BACKEND  # inherited by the command's workers (Ray, subprocesses)
        return True


def auto_rules(llm_cfg: LLMConfig, explicit: str | None = None) -> bool:
    """Whether ``auto`` (no explicit choice, no endpoint) picks the rules backend."""
    choice = explicit if explicit is not None else llm_cfg.backend
    return choice == AUTO and not (llm_cfg.base_url or llm_cfg.api_key)


def resolve_backend(llm_cfg: LLMConfig, explicit: str | None = None) -> LLMBackend:
    """The backend in effect: ``explicit`` (``--llm``) wins, then ``llm.backend``.

    ``auto`` means openai when ``llm.base_url`` or ``llm.api_key`` is set, else rules; choosing
    rules that way logs :data:`RULES_NOTICE` once per command (per process, and not again in
    processes it starts afterwards; a command that says it in a line of its own claims it first:
    :func:`claim_notice`).
    """
    choice = explicit if explicit is not None else llm_cfg.backend
    if choice not in LLM_BACKEND_CHOICES:
        raise ConfigError(f"unknown LLM backend {choice!r}; expected one of {', '.join(LLM_BACKEND_CHOICES)}")
    if choice == OPENAI_BACKEND:
        return OPENAI_BACKEND
    if choice == RULES_BACKEND:
        return RULES_BACKEND
    if llm_cfg.base_url or llm_cfg.api_key:
        return OPENAI_BACKEND
    if claim_notice():
        log.warning(RULES_NOTICE)
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
