"""The ``openai`` planner: one schema-constrained LLM call returning ``{routes[]}`` (the question
type is named by the code, :func:`~lychee_ray.query.plan.rules.guess_question_type`).

Each route has search texts (the first is its goal), entities, topics, record types and a time
constraint (``start..end`` or wording) resolved to an absolute range against the question date. A failed call or an unusable reply falls
back to the single route "the question itself", and the plan says so (``fallback``, the reason,
and its kind as data in ``fallback_kind``).
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from lychee_ray.config import PlannerConfig
from lychee_ray.core.records import TimeSpan, normalise_type
from lychee_ray.llm.errors import LLMCallFailed
from lychee_ray.llm.prompts import prompt_tokens_estimate
from lychee_ray.llm.usage import CallUsage
from lychee_ray.query.plan.history import asks_history
from lychee_ray.query.plan.model import PlanContext, PlanOutcome, QueryPlan, Route, question_route
from lychee_ray.query.plan.rules import guess_question_type
from lychee_ray.query.plan.prompt import PlanReply, TimeDraft, parse_time_text, plan_messages
from lychee_ray.text.time.normalise import normalise_time
from lychee_ray.text.tokens import DEFAULT_ENCODING
from lychee_ray.names import OPENAI_BACKEND

log = logging.getLogger(__name__)

_MAX_REASON_CHARS = 500  # a fallback reason is cut here (it travels in every result)


class OpenAIPlanner:
    """One LLM call; falls back to the question route when the call fails or the reply is unusable."""

    backend = OPENAI_BACKEND

    def __init__(self, client: Any, cfg: PlannerConfig, encoding: str = DEFAULT_ENCODING) -> None:
        self.client = client
        self.cfg = cfg
        self.encoding = encoding

    def plan(self, question: str, question_date: datetime | None, ctx: PlanContext, question_id: str | None = None) -> PlanOutcome:
        msgs = plan_messages(question, question_date, ctx.top_entities(self.cfg.context_entities), self.cfg.max_routes,
                             ctx.recent)
        estimate = prompt_tokens_estimate(msgs, PlanReply, self.encoding)
        keys = {"question_id": question_id} if question_id else None
        try:
            res = self.client.chat_json_sync(
                "plan", msgs, PlanReply, schema_name="query_plan",
                max_completion_tokens=self.cfg.max_completion_tokens, keys=keys,
                max_invalid_attempts=self.cfg.max_invalid_attempts,
            )
        except LLMCallFailed as e:
            log.warning("planner call failed, using the question as the only route: %s", e)
            spent = self._failed_usage(question_id)
            return self._fallback(question, question_date, f"llm call failed: {e.kind}: {e.error_text}", estimate, spent,
                                  kind=e.kind)
        try:
            plan = self._to_plan(res.parsed, question, question_date)
        except (ValueError, ValidationError) as e:
            log.warning("planner reply unusable, using the question as the only route: %s", e)
            out = self._fallback(question, question_date, f"invalid plan: {e}", estimate, None, kind="invalid_plan")
            u = res.usage
            out.usage, out.calls = u, 1
            out.prompt_tokens, out.completion_tokens, out.estimated = u.prompt_tokens, u.completion_tokens, u.estimated
            return out
        u = res.usage
        return PlanOutcome(plan=plan, prompt_tokens=u.prompt_tokens, completion_tokens=u.completion_tokens,
                           estimated=u.estimated, calls=1, usage=u)

    def _failed_usage(self, question_id: str | None) -> CallUsage | None:
        ledger = getattr(self.client, "ledger", None)
        if ledger is None or not question_id:
            return None
        mine = [u for u in ledger.entries() if u.stage == "plan" and u.question_id == question_id]
        return mine[-1] if mine else None

    def _fallback(self, question: str, question_date: datetime | None, reason: str, estimate: int,
                  spent: CallUsage | None, kind: str) -> PlanOutcome:
        plan = QueryPlan(
            question=question, question_date=question_date.isoformat() if question_date else None,
            question_type="other", routes=[question_route(question, question_date, origin="fallback")],
            backend=self.backend, fallback=True, fallback_reason=reason[:_MAX_REASON_CHARS], fallback_kind=kind,
            history=asks_history(question),
        )
        if spent is not None:  # tokens a failed call still cost (invalid replies are billed)
            return PlanOutcome(plan=plan, prompt_tokens=spent.prompt_tokens, completion_tokens=spent.completion_tokens,
                               estimated=spent.estimated, calls=1, usage=spent)
        return PlanOutcome(plan=plan, prompt_tokens=0, completion_tokens=0, estimated=True, calls=1)

    def _to_plan(self, reply: PlanReply, question: str, question_date: datetime | None) -> QueryPlan:
        """Clean the model's routes: trim texts, closed record-type vocabulary, absolute times."""
        routes: list[Route] = []
        for d in reply.routes:
            texts = [t.strip() for t in d.search_texts if t and t.strip()][: self.cfg.max_search_texts]
            if not texts:
                continue
            types: list[str] = [t for t in dict.fromkeys(normalise_type(x) for x in d.record_types) if t]
            routes.append(
                Route(
                    goal=texts[0], search_texts=texts,
                    entities=[e.strip() for e in d.entities if e and e.strip()],
                    topics=[t.strip() for t in d.topics if t and t.strip()],
                    record_types=types, time=self._time(parse_time_text(d.time), question_date), origin="llm",
                )
            )
            if len(routes) >= self.cfg.max_routes:
                break
        if not routes:
            raise ValueError("no route with a search text")
        qtype = guess_question_type(question, next((r.time for r in routes if r.time), None),
                                    len({e.lower() for r in routes for e in r.entities}))
        return QueryPlan(
            question=question, question_date=question_date.isoformat() if question_date else None,
            question_type=qtype, routes=routes, backend=self.backend, history=reply.history or asks_history(question),
        )

    @staticmethod
    def _time(d: TimeDraft | None, question_date: datetime | None) -> TimeSpan | None:
        """Absolute range from the draft (relative wording resolved against the question date)."""
        if d is None or not (d.start or d.end or d.expression):
            return None
        if d.start and d.end:
            span = normalise_time(d, [], question_date)
        elif d.start or d.end:  # one end given: the other is open ("after May 2023")
            point = normalise_time(TimeDraft(start=d.start or d.end, end=None, expression=None), [], question_date)
            if not point.start:
                return None
            span = TimeSpan(start=point.start if d.start else None, end=None if d.start else point.end,
                            granularity="range", expression=d.expression)
        else:
            span = normalise_time(TimeDraft(start=None, end=None, expression=d.expression), [], question_date)
        return span if (span.start or span.end) else None


__all__ = ["OpenAIPlanner"]
