"""The query engine: the query side of a memory store (DESIGN §1 steps 4–7, §4).

The library's :class:`~lychee_ray.memory.MemoryStore` is this engine plus appends; a Serve replica
queries through it too (its appends run beside it: :mod:`lychee_ray.serve.appends`)::

    store = QueryEngine.open("out/locomo")
    res = store.query(QueryRequest(conversation_id="locomo-26", question="When did Caroline go to the support group?",
                                   question_date="2023-08-01"))
    res.answer, res.evidence, res.plan, res.usage, res.timings_ms

Per question: plan (1 LLM call or rules) → embed every route's search texts in ONE batched call →
recall channels per route and conversation, in parallel on a thread pool → RRF → optional
cross-encoder rerank → budgeted MMR selection over the wide pool → answer (1 LLM call or
extractive). :meth:`QueryEngine.search` stops before the answer.

Scoping: a query names one conversation, or a user (all of that user's conversations). Every
channel runs on a view of exactly one conversation and items carry their conversation id, so a
query can never return another conversation's or user's memory. Loaded conversations live in a
bounded LRU cache (``query.max_conversations``); a conversation rebuilt since it was loaded is
reloaded after :meth:`QueryEngine.refresh`.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import date, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from lychee_ray.config import LycheeConfig, QueryConfig, load_config
from lychee_ray.embed import Embedder, get_embedder
from lychee_ray.io.store import StoreReader
from lychee_ray.io.store.fs import StorePath, store_root
from lychee_ray.llm.backend import make_llm_client, resolve_backend
from lychee_ray.llm.client import LLMClient
from lychee_ray.query.answer import answer_prompt_estimate, make_answerer
from lychee_ray.query.answer_lines import answer_lines
from lychee_ray.query.cache import ConversationCache
from lychee_ray.query.channels import RECALL_CHANNELS, route_query_text
from lychee_ray.query.currency import adjust_pool, scope_currency
from lychee_ray.query.errors import ScopeError, UnknownConversation
from lychee_ray.query.evidence import Selection, prime_line_tokens
from lychee_ray.query.depth import scaled_pool, scaled_recall
from lychee_ray.query.explain import explain_search
from lychee_ray.query.fuse import FusedItem, RankedList, rrf
from lychee_ray.query.history import HistoryResult, slot_history
from lychee_ray.query.marks import apply_marks
from lychee_ray.query.pacing import Pause
from lychee_ray.query.plan import PlanContext, Route, make_planner
from lychee_ray.query.plan.model import RecentTurn, recent_lines
from lychee_ray.query.request import QueryRequest, as_request
from lychee_ray.query.rerank import CrossEncoderReranker, rerank_order
from lychee_ray.query.route_filters import prefer_identifiers, prefer_types, route_identifiers, without_context
from lychee_ray.query.results import EvidenceItem, QueryResult, QueryUsage, SearchResult
from lychee_ray.query.select import select_evidence
from lychee_ray.query.view import ConversationView
from lychee_ray.text.dates import as_datetime
from lychee_ray.names import EXTRACTIVE_ANSWER, GENERATED_ANSWER, OPENAI_BACKEND, RULES_BACKEND, LLMBackend

log = logging.getLogger(__name__)

E = TypeVar("E", bound="QueryEngine")

STAGES = ("load", "plan", "embed", "channels", "fusion", "rerank", "selection", "answer")


class QueryEngine:
    """Query side of a memory store: ``query``/``search`` scoped to a conversation or a user.

    ``embedder`` (anything with ``encode(texts) -> unit vectors``), ``llm`` (backend override:
    openai | rules), ``llm_client`` (an :class:`~lychee_ray.llm.client.LLMClient`; the caller keeps
    ownership), ``reranker`` and ``cache_max_bytes`` (byte bound of the conversation cache, 0 =
    count bound only) are optional; missing pieces are built from ``config`` on first use.
    """

    def __init__(
        self,
        root: str | Path | StorePath,
        config: LycheeConfig | None = None,
        *,
        embedder: Embedder | None = None,
        llm: str | None = None,
        llm_client: LLMClient | None = None,
        reranker: CrossEncoderReranker | None = None,
        cache_max_bytes: int = 0,
    ) -> None:
        self.config = config or load_config()
        self.root = store_root(root, self.config.store)  # a remote root carries this config's store settings
        self.qcfg: QueryConfig = self.config.query
        self.reader = StoreReader(self.root, self.config.store)
        ac = self.config.appends  # how a view changed by an append is rebuilt
        self.cache = ConversationCache(self.reader, self.qcfg.max_conversations, self.qcfg.recall.bm25_k1, self.qcfg.recall.bm25_b,
                                       max_bytes=cache_max_bytes, rebuild=ac.view_rebuild,
                                       background_min_rows=ac.view_rebuild_background_min_rows,
                                       max_pause_ms=ac.view_rebuild_max_pause_ms, prepare=self._prime)
        self._embedder = embedder
        self._embed_lock = threading.Lock()
        self._llm_choice = llm
        self._client = llm_client
        self._owns_client = llm_client is None  # an injected client belongs to the caller
        self._client_lock = threading.Lock()
        self.reranker = reranker
        if self.reranker is None and self.qcfg.rerank.enabled:
            self.reranker = CrossEncoderReranker(self.qcfg.rerank)
        threads = self.qcfg.recall.threads
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="lychee-recall") if threads > 0 else None
        self.encoding = self.config.tokenizer.encoding
        import faiss  # heavy (native library): loaded with the first engine, not with the package

        faiss.omp_set_num_threads(self.qcfg.recall.faiss_threads)  # latency path: no OpenMP fan-out

    @classmethod
    def open(cls: type[E], path: str | Path | StorePath, config: LycheeConfig | None = None, **kwargs: Any) -> E:
        """Open a store directory written by ``lychee-ray build`` (see the class's keyword arguments)."""
        return cls(path, config, **kwargs)

    # -- lifecycle / scope -----------------------------------------------------------------------
    def close(self) -> None:
        self.cache.close()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None
        if self._owns_client and self._client is not None and hasattr(self._client, "close"):
            self._client.close()
            self._client = None

    def __enter__(self: E) -> E:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def refresh(self) -> None:
        """Pick up conversations committed (or rebuilt) since the store was opened."""
        self.reader.refresh()

    def forget(self, conversation_ids: list[str] | None = None) -> int:
        """After an erasure (:mod:`lychee_ray.io.store.erase`): re-read the commit markers and drop the
        loaded views of ``conversation_ids`` (default: of every cached conversation no longer in the
        store), so their text leaves this process's cache; returns how many views were dropped."""
        self.reader.refresh()
        gone = conversation_ids if conversation_ids is not None else [
            cid for cid in self.cache.cached_ids() if cid not in self.reader.markers]
        return sum(self.cache.discard(cid) for cid in gone)

    def reread(self, conversation_ids: list[str]) -> int:
        """After this process changed conversations' commits in place (a forget: ingest/forget.py):
        re-read their markers and drop their loaded views, so no search answers from the old commit;
        returns how many views were dropped."""
        for cid in conversation_ids:
            self.reader.refresh_conversation(cid)
        return sum(self.cache.discard(cid) for cid in conversation_ids)

    def conversation_ids(self, user_id: str | None = None) -> list[str]:
        if user_id is None:
            return self.reader.conversation_ids()
        return sorted(self.reader.by_user.get(user_id, []))

    def user_of(self, conversation_id: str) -> str:
        m = self.reader.markers.get(conversation_id)
        if m is None:
            raise UnknownConversation(conversation_id)
        return m.owner

    def scope(self, conversation_id: str | None, user_id: str | None) -> list[str]:
        """The conversations a query may read: one conversation, or all of a user's."""
        if conversation_id is None and user_id is None:
            raise ValueError("a query needs a conversation_id or a user_id")
        if conversation_id is not None:
            if conversation_id not in self.reader.markers:
                self.reader.refresh()
            owner = self.user_of(conversation_id)
            if user_id is not None and owner != user_id:
                raise ScopeError(f"conversation {conversation_id!r} does not belong to user {user_id!r}")
            return [conversation_id]
        cids = self.conversation_ids(user_id)
        if not cids:
            self.reader.refresh()
            cids = self.conversation_ids(user_id)
        if not cids:
            raise UnknownConversation(f"no conversations for user {user_id!r}")
        return cids

    def view(self, conversation_id: str) -> ConversationView:
        """The loaded (cached) conversation."""
        view, loaded = self.cache.get(conversation_id)
        if loaded:
            self._prime(view)
        return view

    def _prime(self, view: ConversationView, pause: Pause | None = None) -> None:
        prime_line_tokens(view, self.qcfg.select.show_source_ids, self.encoding, self.qcfg.select.show_record_tags,
                          pause=pause)

    # -- shared pieces ---------------------------------------------------------------------------
    @property
    def embedder(self) -> Embedder:
        with self._embed_lock:
            if self._embedder is None:
                self._embedder = get_embedder(self.config.embedding, self.config.llm, queries=True)
            return self._embedder

    def backend(self, llm: str | None = None) -> LLMBackend:
        return resolve_backend(self.config.llm, llm if llm is not None else self._llm_choice)

    def llm_client(self) -> LLMClient:
        with self._client_lock:
            if self._client is None:
                self._client = make_llm_client(self.config)
            return self._client

    def _run(self, fns: list[Callable[[], Any]]) -> list[Any]:
        if self._pool is None or len(fns) <= 1:
            return [f() for f in fns]
        return [f.result() for f in [self._pool.submit(fn) for fn in fns]]

    # -- the pipeline ----------------------------------------------------------------------------
    def search(
        self,
        request: QueryRequest | str | None,
        question: str | None = None,
        question_date: datetime | date | str | None = None,
        budget_tokens: int | None = None,
        *,
        user_id: str | None = None,
        llm: str | None = None,
        question_id: str | None = None,
        recent_turns: Sequence[RecentTurn | str | dict] | None = None,
        explain: bool = False,
    ) -> SearchResult:
        """Plan, recall, fuse, rerank and select — everything but the answer call.

        ``request``: a :class:`~lychee_ray.query.request.QueryRequest`; or, as before it, the
        conversation id (None with ``user_id``) followed by the request's other fields as arguments.
        ``recent_turns``: the asking agent's last turns (what "it" or "that reservation" refers to),
        shown to the planner up to ``query.planner.recent_turns_tokens``. ``explain``: also say each
        channel's rank, the fused scores and what the budget dropped (``res.explain``,
        :mod:`lychee_ray.query.explain`)."""
        req = as_request(request, question, question_date, budget_tokens, user_id=user_id, llm=llm,
                         question_id=question_id, recent_turns=recent_turns, explain=explain)
        with self.cache.request():  # a background view rebuild pauses meanwhile
            res = self._retrieve(req)[0]
        return res

    def query(
        self,
        request: QueryRequest | str | None,
        question: str | None = None,
        question_date: datetime | date | str | None = None,
        budget_tokens: int | None = None,
        *,
        user_id: str | None = None,
        llm: str | None = None,
        question_id: str | None = None,
        recent_turns: Sequence[RecentTurn | str | dict] | None = None,
        explain: bool = False,
    ) -> QueryResult:
        """Answer the question from the memory of one conversation (or of a user's conversations).

        ``request`` as for :meth:`search`. ``question_date`` anchors relative times ("last week");
        None = today. ``budget_tokens`` overrides ``query.select.budget_tokens``. ``llm`` overrides the
        backend (openai | rules).
        """
        req = as_request(request, question, question_date, budget_tokens, user_id=user_id, llm=llm,
                         question_id=question_id, recent_turns=recent_turns, explain=explain)
        with self.cache.request():
            res, sel, qd, qvec = self._retrieve(req)
        backend = self.backend(req.llm)
        t0 = time.perf_counter()
        client = self.llm_client() if backend == OPENAI_BACKEND else None
        answerer = make_answerer(backend, self.qcfg.answer, client, self.encoding)
        lines = None
        if backend == RULES_BACKEND:  # the extractive answer weighs each line's meaning by its stored vector
            lines = answer_lines(sel.evidence, {cid: self.view(cid) for cid in res.conversation_ids}, qvec)
        out = answerer.answer(req.question, qd, sel.evidence, sel.context, question_id=res.question_id, lines=lines)
        res.timings_ms["answer"] = _ms(time.perf_counter() - t0)
        res.timings_ms["total"] = round(res.timings_ms["total"] + res.timings_ms["answer"], 3)
        u = res.usage
        u.answer_prompt_tokens, u.answer_completion_tokens = out.prompt_tokens, out.completion_tokens
        u.query_prompt_tokens = u.plan_prompt_tokens + u.answer_prompt_tokens
        u.llm_calls += out.calls
        u.estimated = u.estimated or out.estimated
        return QueryResult(**res.model_dump(), answer=out.answer, answer_error=out.error,
                           answer_error_kind=out.error_kind,
                           answer_kind=EXTRACTIVE_ANSWER if backend == RULES_BACKEND else GENERATED_ANSWER)

    def history(self, conversation_id: str | None = None, *, user_id: str | None = None, slot: str | None = None,
                subject: str | None = None, record_id: str | None = None) -> HistoryResult:
        """Every value recorded for a slot (``"reservation M05KNL · flights"``), for every slot of a
        subject (``"reservation M05KNL"``) or for the slot of ``record_id``, in one conversation or
        all of ``user_id``'s, oldest first, with when each held and what replaced it
        (:mod:`lychee_ray.query.history`; :class:`~lychee_ray.query.history.HistoryQueryError` when
        none or several of the three are given)."""
        with self.cache.request():
            views = {cid: self.view(cid) for cid in self.scope(conversation_id, user_id)}
            return slot_history(scope_currency(views), slot=slot, subject=subject, record_id=record_id)

    async def asearch(self, *args: Any, **kwargs: Any) -> SearchResult:
        """:meth:`search` for async callers (runs in a worker thread; the LLM calls are blocking)."""
        return await asyncio.to_thread(self.search, *args, **kwargs)

    async def aquery(self, *args: Any, **kwargs: Any) -> QueryResult:
        """:meth:`query` for async callers (runs in a worker thread; the LLM calls are blocking)."""
        return await asyncio.to_thread(self.query, *args, **kwargs)

    def _retrieve(self, req: QueryRequest) -> tuple[SearchResult, Selection, datetime, np.ndarray]:
        """The search result, its selection, the question date and the question's vector."""
        question = req.question
        t_start = time.perf_counter()
        timings: dict[str, float] = {}
        qid = req.question_id or f"q-{uuid.uuid4().hex[:12]}"
        qd = as_datetime(req.question_date) or datetime.now().replace(microsecond=0)
        budget = self.qcfg.select.budget_tokens if req.budget_tokens is None else req.budget_tokens

        t0 = time.perf_counter()
        cids = self.scope(req.conversation_id, req.user_id)  # an unknown id fails before any notice about the backend
        backend = self.backend(req.llm)
        views = {cid: self.view(cid) for cid in cids}
        timings["load"] = _ms(time.perf_counter() - t0)

        t0 = time.perf_counter()
        ctx = _plan_context(views.values())
        ctx.recent = recent_lines(list(req.recent_turns), self.qcfg.planner.recent_turns_tokens, self.encoding)
        planner = make_planner(backend, self.qcfg.planner, self.llm_client() if backend == OPENAI_BACKEND else None, self.encoding)
        plan_out = planner.plan(question, qd, ctx, question_id=qid)
        plan = plan_out.plan
        timings["plan"] = _ms(time.perf_counter() - t0)

        t0 = time.perf_counter()
        texts = list(dict.fromkeys([*(t for r in plan.routes for t in r.search_texts), question]))
        mat = np.asarray(self.embedder.encode(texts), dtype=np.float32)  # ONE batched call for all routes
        row = {t: i for i, t in enumerate(texts)}
        qvec = mat[row[question]]  # the question itself (usually a route's first search text)
        qvecs = [mat[[row[t] for t in r.search_texts]] for r in plan.routes]
        timings["embed"] = _ms(time.perf_counter() - t0)

        t0 = time.perf_counter()
        lists = [rl for group in self._run(self._channel_tasks(views, plan.routes, qvecs)) for rl in group]
        timings["channels"] = _ms(time.perf_counter() - t0)

        t0 = time.perf_counter()
        f = self.qcfg.fusion
        size = sum(v.num_records + v.num_turns for v in views.values())
        pool = rrf(lists, k=f.rrf_k, weights=f.weights.model_dump(),
                   limit=scaled_pool(f.pool_size, self.qcfg.recall, size))
        timings["fusion"] = _ms(time.perf_counter() - t0)

        t0 = time.perf_counter()
        relevance = [it.score for it in pool]
        order, report = rerank_order(self.reranker, self.qcfg.rerank, question, [_item_text(views, it) for it in pool]
                                     if self.qcfg.rerank.enabled else [])
        if report.applied:
            pool = [pool[i] for i in order]
            relevance = [1.0 / (f.rrf_k + r + 1) for r in range(len(pool))]
        timings["rerank"] = _ms(time.perf_counter() - t0)

        t0 = time.perf_counter()
        cur = self.qcfg.current
        sc = scope_currency(views) if cur.enabled else None
        reserve = 0
        if sc is not None and (sc.any_links or plan.history):
            pool, relevance = adjust_pool(pool, relevance, sc, cur.superseded_weight, plan.history, cur.current_margin)
            reserve = min(cur.mark_reserve_tokens, budget // 4)
        sel = select_evidence(pool, relevance, views, budget - reserve, self.qcfg.select, self.encoding)
        if sc is not None:
            show_conv = len({it.key.conversation_id for it in pool}) > 1
            sel = apply_marks(sel, sc, plan.history, cur, budget, show_conv, self.encoding)
        sel.budget = budget
        timings["selection"] = _ms(time.perf_counter() - t0)
        timings["total"] = _ms(time.perf_counter() - t_start)

        answer_est = answer_prompt_estimate(question, qd, sel.context, sel.tokens, self.encoding)
        usage = QueryUsage(
            backend=backend, plan_prompt_tokens=plan_out.prompt_tokens, plan_completion_tokens=plan_out.completion_tokens,
            answer_prompt_tokens=answer_est, query_prompt_tokens=plan_out.prompt_tokens + answer_est,
            context_tokens=sel.tokens, llm_calls=plan_out.calls, estimated=plan_out.estimated,
        )
        res = SearchResult(
            question_id=qid, question=question, question_date=qd.isoformat(), conversation_ids=cids, plan=plan,
            evidence=[EvidenceItem.from_evidence(e) for e in sel.evidence], context=sel.context, budget_tokens=budget,
            pool_size=len(pool), usage=usage, timings_ms=timings, rerank=report,
            explain=explain_search(pool, sel, views, [ch.name for ch in RECALL_CHANNELS]) if req.explain else None,
        )
        return res, sel, qd, qvec

    def _channel_tasks(self, views: dict[str, ConversationView], routes: list[Route],
                       qvecs: list[np.ndarray]) -> list[Callable[[], list[RankedList]]]:
        """One task per (conversation, route), running that route's channels; tasks run in parallel."""
        base = self.qcfg.recall

        def route_task(cid: str, view: ConversationView, ri: int, route: Route, qv: np.ndarray) -> list[RankedList]:
            rc = scaled_recall(base, view.num_records + view.num_turns)
            idents = route_identifiers(view, route_query_text(route)) if rc.prefer_identifiers else []
            return [RankedList(ch.name, ri, cid, prefer_identifiers(prefer_types(
                without_context(ch.recall(view, route, qv, rc), view, route.record_types), view, route.record_types),
                view, idents)) for ch in RECALL_CHANNELS]

        return [
            partial(route_task, cid, view, ri, route, qv)
            for cid, view in views.items()
            for ri, (route, qv) in enumerate(zip(routes, qvecs, strict=False))
        ]


def _ms(seconds: float) -> float:
    return round(seconds * 1000.0, 3)


def _plan_context(views: Iterable[ConversationView]) -> PlanContext:
    ctx = PlanContext()
    for v in views:
        for k, (disp, n) in v.entities.items():
            prev = ctx.entities.get(k)
            ctx.entities[k] = (disp, n + (prev[1] if prev else 0))
        ctx.topics |= v.topics
        ctx.speakers = list(dict.fromkeys([*ctx.speakers, *v.speakers]))
    return ctx


def _item_text(views: dict[str, ConversationView], it: FusedItem) -> str:
    v = views[it.key.conversation_id]
    if it.key.kind == "record":
        return v.record_text[v.record_pos[it.key.id]]
    if it.key.kind == "passage":
        pp = v.passage_pos[it.key.id]
        return f"{v.turn_speaker[v.passage_turn(pp)]}: {v.passages.text[pp]}"
    p = v.turn_pos[it.key.id]
    return f"{v.turn_speaker[p]}: {v.turn_text[p]}"


__all__ = ["QueryEngine"]
