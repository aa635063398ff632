"""The query service as plain Python: what the HTTP routes call (DESIGN §4).

:class:`MemoryService` is one replica's view of a memory store: it scopes every request to one
conversation or one user's conversations, enforces the configured limits, applies the LLM failure
policy (:mod:`.llm_policy`: cooldown, 502/503, ``/v1/search`` keeps working on the rules planner) and picks up
conversations a build added. Searches run in worker threads; their query embeddings are coalesced
on the event loop (:mod:`lychee_ray.serve.embedding`).

Scaling: conversations are loaded lazily into :class:`lychee_ray.query.cache.ConversationCache`, bounded by
``serve.cache_max_conversations`` and ``serve.cache_max_bytes``; the store is never loaded whole.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal
from collections.abc import Callable

import numpy as np

from lychee_ray import __version__
from lychee_ray.config import LycheeConfig, load_config
from lychee_ray.embed import Embedder, get_embedder
from lychee_ray.llm.client import LLMClient
from lychee_ray.io.store import NotAStoreError, StoreLayout
from lychee_ray.io.store.fs import store_root
from lychee_ray.io.store.erase import EraseReport, EraseScope, NothingToErase, erase_conversation, erase_user
from lychee_ray.query.engine import QueryEngine
from lychee_ray.query.plan import PlanContext, make_planner
from lychee_ray.query.errors import ScopeError, UnknownConversation
from lychee_ray.query.results import QueryResult, SearchResult, result_json
from lychee_ray.serve.admission import Admission
from lychee_ray.serve.appends import Appender, MarkerWatch
from lychee_ray.serve.embedding import BatchFn, Coalescer, CountingEmbedder, RequestEmbedder, run_in_worker
from lychee_ray.serve.errors import EmbedderMismatch, ServiceError, invalid_field
from lychee_ray.serve.listing import ConversationLister, conversation_info
from lychee_ray.serve.llm_policy import LLMCooldown
from lychee_ray.serve.scope import append_user, check_scope, erase_owner, not_found_message
from lychee_ray.serve.tenancy import ADMIN, KeyRing, Principal
from lychee_ray.text.tokens import count_tokens
from lychee_ray.serve.schemas import (
    AppendBody,
    AppendResult,
    ConversationInfo,
    ConversationPage,
    Health,
    QueryRequest,
    ReloadResult,
)
from lychee_ray.names import CONVERSATION_SCOPE, LOCAL_EMBEDDING, RULES_BACKEND, USER_SCOPE, LLMBackend

log = logging.getLogger(__name__)


def _rss_bytes() -> int:
    """Resident memory of this process (peak RSS where /proc is missing)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource  # POSIX only: where /proc is missing

    return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024


class MemoryService:
    """One replica's view of a memory store: scoping, limits, LLM failure policy, reload.

    ``embedder``/``llm``/``llm_client`` go to the :class:`QueryEngine` (tests inject them); without an
    embedder the configured one is loaded (call :meth:`warm` before taking traffic).
    """

    def __init__(self, memory: str | Path, config: LycheeConfig | None = None, *, embedder: Embedder | None = None,
                 llm: str | None = None, llm_client: LLMClient | None = None) -> None:
        cfg = config or load_config()
        self.root = store_root(memory, cfg.store)  # a remote root carries its index cache and lease settings
        self.layout = StoreLayout(self.root, cfg.store)
        if not self.layout.is_store():
            raise NotAStoreError(self.root)
        self.scfg = cfg.serve
        self.keys = KeyRing(self.scfg.token, self.scfg.keys)  # who a request is (serve/tenancy.py)
        # the replica's own bounded admission (serve/admission.py: JSON 503 + Retry-After beyond it)
        self.admission = Admission(self.scfg.max_ongoing_requests, self.scfg.max_queued_requests,
                                   self.scfg.max_queue_wait_s, self.scfg.overload_retry_after_s)
        qcfg = cfg.query.model_copy(update={"max_conversations": self.scfg.cache_max_conversations})
        self.config = cfg.model_copy(update={"query": qcfg})
        self._embedder = embedder
        self._embedder_lock = threading.Lock()
        # batching off: the search thread calls the model itself (no hop through the event loop)
        local = cfg.embedding.backend == LOCAL_EMBEDDING
        self.batching = self.scfg.batch_embeddings if self.scfg.batch_embeddings is not None else not local
        query_embedder = RequestEmbedder(self) if self.batching else CountingEmbedder(self)
        self.store = QueryEngine.open(self.root, self.config, embedder=query_embedder, llm=llm,
                                      llm_client=llm_client, cache_max_bytes=self.scfg.cache_max_bytes)
        self.manifest = self.store.reader.manifest
        self.lister = ConversationLister(self.layout)
        self.appends = Appender(self.root, self.config, self.store, embedder)  # POST .../turns, .../flush
        self.watch = MarkerWatch(self.layout)  # per-request: re-read markers another replica changed
        threads = self.scfg.search_threads or (1 if local else self.scfg.max_ongoing_requests)
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lychee-serve")
        # query embeddings: the deployment installs its @serve.batch method; both paths end in a Coalescer
        self._embed_batch: BatchFn | None = None
        self._coalescer_inst: Coalescer | None = None
        self.embed_requests = 0
        self.embed_model_calls = 0
        self.embed_texts_total = 0
        self.llm_cooldown = LLMCooldown(self.scfg.llm_cooldown_s)  # LLM failure policy (serve/llm_policy.py)
        # reload
        self._reload_lock = threading.Lock()
        self._stamp = self._store_stamp()
        self._last_check = time.monotonic()
        self.reloads = 0
        self.requests = 0
        self.started_at = datetime.now(timezone.utc).isoformat()

    # -- lifecycle -------------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        """The query embedding model (the injected one, or the configured one, loaded on first use)."""
        with self._embedder_lock:
            if self._embedder is None:
                self._embedder = get_embedder(self.config.embedding, self.config.llm, queries=True)
            return self._embedder

    def warm(self) -> None:
        """Load the embedding model, check it matches the store's, run one embedding."""
        emb = self.embedder
        built_with = (self.manifest.get("models") or {}).get("embedding")
        if isinstance(built_with, str) and built_with != emb.name:
            raise EmbedderMismatch("model", built_with, emb.name)
        dim = self.manifest.get("embedding_dim")
        if isinstance(dim, int) and dim != emb.dim:
            raise EmbedderMismatch("dim", dim, emb.dim)
        emb.encode(["warm-up"])
        # first-use costs off the request path: the tokenizer (~0.3 s) and the rules planner
        count_tokens("warm-up", self.config.tokenizer.encoding)
        make_planner(RULES_BACKEND, self.config.query.planner, None, self.config.tokenizer.encoding).plan(
            "When did we talk about the trip last week?", datetime.now(), PlanContext())

    def close(self) -> None:
        """Stop the worker threads and close the store."""
        self.appends.close()
        self._executor.shutdown(wait=False, cancel_futures=True)
        self.store.close()

    def use_batcher(self, fn: BatchFn) -> None:
        """Route query embeddings through ``fn`` (the deployment's ``@serve.batch`` method); no-op
        when ``serve.batch_embeddings`` is off."""
        if self.batching:
            self._embed_batch = fn

    # -- embeddings (run on the event loop) ------------------------------------------------------
    def _coalescer(self, wait_s: float) -> Coalescer:
        loop = asyncio.get_running_loop()
        c = self._coalescer_inst
        if c is None or c.loop is not loop:
            c = self._coalescer_inst = Coalescer(loop, CountingEmbedder(self), wait_s,
                                                 self.config.embedding.max_batch_texts)
        return c

    async def embed_texts(self, texts: list[str]) -> np.ndarray:
        """One request's query texts → vectors, sharing a model call with concurrent requests."""
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
    def _store_stamp(self) -> tuple[float, float]:
        return self.layout.commit_state()

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

    async def reload_async(self) -> ReloadResult:
        """``POST /v1/admin/reload``: :meth:`reload` in a worker thread (it reads the store)."""
        return await self._in_worker(self.reload)

    async def _maybe_reload(self) -> None:
        every = self.scfg.reload_interval_s
        if every <= 0 or time.monotonic() - self._last_check < every:
            return
        self._last_check = time.monotonic()
        if self._store_stamp() != self._stamp:
            await self._in_worker(self.reload)

    async def _drop_erased(self, conversation_id: str | None, user_id: str | None) -> None:
        """Reload when a conversation in the request's scope lost its commit marker since this replica
        read it (erased, possibly through another replica): one ``stat`` per conversation in scope, so
        no replica answers from an erased conversation's cached view once its marker is gone. The same
        ``stat`` re-reads a marker that changed or appeared (an append, possibly by another replica)."""
        gone, changed = self.watch.check(self.store.reader, conversation_id, user_id)
        if gone:
            await self._in_worker(self.reload)
        for cid in changed:
            self.store.reader.refresh_conversation(cid)  # one small JSON file

    async def current(self, conversation_id: str | None = None, user_id: str | None = None) -> None:
        """Bring this replica's view of the store up to date for a request that reads it directly (the
        inspector's pages): the periodic reload, erased conversations dropped, changed markers re-read."""
        await self._maybe_reload()
        await self._drop_erased(conversation_id, user_id)

    # -- erasure ---------------------------------------------------------------------------------
    async def delete_conversation(self, conversation_id: str, user_id: str | None = None, *,
                                  principal: Principal = ADMIN) -> EraseReport:
        """``DELETE /v1/conversations/{id}``: erase it from the store (every file) and this replica;
        404 when it is not ``user_id``'s (when given) or outside ``principal``'s scope."""
        # its own thread, not a search worker: an erasure may wait for a writer's lock, searches go on
        return await asyncio.to_thread(self._erase, CONVERSATION_SCOPE, conversation_id, user_id, principal)

    async def delete_user(self, user_id: str, *, principal: Principal = ADMIN) -> EraseReport:
        """``DELETE /v1/users/{user_id}``: erase all of the user's conversations (404 outside scope)."""
        return await asyncio.to_thread(self._erase, USER_SCOPE, user_id, None, principal)

    def _erase(self, scope: EraseScope, ident: str, user_id: str | None, principal: Principal) -> EraseReport:
        owner: str | None = None
        if scope == CONVERSATION_SCOPE:
            owner = erase_owner(self.layout, ident, user_id, principal)  # 404 outside the scope
            self.appends.forget([ident])  # before the erasure: no queued encoding of it starts meanwhile
        elif not principal.allows(ident):
            raise ServiceError(404, "not_found", f"unknown user {ident!r}")
        try:
            report = (erase_conversation(self.root, ident, owner=owner) if scope == CONVERSATION_SCOPE
                      else erase_user(self.root, ident))
        except NothingToErase:
            raise ServiceError(404, "not_found", not_found_message(ident, user_id) if scope == CONVERSATION_SCOPE
                               else f"unknown user {ident!r}") from None
        self.reload()  # markers re-read, the erased conversations' views dropped from the cache
        self.store.forget(report.conversation_ids)  # a view a search thread re-inserted meanwhile
        self.lister.forget(report.conversation_ids)
        self.appends.forget(report.conversation_ids)  # (a user's: known only now)
        log.info("erased %d conversation(s) by %s for key %r: %d files removed, %d rewritten", report.conversations,
                 scope, principal.name, report.files_removed, report.files_rewritten)
        return report

    # -- appends (lychee_ray.serve.appends) -------------------------------------------------------
    async def append_turns(self, conversation_id: str, body: AppendBody, *,
                           principal: Principal = ADMIN) -> AppendResult:
        """``POST /v1/conversations/{id}/turns`` (a tenant: only to a conversation in its scope, or to
        create one for a user in its scope)."""
        user_id = await self._append_user(conversation_id, body.user_id, principal, True)
        if user_id != body.user_id:
            body = body.model_copy(update={"user_id": user_id})
        return await self.appends.append(conversation_id, body)

    async def flush(self, conversation_id: str, user_id: str | None = None, *,
                    principal: Principal = ADMIN) -> AppendResult:
        """``POST /v1/conversations/{id}/flush``."""
        user_id = await self._append_user(conversation_id, user_id, principal, False)
        return await self.appends.flush(conversation_id, user_id)

    async def _append_user(self, conversation_id: str, user_id: str | None, principal: Principal,
                           create: bool) -> str | None:
        """:func:`~.scope.append_user` (a tenant's: one marker read, in its own thread like the
        append itself — never a search worker, which an erasure waiting for a lock may hold)."""
        if principal.admin:
            return user_id
        return await asyncio.to_thread(append_user, self.layout, conversation_id, user_id, principal, create)

    # -- helpers ---------------------------------------------------------------------------------
    async def _in_worker(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return await run_in_worker(self._executor, fn, *args, **kwargs)

    def _check_limits(self, req: QueryRequest) -> None:
        s = self.scfg
        if len(req.question) > s.max_question_chars:
            raise invalid_field("question", f"question has {len(req.question)} characters; "
                                            f"at most {s.max_question_chars} allowed", "string_too_long")
        recent = sum(len(t.content) for t in req.recent_turns)
        if recent > s.max_recent_turns_chars:
            raise invalid_field("recent_turns", f"recent_turns have {recent} characters in all; at most "
                                                f"{s.max_recent_turns_chars} allowed", "string_too_long")
        if req.budget_tokens is not None and req.budget_tokens > s.max_budget_tokens:
            raise invalid_field("budget_tokens", f"budget_tokens may be at most {s.max_budget_tokens}",
                                "less_than_equal")

    def llm_backend(self) -> LLMBackend:
        """The LLM backend queries use (``openai`` or ``rules``)."""
        return self.store.backend()

    def llm_available(self) -> bool:
        """False while the LLM is in its failure cooldown."""
        return self.llm_cooldown.available()

    async def _run(self, method: Literal["search", "query"], req: QueryRequest, llm: LLMBackend | None,
                   principal: Principal) -> Any:
        """Run ``store.search``/``store.query`` in a worker; map store errors to HTTP errors."""
        self._check_limits(req)
        await self._maybe_reload()
        await self._drop_erased(req.conversation_id, req.user_id)
        check_scope(self.store.reader, req.conversation_id, req.user_id, principal)
        request = req.with_backend(llm)
        t_enq = time.perf_counter()
        started: list[float] = []

        def call() -> Any:
            started.append(time.perf_counter())
            return getattr(self.store, method)(request)

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
        markers = self.store.reader.markers
        if req.conversation_id is not None and allowed != {req.conversation_id} or any(
                e.conversation_id not in allowed for e in res.evidence) or not principal.admin and any(
                cid not in markers or not principal.allows(markers[cid].owner) for cid in allowed):
            log.error("scope violation for %s/%s: %s", req.conversation_id, req.user_id, res.conversation_ids)
            raise ServiceError(500, "scope_violation", "internal error: result outside the query's scope")
        res.timings_ms["queue"] = round((started[0] - t_enq) * 1000.0, 3) if started else 0.0
        res.timings_ms["server"] = round((time.perf_counter() - t_enq) * 1000.0, 3)
        return res

    # -- endpoints -------------------------------------------------------------------------------
    async def search(self, req: QueryRequest, *, principal: Principal = ADMIN) -> bytes:
        """The JSON body of ``POST /v1/search`` (:class:`SearchResponse`)."""
        res: SearchResult = await self._run("search", req, self.llm_cooldown.planner_backend(self.llm_backend()), principal)
        self.llm_cooldown.note_plan(res)
        return result_json(res)

    async def query(self, req: QueryRequest, *, principal: Principal = ADMIN) -> bytes:
        """The JSON body of ``POST /v1/query`` (:class:`QueryResponse`)."""
        self.llm_cooldown.check_query(self.llm_backend())
        res: QueryResult = await self._run("query", req, None, principal)
        self.llm_cooldown.check_answer(res)
        return result_json(res)

    async def conversation(self, conversation_id: str, user_id: str | None = None, *,
                           principal: Principal = ADMIN) -> ConversationInfo:
        """``GET /v1/conversations/{id}`` (optionally checked to be ``user_id``'s)."""
        await self._maybe_reload()
        await self._drop_erased(conversation_id, user_id)
        check_scope(self.store.reader, conversation_id, user_id, principal)
        try:
            return await self._in_worker(self._conversation_info, conversation_id)
        except FileNotFoundError:  # a build compacted the store since the markers were read
            await self._in_worker(self.reload)
            check_scope(self.store.reader, conversation_id, user_id, principal)
            return await self._in_worker(self._conversation_info, conversation_id)

    async def list_conversations(self, user_id: str | None, offset: int, limit: int | None, *,
                                 principal: Principal = ADMIN) -> ConversationPage:
        """``GET /v1/conversations``: a page of all conversations ``principal`` may see, or of
        ``user_id``'s (404 for an unknown user or one outside the scope, as everywhere); ``limit``
        defaults to ``serve.list_page_size`` and may be at most ``serve.list_max_page_size``."""
        if limit is not None and limit > self.scfg.list_max_page_size:
            raise invalid_field("limit", f"limit may be at most {self.scfg.list_max_page_size}", "less_than_equal",
                                where="query")
        await self._maybe_reload()
        if user_id is not None:
            check_scope(self.store.reader, None, user_id, principal)
        n = limit if limit is not None else self.scfg.list_page_size
        return await self._in_worker(self.lister.page, self.store.reader, user_id, offset, n,
                                     None if principal.admin else principal.allows)

    def _conversation_info(self, conversation_id: str) -> ConversationInfo:
        return conversation_info(self.layout, self.store.reader.markers, conversation_id, conversation_id in self.store.cache)

    def health(self) -> Health:
        """``GET /healthz``."""
        return Health(status="ok", version=__version__, conversations=len(self.store.reader.markers))

    def stats(self) -> dict[str, Any]:
        """``GET /v1/admin/stats``: cache, memory, embedding batches and LLM state of this replica."""
        backend = self.llm_backend()
        return {
            "store": str(self.root),
            "conversations": len(self.store.reader.markers),
            "cache": self.store.cache.stats(),
            "rss_bytes": _rss_bytes(),
            "requests": self.requests,
            "reloads": self.reloads,
            "appends": self.appends.stats(),
            "auth": {"enabled": self.keys.enabled, "keys": self.keys.names()},  # names only, never a key
            "admission": self.admission.stats(),
            # without batching every search embeds its own texts: one request = one model call
            "embedding": {"requests": self.embed_requests if self.batching else self.embed_model_calls,
                          "model_calls": self.embed_model_calls,
                          "texts": self.embed_texts_total,
                          "batched": self.batching,
                          "runtime": getattr(self._embedder, "runtime", self.config.embedding.backend)},
            # the Serve switches this replica process actually runs with (serve.ray_env)
            "ray_env": {k: os.environ.get(k) for k in self.scfg.ray_env},
            "llm": self.llm_cooldown.stats(backend),
            "started_at": self.started_at,
            "pid": os.getpid(),
        }


__all__ = ["MemoryService"]
