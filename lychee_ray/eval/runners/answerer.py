"""Answering one benchmark question for one variant on one store (plain Python, thread-safe).

The ``memory`` kind asks the store (plan → recall → fuse → select → answer); the baseline kinds
(:mod:`lychee_ray.eval.baselines.retrieval`: ``turn_rag``, ``sentence_rag``, ``hybrid_rag`` at the query
budget, ``full_context`` up to ``eval.full_context_max_tokens``) answer from their plain lines.
Every row also records what its context text contains: per gold turn the share of its content
words (:mod:`lychee_ray.eval.metrics.context`) and whether the gold answer occurs in it (a question
with a rubric: its short answers, :mod:`lychee_ray.eval.metrics.rubric`). With a judge configured,
every answer is judged (CORRECT/WRONG, or with ``judge_protocol`` ``rubric`` a score per rubric
statement; ``stage="judge"``, tokens counted apart).
Executors run many of these at once.
"""

from __future__ import annotations

import logging
import threading
import time
from datetime import datetime
from typing import Any, cast

import numpy as np

from lychee_ray.config import LycheeConfig
from lychee_ray.embed import get_embedder
from lychee_ray.eval.baselines.factory import EMBEDDING_BASELINES, make_baseline
from lychee_ray.eval.baselines.retrieval import FullContext, TurnUnits, lychee_plain_context
from lychee_ray.eval.metrics.context import (
    answer_in_context,
    citing_texts,
    gold_word_coverage,
    normalized_context,
)
from lychee_ray.eval.metrics.rubric import answers_in_context, short_answers
from lychee_ray.eval.runners.judge import LLMJudge
from lychee_ray.eval.runners.retrieval import last_session_date
from lychee_ray.eval.setup.rows import AnswerRow, QuestionPayload
from lychee_ray.llm.backend import make_llm_client
from lychee_ray.query.request import QueryRequest
from lychee_ray.llm.ratelimit import RateLimiter
from lychee_ray.query.answer import make_answerer
from lychee_ray.query.engine import QueryEngine as MemoryStore  # the query side is all an evaluation uses
from lychee_ray.text.dates import as_datetime
from lychee_ray.text.tokens import count_tokens
from lychee_ray.names import LLMBackend, OPENAI_BACKEND, RUBRIC_JUDGE

log = logging.getLogger(__name__)


class QuestionAnswerer:
    """Answers (and judges) questions for one variant against one store. Thread-safe.

    ``spec`` (JSON-serialisable, so it can travel to a Ray actor): ``cfg_json`` (query config),
    ``backend``, ``kind`` (``memory`` or a baseline name), ``variant``,
    ``variant_key``, ``store`` (path), optional ``judge_cfg_json``, ``judge_protocol`` (``answer``, the
    default, or ``rubric`` for questions that have one) and ``in_flight``. ``limiter`` is
    the rate limiter every LLM call of this answerer (plan, answer, judge) goes through; without one
    each client gets its own process-local limiter.
    """

    def __init__(self, spec: dict[str, Any], limiter: RateLimiter | None = None, *, embedder: Any = None,
                 llm_client: Any = None, judge_client: Any = None) -> None:
        self.spec = spec
        self.cfg = LycheeConfig.model_validate_json(spec["cfg_json"])
        self.backend: LLMBackend = spec["backend"]
        self.kind: str = spec["kind"]
        self.variant: str = spec["variant"]
        self.key: str = spec["variant_key"]
        self.encoding = self.cfg.tokenizer.encoding
        client = llm_client
        if self.backend == OPENAI_BACKEND and client is None:
            client = make_llm_client(self.cfg, limiter=limiter)
        self.client = client
        self.store = MemoryStore(spec["store"], self.cfg, embedder=embedder, llm=self.backend, llm_client=client)
        self.judge = None
        self.judge_protocol: str = spec.get("judge_protocol") or "answer"
        self.judge_cfg = self.cfg
        if spec.get("judge_cfg_json"):
            jcfg = self.judge_cfg = LycheeConfig.model_validate_json(spec["judge_cfg_json"])
            jc = judge_client or make_llm_client(jcfg, limiter=limiter)
            self.judge = LLMJudge(jc, jcfg.eval.judge_max_completion_tokens, self.encoding)
        self._embedder = embedder
        self._baselines: dict[str, Any] = {}
        self._fixed: dict[str, str] = {}  # full context: its normalised text, once per conversation
        self._chats: dict[str, str] = {}  # a conversation's normalised text (rubric short answers)
        self._lock = threading.Lock()

    def close(self) -> None:
        """Release the store (and its caches)."""
        self.store.close()

    # -- per-conversation helpers ------------------------------------------------------------------
    def _baseline(self, cid: str) -> Any:
        """The variant's baseline over one conversation (built once; thread-safe)."""
        with self._lock:
            b = self._baselines.get(cid)
        if b is None:
            doc_embedder = None
            if self.kind in EMBEDDING_BASELINES:
                doc_embedder = self._embedder or get_embedder(self.cfg.embedding, self.cfg.llm)
            b = make_baseline(self.kind, TurnUnits(self.store.view(cid), self.encoding), self.cfg, doc_embedder)
            with self._lock:
                b = self._baselines.setdefault(cid, b)
        return b

    def _question_date(self, q: QuestionPayload, cid: str) -> datetime | None:
        return as_datetime(q["question_date"]) if q.get("question_date") else last_session_date(self.store.view(cid))

    # -- one question --------------------------------------------------------------------------------
    def answer(self, q: QuestionPayload) -> AnswerRow:
        """Answer (and judge) one question; a failure is recorded on the row, never raised."""
        t0 = time.perf_counter()
        cid = q["conversation_id"]
        row: dict[str, Any] = {  # latency and answer time are added last
            "variant": self.variant, "variant_key": self.key, "question_id": q["question_id"], "conversation_id": cid,
            "category": q["category"], "question": q["question"], "gold": q["answer"], "answer": "",
            "answer_error": None, "abstention": bool(q.get("abstention")), "evidence_ids": [], "evidence_turn_ids": [],
            "context_tokens": 0, "plain_context_tokens": 0, "gold_word_coverage": [], "answer_in_context": None,
            "context_truncated": False, "plan_prompt_tokens": 0, "plan_completion_tokens": 0,
            "answer_prompt_tokens": 0, "answer_completion_tokens": 0, "query_tokens": 0, "llm_calls": 0,
            "tokens_estimated": self.backend != OPENAI_BACKEND, "plan_fallback": False, "judge_verdict": None, "judge_reason": None,
            "judge_prompt_tokens": 0, "judge_completion_tokens": 0, "judge_calls": 0, "judge_error": None,
            "judge_score": None,
        }
        try:
            if self.kind == "memory":
                self._memory(q, row)
            else:
                self._turns(q, row)
        except Exception as e:  # noqa: BLE001 — one failed question is recorded (and redone on resume), never fatal
            log.exception("question %s (%s) failed", q["question_id"], self.variant)
            row["answer_error"] = f"{type(e).__name__}: {e}"
        row["query_tokens"] = (row["plan_prompt_tokens"] + row["plan_completion_tokens"] + row["answer_prompt_tokens"]
                               + row["answer_completion_tokens"])
        if self.judge is not None and row["answer_error"] is None:
            if self.judge_protocol == RUBRIC_JUDGE and q.get("rubric"):
                j = self.judge.judge_rubric(q["question"], list(q["rubric"]), row["answer"],
                                            self.judge_cfg.eval.beam.rubric_pass_score, question_id=q["question_id"])
            else:
                j = self.judge.judge(q["question"], q["answer"], row["answer"], question_id=q["question_id"],
                                     abstention=row["abstention"], category=q["category"])
            row.update(judge_verdict=j.verdict, judge_reason=j.reason, judge_prompt_tokens=j.prompt_tokens,
                       judge_completion_tokens=j.completion_tokens, judge_calls=j.calls, judge_error=j.error,
                       judge_score=j.score)
        row["latency_ms"] = round((time.perf_counter() - t0) * 1000.0, 3)
        row["answered_at"] = time.time()
        return cast(AnswerRow, row)

    def _memory(self, q: QuestionPayload, row: dict[str, Any]) -> None:
        cid = q["conversation_id"]
        res = self.store.query(QueryRequest(conversation_id=cid, question=q["question"],
                                            question_date=self._question_date(q, cid), question_id=q["question_id"]))
        u = res.usage
        row.update(
            answer=res.answer, answer_error=res.answer_error, evidence_ids=[e.id for e in res.evidence],
            evidence_turn_ids=sorted({t for e in res.evidence for t in e.source_turn_ids}), context_tokens=u.context_tokens,
            plan_prompt_tokens=u.plan_prompt_tokens, plan_completion_tokens=u.plan_completion_tokens,
            answer_prompt_tokens=u.answer_prompt_tokens, answer_completion_tokens=u.answer_completion_tokens,
            llm_calls=u.llm_calls, tokens_estimated=u.estimated, plan_fallback=bool(res.plan.fallback),
        )
        plain = lychee_plain_context(res.evidence)
        self._measure(q, row, [(e.source_turn_ids, e.text) for e in res.evidence], plain, count_tokens(plain, self.encoding))

    def _measure(self, q: QuestionPayload, row: dict[str, Any], units: list[tuple[list[str], str]], plain: str,
                 plain_tokens: int, norm: str | None = None) -> None:
        """What the context text contains: gold-turn word coverage (by citing units) and answer presence."""
        view = self.store.view(q["conversation_id"])
        gold = list(dict.fromkeys(q.get("evidence") or []))
        texts = [view.turn_text[view.turn_pos[t]] if t in view.turn_pos else "" for t in gold]
        if q.get("rubric"):
            answers = short_answers(q["rubric"], self._chat(q["conversation_id"]), self.cfg.eval.beam.short_answer_max_words)
            aic = answers_in_context(answers, norm if norm is not None else normalized_context(plain))
        else:
            aic = answer_in_context(q["answer"], q["category"], plain, normalized=norm)
        row.update(plain_context_tokens=plain_tokens,
                   gold_word_coverage=gold_word_coverage(texts, citing_texts(gold, units)), answer_in_context=aic)

    def _chat(self, cid: str) -> str:
        """The conversation's normalised text (computed once; thread-safe)."""
        with self._lock:
            text = self._chats.get(cid)
        if text is None:
            text = normalized_context("\n".join(self.store.view(cid).turn_text))
            with self._lock:
                text = self._chats.setdefault(cid, text)
        return text

    def _turns(self, q: QuestionPayload, row: dict[str, Any]) -> None:
        """The baselines: answer from the baseline's plain lines."""
        cid = q["conversation_id"]
        system = self._baseline(cid)
        qd = self._question_date(q, cid)
        qvec = (np.asarray(self.store.embedder.encode([q["question"]]), dtype=np.float32)[0]
                if self.kind != "full_context" else None)
        sel = system.select(q["question"], qvec, self.cfg.query.select.budget_tokens)
        client = self.client if self.backend == OPENAI_BACKEND else None
        answerer = make_answerer(self.backend, self.cfg.query.answer, client, self.encoding)
        out = answerer.answer(q["question"], qd, sel.units, sel.context, question_id=q["question_id"])
        row.update(
            answer=out.answer, answer_error=out.error,
            evidence_ids=[u.id for u in sel.units] if self.kind != "full_context" else [],
            evidence_turn_ids=sel.turn_ids, context_tokens=sel.tokens, context_truncated=sel.truncated,
            answer_prompt_tokens=out.prompt_tokens, answer_completion_tokens=out.completion_tokens, llm_calls=out.calls,
            tokens_estimated=out.estimated,
        )
        norm = None
        if isinstance(system, FullContext):
            with self._lock:
                norm = self._fixed.setdefault(cid, normalized_context(sel.context))
        self._measure(q, row, [(u.turn_ids, u.text) for u in sel.units], sel.context, sel.tokens, norm)


__all__ = ["QuestionAnswerer"]
