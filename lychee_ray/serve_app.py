"""The query service's HTTP API (DESIGN §4): FastAPI app, request/response models, the service.

Plain Python, testable without Ray (``fastapi.testclient.TestClient(create_app(service))``);
``lychee_ray.serve_deploy`` mounts the same app as a Ray Serve ingress deployment.

Endpoints (all JSON; every one but ``/healthz`` needs ``Authorization: Bearer <serve.token>`` when a
token is configured)::

    POST /v1/query                 answer a question from one conversation's (or user's) memory
    POST /v1/search                the same without the answer call (works while the LLM is down)
    GET  /v1/conversations/{id}    counts, sessions, date range, records/segments, failed segments
    POST /v1/admin/reload          pick up conversations a build added or rebuilt
    GET  /v1/admin/stats           cache (count/bytes), resident memory, embedding batches, LLM state
    GET  /healthz                  liveness (no auth)
    GET  /docs, /openapi.json      the API

Status codes: 401 missing/wrong token; 404 unknown conversation or user, or a conversation that is
not the named user's (one message for both: nothing leaks); 413 body over ``serve.max_request_bytes``;
422 malformed body, with the reason; 502 the LLM answered unusably; 503 the LLM endpoint is
unreachable/overloaded (``Retry-After``; ``/v1/search`` keeps working with the rules planner) — and
from Ray Serve when its queue is full (load shedding).

Scaling: conversations are loaded lazily into :class:`lychee_ray.query.ConversationCache`, bounded by
``serve.cache_max_conversations`` and ``serve.cache_max_bytes``; the store is never loaded whole.
Query embeddings of concurrent requests are coalesced into one model call (``@serve.batch`` in the
deployment, :class:`lychee_ray.embed.AsyncBatchEmbedder` without Ray).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import hmac
import json
import logging
import os
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable

import numpy as np
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.security import HTTPBearer
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from . import __version__
from .config import LycheeConfig, load_config
from .embed import embed_batch
from .plan import QueryPlan, as_datetime
from .query import EvidenceItem, MemoryStore, QueryUsage, ScopeError, UnknownConversation
from .rerank import RerankReport
from .store import read_part

log = logging.getLogger(__name__)

OPEN_PATHS = frozenset({"/healthz"})
# LLM error kinds that mean "unreachable or overloaded" (503); the rest mean "answered unusably" (502).
UNAVAILABLE_KINDS = frozenset({"connection", "timeout", "rate_limited", "server_error"})
_KIND = re.compile(r"last error \[(\w+)\]")


# ------------------------------------------------------------------------------------------------
# request / response models
# ------------------------------------------------------------------------------------------------


class QueryRequest(BaseModel):
    """One question, scoped to one conversation or to all conversations of one user."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"conversation_id": "locomo-26", "question": "When did Caroline go to the LGBTQ support group?",
         "question_date": "2023-08-01"}]})

    conversation_id: str | None = Field(None, min_length=1, max_length=512,
                                        description="the conversation to read (needs no user_id)")
    user_id: str | None = Field(None, min_length=1, max_length=512,
                                description="read all of this user's conversations; with conversation_id: that "
                                            "conversation must be this user's")
    question: str = Field(min_length=1, description="the question (at most serve.max_question_chars characters)")
    question_date: str | None = Field(None, max_length=64,
                                      description="ISO date/datetime anchoring relative times ('last week'); default now")
    budget_tokens: int | None = Field(None, ge=0, description="context token budget (default query.select.budget_tokens)")

    @field_validator("question")
    @classmethod
    def _question_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is blank")
        return v

    @field_validator("question_date")
    @classmethod
    def _iso_date(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        d = as_datetime(v)  # ValueError with the reason -> 422
        if d is not None and d.tzinfo is not None:
            d = d.astimezone(timezone.utc).replace(tzinfo=None)
        return d.isoformat() if d is not None else None

    @model_validator(mode="after")
    def _scoped(self) -> "QueryRequest":
        if self.conversation_id is None and self.user_id is None:
            raise ValueError("a query needs conversation_id or user_id")
        return self


class SearchResponse(BaseModel):
    """Selected evidence for a question (everything but the answer)."""

    question_id: str
    question: str
    question_date: str | None
    conversation_ids: list[str] = Field(description="the conversations the query was scoped to")
    evidence: list[EvidenceItem] = Field(description="selected records / raw-turn windows, with ids, text, type, "
                                                     "time, source turn ids and score")
    plan: QueryPlan
    usage: QueryUsage
    timings: dict[str, float] = Field(description="milliseconds per stage; 'queue' = wait for a worker, "
                                                  "'server' = whole request in the service")
    context: str = Field(description="the evidence serialised exactly as the answer prompt shows it")
    budget_tokens: int
    pool_size: int
    rerank: RerankReport


class QueryResponse(SearchResponse):
    answer: str


class ConversationInfo(BaseModel):
    conversation_id: str
    user_id: str
    committed_at: str | None
    sessions: int
    turns: int
    records: int
    segments: int
    failed_segments: int
    failed_segment_ids: list[str] = Field(description="segments whose encoding failed (raw turns stay searchable)")
    nodes: int
    speakers: list[str]
    date_from: str | None = Field(description="first session start")
    date_to: str | None = Field(description="last session start")
    backend: str | None = None
    model: str | None = None
    embedder: str | None = None
    cached: bool = Field(description="loaded in this replica's cache right now")


class Health(BaseModel):
    status: str
    version: str
    conversations: int


class ReloadResult(BaseModel):
    conversations: int
    added: int
    removed: int
    evicted: int
    seconds: float


class ErrorBody(BaseModel):
    detail: str
    error: str


# ------------------------------------------------------------------------------------------------
# errors
# ------------------------------------------------------------------------------------------------


class ServiceError(Exception):
    """An error with an HTTP status, a stable code and a message meant for the client."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def _invalid(field: str, msg: str, kind: str = "value_error") -> RequestValidationError:
    """A 422 in FastAPI's own shape, for limits that come from configuration."""
    return RequestValidationError([{"loc": ["body", field], "msg": msg, "type": kind}])


def llm_error_status(message: str) -> tuple[int, str]:
    """(HTTP status, error kind) for an LLM failure message from the LLM layer."""
    m = _KIND.search(message or "")
    kind = m.group(1) if m else "unknown"
    return (503 if kind in UNAVAILABLE_KINDS or kind == "unknown" else 502), kind


# ------------------------------------------------------------------------------------------------
# the service
# ------------------------------------------------------------------------------------------------

# The event loop of the request a worker thread is serving (so the query engine's embed call can
# join the loop's batcher); contextvars travel into the worker through ``ctx.run``.
_REQUEST_LOOP: contextvars.ContextVar[asyncio.AbstractEventLoop | None] = contextvars.ContextVar("_REQUEST_LOOP", default=None)
EMBED_TIMEOUT_S = 120.0


class _BatchingEmbedder:
    """What the query engine sees as its embedder: ``encode`` (called in a worker thread) hands the
    texts to the request's event loop, where concurrent requests' texts share one model call."""

    def __init__(self, service: "MemoryService") -> None:
        self._svc = service

    @property
    def name(self) -> str:
        return self._svc.embedder.name

    @property
    def dim(self) -> int:
        return self._svc.embedder.dim

    def encode(self, texts: Any) -> np.ndarray:
        texts = list(texts)
        loop = _REQUEST_LOOP.get()
        if not texts or loop is None or loop.is_closed():
            return self._svc.embedder.encode(texts)
        try:
            if asyncio.get_running_loop() is loop:  # never block the loop on itself
                return self._svc.embedder.encode(texts)
        except RuntimeError:
            pass
        fut = asyncio.run_coroutine_threadsafe(self._svc.embed_texts(texts), loop)
        return fut.result(timeout=EMBED_TIMEOUT_S)


def _rss_bytes() -> int:
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class MemoryService:
    """One replica's view of a memory store: scoping, limits, LLM failure policy, reload.

    ``embedder``/``llm``/``llm_client`` go to :class:`MemoryStore` (tests inject them); without an
    embedder the configured one is loaded (call :meth:`warm` before taking traffic).
    """

    def __init__(self, memory: str | Path, config: LycheeConfig | None = None, *, embedder: Any = None,
                 llm: str | None = None, llm_client: Any = None) -> None:
        cfg = config or load_config()
        self.root = Path(memory)
        if not (self.root / "commits").is_dir():
            raise FileNotFoundError(f"not a memory store (no commits/): {self.root}")
        self.scfg = cfg.serve
        qcfg = cfg.query.model_copy(update={"max_conversations": self.scfg.cache_max_conversations})
        self.config = cfg.model_copy(update={"query": qcfg})
        self._embedder = embedder
        self._embedder_lock = threading.Lock()
        # batching off: the search thread calls the model itself (no hop through the event loop)
        local = cfg.embedding.backend == "local"
        self.batching = self.scfg.batch_embeddings if self.scfg.batch_embeddings is not None else not local
        query_embedder = _BatchingEmbedder(self) if self.batching else _CountingEmbedder(self)
        self.store = MemoryStore.open(self.root, self.config, embedder=query_embedder, llm=llm,
                                      llm_client=llm_client, cache_max_bytes=self.scfg.cache_max_bytes)
        self.manifest = self.store.reader.manifest
        threads = self.scfg.search_threads or (1 if local else self.scfg.max_ongoing_requests)
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lychee-serve")
        # query embeddings: the deployment installs its @serve.batch method; both paths end in a _Coalescer
        self._embed_batch: Callable[[list[str]], Awaitable[np.ndarray]] | None = None
        self._coalescer_inst: Any = None
        self.embed_requests = 0
        self.embed_model_calls = 0
        self.embed_texts_total = 0
        # LLM failure policy
        self._llm_down_until = 0.0
        self._llm_last_error: str | None = None
        # reload
        self._reload_lock = threading.Lock()
        self._stamp = self._store_stamp()
        self._last_check = time.monotonic()
        self.reloads = 0
        self.requests = 0
        self.started_at = datetime.now(timezone.utc).isoformat()

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def embedder(self) -> Any:
        with self._embedder_lock:
            if self._embedder is None:
                from .embed import get_embedder

                self._embedder = get_embedder(self.config.embedding, self.config.llm, queries=True)
            return self._embedder

    def warm(self) -> None:
        """Load the embedding model, check it matches the store's, run one embedding."""
        emb = self.embedder
        built_with = (self.manifest.get("models") or {}).get("embedding")
        if isinstance(built_with, str) and built_with != emb.name:
            raise ValueError(f"the store was built with embedding model {built_with!r} but the service is configured "
                             f"with {emb.name!r}: query vectors would not match (set embedding.model)")
        dim = self.manifest.get("embedding_dim")
        if isinstance(dim, int) and dim != emb.dim:
            raise ValueError(f"the store's vectors have dimension {dim}, the embedding model gives {emb.dim}")
        emb.encode(["warm-up"])
        # first-use costs off the request path: the tokenizer (~0.3 s) and the rules planner
        from .plan import PlanContext, make_planner
        from .tokens import count_tokens

        count_tokens("warm-up", self.config.tokenizer.encoding)
        make_planner("rules", self.config.query.planner, None, self.config.tokenizer.encoding).plan(
            "When did we talk about the trip last week?", datetime.now(), PlanContext())

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.store.close()

    def use_batcher(self, fn: Callable[[list[str]], Awaitable[np.ndarray]]) -> None:
        """Route query embeddings through ``fn`` (the deployment's ``@serve.batch`` method); no-op
        when ``serve.batch_embeddings`` is off."""
        if self.batching:
            self._embed_batch = fn

    # -- embeddings (run on the event loop) ------------------------------------------------------
    def _coalescer(self, wait_s: float) -> "_Coalescer":
        loop = asyncio.get_running_loop()
        c = self._coalescer_inst
        if c is None or c.loop is not loop:
            c = self._coalescer_inst = _Coalescer(loop, _CountingEmbedder(self), wait_s,
                                                 self.config.embedding.max_batch_texts)
        return c

    async def embed_texts(self, texts: list[str]) -> np.ndarray:
        self.embed_requests += 1
        if self._embed_batch is not None:
            return await self._embed_batch(texts)
        return await self._coalescer(self.scfg.batch_wait_ms / 1000.0).embed(texts)

    async def embed_many(self, batch: list[list[str]]) -> list[np.ndarray]:
        """The body of the deployment's ``@serve.batch`` method: one embedding request for the batch
        (merged with batches that arrive while a model call runs)."""
        flat = [t for ts in batch for t in ts]
        vecs = await self._coalescer(0.0).embed(flat)
        out, i = [], 0
        for ts in batch:
            out.append(vecs[i: i + len(ts)])
            i += len(ts)
        return out

    # -- store changes ---------------------------------------------------------------------------
    def _store_stamp(self) -> tuple[int, int]:
        def mtime(p: Path) -> int:
            try:
                return p.stat().st_mtime_ns
            except OSError:
                return 0

        return mtime(self.root / "manifest.json"), mtime(self.root / "commits")

    def reload(self) -> ReloadResult:
        """Re-read the commit markers; drop cached conversations that left the store (rebuilt ones
        are reloaded on their next use, by their commit time)."""
        t0 = time.perf_counter()
        with self._reload_lock:
            stamp = self._store_stamp()
            before = set(self.store.reader.markers)
            self.store.refresh()
            after = set(self.store.reader.markers)
            evicted = sum(self.store.cache.discard(cid) for cid in self.store.cache.cached_ids() if cid not in after)
            self.manifest = self.store.reader.manifest
            self._stamp = stamp
            self.reloads += 1
        res = ReloadResult(conversations=len(after), added=len(after - before), removed=len(before - after),
                           evicted=evicted, seconds=round(time.perf_counter() - t0, 4))
        if res.added or res.removed:
            log.info("store reloaded: %d conversations (+%d, -%d)", res.conversations, res.added, res.removed)
        return res

    async def _maybe_reload(self) -> None:
        every = self.scfg.reload_interval_s
        if every <= 0 or time.monotonic() - self._last_check < every:
            return
        self._last_check = time.monotonic()
        if self._store_stamp() != self._stamp:
            await self._in_worker(self.reload)

    # -- helpers ---------------------------------------------------------------------------------
    async def _in_worker(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        loop = asyncio.get_running_loop()
        _REQUEST_LOOP.set(loop)
        ctx = contextvars.copy_context()
        return await loop.run_in_executor(self._executor, ctx.run, functools.partial(fn, *args, **kwargs))

    def _check_limits(self, req: QueryRequest) -> None:
        s = self.scfg
        if len(req.question) > s.max_question_chars:
            raise _invalid("question", f"question has {len(req.question)} characters; at most {s.max_question_chars} allowed",
                           "string_too_long")
        if req.budget_tokens is not None and req.budget_tokens > s.max_budget_tokens:
            raise _invalid("budget_tokens", f"budget_tokens may be at most {s.max_budget_tokens}", "less_than_equal")

    def _check_scope(self, conversation_id: str | None, user_id: str | None) -> None:
        """404 before any work (and without rescanning the store) for ids this replica does not know."""
        reader = self.store.reader
        if conversation_id is not None:
            m = reader.markers.get(conversation_id)
            if user_id is not None and (m is None or (m.get("user_id") or conversation_id) != user_id):
                raise ServiceError(404, "not_found", f"conversation {conversation_id!r} not found for user {user_id!r}")
            if m is None:
                raise ServiceError(404, "not_found", f"unknown conversation {conversation_id!r}")
        elif not reader.by_user.get(user_id or ""):
            raise ServiceError(404, "not_found", f"unknown user {user_id!r}")

    def llm_backend(self) -> str:
        return self.store.backend()

    def llm_available(self) -> bool:
        return time.monotonic() >= self._llm_down_until

    def _llm_failed(self, message: str) -> None:
        self._llm_last_error = message
        if self.scfg.llm_cooldown_s > 0:
            self._llm_down_until = time.monotonic() + self.scfg.llm_cooldown_s
            log.warning("LLM marked unavailable for %.0f s: %s", self.scfg.llm_cooldown_s, message)

    async def _run(self, method: str, req: QueryRequest, llm: str | None) -> Any:
        """Run ``store.search``/``store.query`` in a worker; map store errors to HTTP errors."""
        self._check_limits(req)
        await self._maybe_reload()
        self._check_scope(req.conversation_id, req.user_id)
        t_enq = time.perf_counter()
        started: list[float] = []

        def call() -> Any:
            started.append(time.perf_counter())
            fn = getattr(self.store, method)
            return fn(req.conversation_id, req.question, req.question_date, req.budget_tokens, user_id=req.user_id, llm=llm)

        self.requests += 1
        try:
            try:
                res = await self._in_worker(call)
            except FileNotFoundError:  # a build compacted the store since the markers were read
                await self._in_worker(self.reload)
                started.clear()
                res = await self._in_worker(call)
        except (UnknownConversation, ScopeError) as e:
            raise ServiceError(404, "not_found", f"not found: {e}") from None
        except ValueError as e:
            raise ServiceError(422, "invalid_request", str(e)) from None
        allowed = set(res.conversation_ids)
        if req.conversation_id is not None and allowed != {req.conversation_id} or any(
                e.conversation_id not in allowed for e in res.evidence):
            log.error("scope violation for %s/%s: %s", req.conversation_id, req.user_id, res.conversation_ids)
            raise ServiceError(500, "scope_violation", "internal error: result outside the query's scope")
        res.timings_ms["queue"] = round((started[0] - t_enq) * 1000.0, 3) if started else 0.0
        res.timings_ms["server"] = round((time.perf_counter() - t_enq) * 1000.0, 3)
        return res

    def _planner_llm(self) -> str | None:
        """None = the configured backend; "rules" while the LLM is in its failure cooldown."""
        if self.llm_backend() == "openai" and not self.llm_available():
            return "rules"
        return None

    def _note_plan(self, res: Any) -> None:
        p = res.plan
        if p.backend == "openai" and p.fallback and (p.fallback_reason or "").startswith("llm call failed"):
            self._llm_failed(f"plan: {p.fallback_reason}")

    # -- endpoints -------------------------------------------------------------------------------
    async def search(self, req: QueryRequest) -> bytes:
        """The JSON body of ``POST /v1/search`` (:class:`SearchResponse`)."""
        res = await self._run("search", req, self._planner_llm())
        self._note_plan(res)
        return _response_body(res)

    async def query(self, req: QueryRequest) -> bytes:
        """The JSON body of ``POST /v1/query`` (:class:`QueryResponse`)."""
        if self.llm_backend() == "openai" and not self.llm_available():
            left = max(1, int(self._llm_down_until - time.monotonic() + 0.999))
            raise ServiceError(503, "llm_unavailable",
                               f"the LLM endpoint is unavailable (last error: {self._llm_last_error}); not retried for "
                               f"another {left} s; /v1/search still works", {"Retry-After": str(left)})
        res = await self._run("query", req, None)
        if res.answer_error:
            status, kind = llm_error_status(res.answer_error)
            self._llm_failed(f"answer: {res.answer_error}")
            headers = {"Retry-After": str(max(1, int(self.scfg.llm_cooldown_s)))} if status == 503 else {}
            what = "unavailable" if status == 503 else "returned an unusable reply"
            raise ServiceError(status, "llm_unavailable" if status == 503 else "llm_bad_reply",
                               f"the answer call failed: the LLM endpoint {what} ({kind}): {res.answer_error}; "
                               f"/v1/search still works", headers)
        return _response_body(res)

    async def conversation(self, conversation_id: str, user_id: str | None = None) -> ConversationInfo:
        await self._maybe_reload()
        self._check_scope(conversation_id, user_id)
        try:
            return await self._in_worker(self._conversation_info, conversation_id)
        except FileNotFoundError:
            await self._in_worker(self.reload)
            self._check_scope(conversation_id, user_id)
            return await self._in_worker(self._conversation_info, conversation_id)

    def _conversation_info(self, conversation_id: str) -> ConversationInfo:
        m = self.store.reader.markers.get(conversation_id)
        if m is None:
            raise ServiceError(404, "not_found", f"unknown conversation {conversation_id!r}")
        turns = read_part(self.root, "turns", m).select(["session_id", "session_started_at", "speaker"]).to_pydict()
        segs = read_part(self.root, "segments", m).select(["segment_id", "status"]).to_pydict()
        started: dict[str, str | None] = {}
        for sid, at in zip(turns["session_id"], turns["session_started_at"]):
            started.setdefault(sid, at)
        dates = sorted(d for d in started.values() if d)
        counts = m.get("counts") or {}
        failed = [s for s, st in zip(segs["segment_id"], segs["status"]) if st == "failed"]
        return ConversationInfo(
            conversation_id=conversation_id, user_id=m.get("user_id") or conversation_id,
            committed_at=m.get("committed_at"), sessions=len(started), turns=len(turns["session_id"]),
            records=int(counts.get("records", 0)), segments=len(segs["segment_id"]), failed_segments=len(failed),
            failed_segment_ids=failed, nodes=int(counts.get("nodes", 0)),
            speakers=list(dict.fromkeys(turns["speaker"])), date_from=dates[0] if dates else None,
            date_to=dates[-1] if dates else None, backend=m.get("backend"), model=m.get("model"),
            embedder=m.get("embedder"), cached=conversation_id in self.store.cache,
        )

    def health(self) -> Health:
        return Health(status="ok", version=__version__, conversations=len(self.store.reader.markers))

    def stats(self) -> dict[str, Any]:
        backend = self.llm_backend()
        return {
            "store": str(self.root),
            "conversations": len(self.store.reader.markers),
            "cache": self.store.cache.stats(),
            "rss_bytes": _rss_bytes(),
            "requests": self.requests,
            "reloads": self.reloads,
            # without batching every search embeds its own texts: one request = one model call
            "embedding": {"requests": self.embed_requests if self.batching else self.embed_model_calls,
                          "model_calls": self.embed_model_calls,
                          "texts": self.embed_texts_total,
                          "batched": self.batching,
                          "runtime": getattr(self._embedder, "runtime", self.config.embedding.backend)},
            # the Serve switches this replica process actually runs with (serve.ray_env)
            "ray_env": {k: os.environ.get(k) for k in self.scfg.ray_env},
            "llm": {"backend": backend, "available": backend != "openai" or self.llm_available(),
                    "last_error": self._llm_last_error},
            "started_at": self.started_at,
            "pid": os.getpid(),
        }


class _Coalescer:
    """One model call at a time; requests arriving while it runs share the next call.

    Under load this batches by itself (no fixed wait: ``wait_s`` only delays the first call after an
    idle spell, to gather simultaneous arrivals); when idle a request pays nothing extra. Complements
    ``@serve.batch``, whose batches form on a timer even while the previous one is still running.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, embedder: Any, wait_s: float, max_texts: int) -> None:
        self.loop = loop
        self.embedder = embedder
        self.wait_s = wait_s
        self.max_texts = max_texts
        self._pending: list[tuple[list[str], asyncio.Future]] = []
        self._running = False

    async def embed(self, texts: list[str]) -> np.ndarray:
        fut = self.loop.create_future()
        self._pending.append((list(texts), fut))
        if not self._running:
            self._running = True
            self.loop.create_task(self._drain())
        return await fut

    async def _drain(self) -> None:
        try:
            if self.wait_s > 0:
                await asyncio.sleep(self.wait_s)
            while self._pending:
                batch: list[tuple[list[str], asyncio.Future]] = []
                n = 0
                while self._pending and (not batch or n + len(self._pending[0][0]) <= self.max_texts):
                    item = self._pending.pop(0)
                    batch.append(item)
                    n += len(item[0])
                await embed_batch(self.embedder, batch)
        finally:
            self._running = False


class _CountingEmbedder:
    """The real embedder, counting model calls (for the stats endpoint)."""

    def __init__(self, svc: MemoryService) -> None:
        self._svc = svc

    @property
    def dim(self) -> int:
        return self._svc.embedder.dim

    def encode(self, texts: list[str]) -> np.ndarray:
        self._svc.embed_model_calls += 1
        self._svc.embed_texts_total += len(texts)
        return self._svc.embedder.encode(texts)


def _response_body(res: Any) -> bytes:
    """A search/query result as the API's JSON (``timings`` is the serialization alias of
    ``timings_ms``; the internal ``answer_error`` left out). pydantic-core writes it directly: ~5x
    less CPU than ``model_dump`` + ``json.dumps`` for a 2,000-token context."""
    return res.model_dump_json(by_alias=True, exclude={"answer_error"}).encode("utf-8")


def _json(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    body = json.dumps(data, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return Response(body, status_code=status, media_type="application/json", headers=headers)


# ------------------------------------------------------------------------------------------------
# ASGI guard: bearer token + request size (before FastAPI parses anything)
# ------------------------------------------------------------------------------------------------


class GuardMiddleware:
    """401 without the bearer token (except ``OPEN_PATHS``); 413 for bodies over ``max_bytes``
    (by Content-Length up front, or while reading a chunked body). The body is buffered (it is
    small by construction) and replayed to the app."""

    def __init__(self, app: Any, token: str | None, max_bytes: int) -> None:
        self.app = app
        self.token = token.encode("utf-8") if token else None
        self.max_bytes = max_bytes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.lower(): v for k, v in scope.get("headers") or []}
        if self.token is not None and scope.get("path", "") not in OPEN_PATHS:
            auth = headers.get(b"authorization", b"")
            scheme, _, given = auth.partition(b" ")
            if scheme.lower() != b"bearer" or not hmac.compare_digest(given.strip(), self.token):
                return await _send_error(send, 401, "unauthorized", "missing or invalid bearer token",
                                         {"WWW-Authenticate": "Bearer"})
        if scope.get("method") in ("POST", "PUT", "PATCH"):
            cl = headers.get(b"content-length")
            if cl is not None:
                try:
                    n = int(cl)
                except ValueError:
                    return await _send_error(send, 400, "bad_request", "invalid Content-Length header")
                if n > self.max_bytes:
                    return await _send_error(send, 413, "too_large",
                                             f"request body of {n} bytes exceeds the limit of {self.max_bytes} bytes")
            chunks: list[bytes] = []
            size = 0
            while True:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return
                chunk = msg.get("body", b"")
                size += len(chunk)
                if size > self.max_bytes:
                    return await _send_error(send, 413, "too_large",
                                             f"request body exceeds the limit of {self.max_bytes} bytes")
                chunks.append(chunk)
                if not msg.get("more_body", False):
                    break
            body = b"".join(chunks)
            replayed = False

            async def replay() -> dict:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            return await self.app(scope, replay, send)
        return await self.app(scope, receive, send)


async def _send_error(send: Callable, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
    body = json.dumps({"detail": message, "error": code}).encode("utf-8")
    hdrs = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    hdrs += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body})


# ------------------------------------------------------------------------------------------------
# the app
# ------------------------------------------------------------------------------------------------

_ERRORS = {
    401: {"model": ErrorBody, "description": "missing or invalid bearer token"},
    404: {"model": ErrorBody, "description": "unknown conversation/user, or a conversation not the user's"},
    413: {"model": ErrorBody, "description": "request body too large"},
}
_LLM_ERRORS = {
    502: {"model": ErrorBody, "description": "the LLM answered unusably"},
    503: {"model": ErrorBody, "description": "the LLM endpoint is unavailable, or the service is overloaded"},
}


def create_app(service: MemoryService) -> FastAPI:
    """The FastAPI app over ``service`` (the same app runs under TestClient, uvicorn or Ray Serve)."""
    app = FastAPI(
        title="lychee-ray memory service",
        version=__version__,
        description="LycheeMemory V2 long-term memory: scoped search and question answering over a memory store. "
                    "Every endpoint except /healthz requires `Authorization: Bearer <token>` when a token is configured.",
    )
    bearer = [Depends(HTTPBearer(auto_error=False))]  # documents the scheme; GuardMiddleware enforces it
    app.add_middleware(GuardMiddleware, token=service.scfg.token, max_bytes=service.scfg.max_request_bytes)

    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, e: ServiceError) -> Response:
        return _json({"detail": e.message, "error": e.code}, e.status, e.headers)

    @app.get("/healthz", response_model=Health, tags=["service"], summary="liveness (no auth)")
    async def healthz() -> Health:
        return service.health()

    @app.post("/v1/query", response_model=QueryResponse, tags=["memory"], dependencies=bearer,
              responses={**_ERRORS, **_LLM_ERRORS}, summary="answer a question from scoped memory")
    async def query(req: QueryRequest) -> Response:
        return Response(await service.query(req), media_type="application/json")

    @app.post("/v1/search", response_model=SearchResponse, tags=["memory"], dependencies=bearer,
              responses={**_ERRORS, 503: _LLM_ERRORS[503]}, summary="scoped evidence for a question, no answer call")
    async def search(req: QueryRequest) -> Response:
        return Response(await service.search(req), media_type="application/json")

    @app.get("/v1/conversations/{conversation_id}", response_model=ConversationInfo, tags=["memory"],
             dependencies=bearer, responses=_ERRORS, summary="one conversation's counts, sessions and date range")
    async def conversation(conversation_id: str, user_id: str | None = None) -> ConversationInfo:
        return await service.conversation(conversation_id, user_id)

    @app.post("/v1/admin/reload", response_model=ReloadResult, tags=["admin"], dependencies=bearer,
              responses=_ERRORS, summary="pick up conversations a build added or rebuilt (this replica)")
    async def reload() -> ReloadResult:
        return await service._in_worker(service.reload)

    @app.get("/v1/admin/stats", tags=["admin"], dependencies=bearer, responses=_ERRORS,
             summary="cache, memory, batching and LLM state of the replica that answers")
    async def stats() -> dict[str, Any]:
        return service.stats()

    return app


__all__ = [
    "ConversationInfo", "GuardMiddleware", "Health", "MemoryService", "QueryRequest", "QueryResponse", "ReloadResult",
    "SearchResponse", "ServiceError", "create_app", "llm_error_status",
]
