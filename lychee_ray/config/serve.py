"""Sections for the query service (``serve``)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lychee_ray.config.base import Section

_SHA256_HEX = re.compile(r"[0-9a-f]{64}")


class ApiKeyConfig(BaseModel):
    """One API key of the query service (docs/serving.md "Tenancy"): who holds it (``name``, shown in
    logs and stats instead of the key), the SHA-256 of the key (hex; the key itself is never kept in
    configuration) and what it may touch — conversations whose owner is one of ``users`` or starts
    with one of ``user_prefixes`` — or everything, with ``admin``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=128)
    sha256: str = Field(repr=False)
    users: list[str] = Field(default_factory=list)
    user_prefixes: list[str] = Field(default_factory=list)
    admin: bool = False

    @model_validator(mode="before")
    @classmethod
    def _no_plaintext(cls, v: Any) -> Any:
        if isinstance(v, dict) and "key" in v:
            raise ValueError("a plaintext key does not belong in configuration: give its sha256 (hex of "
                             "`printf '%s' KEY | sha256sum`), or pass the key in env LYCHEE_SERVE_KEYS")
        return v

    @field_validator("sha256")
    @classmethod
    def _hex(cls, v: str) -> str:
        v = v.strip().lower()
        if not _SHA256_HEX.fullmatch(v):
            raise ValueError("sha256 must be 64 hex digits (the SHA-256 of the key)")
        return v

    @model_validator(mode="after")
    def _scoped(self) -> ApiKeyConfig:
        if any(not p for p in self.user_prefixes):
            raise ValueError(f"key {self.name!r}: an empty user prefix would match every user; use admin: true")
        if not self.admin and not self.users and not self.user_prefixes:
            raise ValueError(f"key {self.name!r} may touch nothing: give users, user_prefixes or admin: true")
        return self


class ServeAutoscalingConfig(Section):
    """Ray Serve autoscaling of the query deployment (replaces ``serve.replicas`` when enabled)."""

    enabled: bool
    min_replicas: int = Field(ge=0)
    max_replicas: int = Field(ge=1)
    # Ongoing requests per replica the autoscaler aims for.
    target_ongoing_requests: float = Field(gt=0)
    upscale_delay_s: float = Field(ge=0)
    downscale_delay_s: float = Field(ge=0)

class ServeConfig(Section):
    """Query service (Ray Serve + FastAPI ingress, DESIGN §4)."""

    # Bind address of Serve's HTTP proxy: loopback unless deliberately opened.
    host: str
    port: int = Field(ge=1, le=65535)
    # Bearer token required on every endpoint except /healthz and the API docs (None = no auth); env
    # LYCHEE_SERVE_TOKEN. With per-tenant keys it stays valid as an admin key (backward compatible).
    token: str | None = Field(repr=False)
    # Per-tenant API keys (hashed), each scoped to users or user-id prefixes, or admin; env
    # LYCHEE_SERVE_KEYS adds keys given in plaintext (hashed when read). Empty and no token = no auth.
    keys: list[ApiKeyConfig] = Field(repr=False)
    # Fixed replica count (ignored when autoscaling is enabled).
    replicas: int = Field(ge=1)
    # CPUs Ray reserves per replica (fractional: a 2-core machine also runs the proxy and the clients).
    replica_num_cpus: float = Field(gt=0)
    # Serve's per-request access log lines (proxy and replica log files, shipped by Ray's log
    # monitor) cost CPU on every request (docs/serving.md "Switches"), so off unless wanted for
    # auditing; errors are logged either way.
    access_log: bool
    # Requests one replica works on at once (the service's own admission, serve/admission.py); more
    # wait in its queue.
    max_ongoing_requests: int = Field(ge=1)
    # Requests waiting for a slot per replica beyond that; more get the service's JSON 503
    # "overloaded" with Retry-After (-1 = unbounded).
    max_queued_requests: int = Field(ge=-1)
    # A request waiting longer than this for a slot gets that 503 too.
    max_queue_wait_s: float = Field(gt=0)
    # Retry-After (seconds) of a 503 "overloaded".
    overload_retry_after_s: int = Field(ge=1)
    # Ray Serve hands a replica max_ongoing_requests + max_queued_requests + this many requests at
    # once (health checks, docs, refusals in flight), so the service sheds load before Serve would.
    proxy_headroom: int = Field(ge=0)
    # Serve's own queue in front of the replicas (-1 = unbounded): its plain-text 503 is a backstop.
    proxy_max_queued_requests: int = Field(ge=-1)
    # Serve's HTTP request timeout (a request still running after this gets 408/503).
    request_timeout_s: float = Field(gt=0)
    autoscaling: ServeAutoscalingConfig
    # Loaded conversations per replica (LRU); overrides query.max_conversations in the service.
    cache_max_conversations: int = Field(ge=1)
    # Approximate bytes of loaded conversations per replica (LRU; 0 = count bound only).
    cache_max_bytes: int = Field(ge=0)
    # Request bodies larger than this get 413.
    max_request_bytes: int = Field(ge=256)
    # Longer questions get 422.
    max_question_chars: int = Field(ge=1)
    # recent_turns of one query: their characters in all at most (the planner sees a token-bounded part)
    max_recent_turns_chars: int = Field(ge=0)
    # Largest budget_tokens a request may ask for (422 above).
    max_budget_tokens: int = Field(ge=0)
    # GET /v1/conversations: conversations per page when the request names no limit, and the most it may ask for.
    list_page_size: int = Field(ge=1)
    list_max_page_size: int = Field(ge=1)
    # Coalesce query embeddings of concurrent requests (@serve.batch); None = auto: on with the
    # openai embedding backend (one HTTP call for many), off with the local model (the hops through
    # the event loop cost more CPU than one ONNX call per search).
    batch_embeddings: bool | None
    # @serve.batch over query embeddings of concurrent requests: requests per batch (capped at
    # max_ongoing_requests / 2), wait for more; requests arriving during a model call share the next one.
    batch_max_size: int = Field(ge=1)
    batch_wait_ms: float = Field(ge=0)
    # Torch intra-op threads per replica for query embeddings (0 = embedding.num_threads / torch default).
    torch_threads: int = Field(ge=0)
    # Worker threads running searches in one replica; 0 = auto: 1 with the local embedding model (a
    # search is CPU-bound Python: more threads only trade the GIL, scale with replicas instead),
    # max_ongoing_requests with the openai embedding backend (searches wait on the network).
    search_threads: int = Field(ge=0)
    # Environment for the Ray processes when lychee-ray starts its own local Ray to serve (Serve reads
    # these in the proxy and the replicas at start; variables already set in the environment win).
    # Default: the replica's user code and the proxy's router run on their process's main event loop
    # instead of extra threads (one cross-thread hop less per request). With RAY_ADDRESS set
    # the cluster's own environment decides.
    ray_env: dict[str, str]
    # Seconds between checks of the store for new or rebuilt conversations (0 = only POST /v1/admin/reload).
    reload_interval_s: float = Field(ge=0)
    # After an LLM failure, plan with rules and fail /v1/query fast (503) for this long (0 = always retry).
    llm_cooldown_s: float = Field(ge=0)

    @field_validator("ray_env", mode="before")
    @classmethod
    def _env_strings(cls, v: Any) -> Any:
        """Environment values are strings; YAML/--set give numbers and booleans (Ray reads "1"/"0")."""
        if isinstance(v, dict):
            return {str(k): ("1" if x else "0") if isinstance(x, bool) else str(x) for k, x in v.items()}
        return v

    @model_validator(mode="after")
    def _unique_keys(self) -> ServeConfig:
        seen: dict[str, str] = {}
        for k in self.keys:
            if k.sha256 in seen:
                raise ValueError(f"serve.keys: {k.name!r} and {seen[k.sha256]!r} are the same key")
            seen[k.sha256] = k.name
        return self

    @model_validator(mode="after")
    def _page_sizes(self) -> ServeConfig:
        if self.list_page_size > self.list_max_page_size:
            raise ValueError(f"serve.list_page_size ({self.list_page_size}) exceeds serve.list_max_page_size "
                             f"({self.list_max_page_size})")
        return self
