"""The ``rules`` planner: deterministic, no model.

The question as one route, one more route per known entity when the question names several
(matched by normalised key against the conversation's entity nodes; each entity route drops the
other names from its search text), the known names and ids the asking agent's recent turns
mention (added to the question route, as a second search text), and a time constraint when the question names a date, month,
year or relative time (:func:`~lychee_ray.text.time.query.parse_query_time`).
"""

from __future__ import annotations

import re
from datetime import datetime
from typing import Any

from lychee_ray.config import PlannerConfig
from lychee_ray.core.keys import normalise_key
from lychee_ray.core.records import TimeSpan
from lychee_ray.llm.prompts import prompt_tokens_estimate
from lychee_ray.query.plan.history import asks_history
from lychee_ray.query.plan.model import PlanContext, PlanOutcome, QueryPlan, Route, question_route
from lychee_ray.query.plan.prompt import PlanReply, plan_messages
from lychee_ray.text.stopwords import MATCH_STOPWORDS
from lychee_ray.text.tokens import DEFAULT_ENCODING
from lychee_ray.names import RULES_BACKEND

_MAX_NGRAM = 4  # longest entity/topic name (in words) matched in a question
_ROLE_KEYS = frozenset({"user", "assistant", "agent", "tool", "system"})
# A question about the rules (an agent's policy): its route asks for constraint / procedure records,
# which also lets a system prompt's rules into recall (query/engine.py).
_RULE_QUESTION = re.compile(r"\b(?:polic(?:y|ies)|rules?|allowed|permitted|eligib(?:le|ility)|prohibited)\b", re.I)


def match_keys(question: str, keys: set[str] | dict[str, Any], max_ngram: int = _MAX_NGRAM) -> list[str]:
    """Normalised keys of ``keys`` that the question names, longest match first, in question order.

    N-grams (up to ``max_ngram`` words) of the normalised question are looked up; a word already
    inside a longer match is not matched again ("new york" wins over "york").
    """
    words = normalise_key(question).split()
    taken = [False] * len(words)
    found: list[tuple[int, str]] = []
    for n in range(min(max_ngram, len(words)), 0, -1):
        for i in range(len(words) - n + 1):
            if any(taken[i : i + n]):
                continue
            k = " ".join(words[i : i + n])
            if k in keys and not (n == 1 and (k in MATCH_STOPWORDS or len(k) < 2)):
                found.append((i, k))
                for j in range(i, i + n):
                    taken[j] = True
    return [k for _, k in sorted(found)]


def _is_identifier(name: str) -> bool:
    """A code or id rather than a name: digits in it, or joined by ``_`` / ``@``."""
    return any(c.isdigit() for c in name) or "_" in name or "@" in name


def guess_question_type(question: str, time: TimeSpan | None, n_entities: int) -> str:
    """Rules: a coarse question type (informational; the routes do not depend on it)."""
    q = question.lower().strip()
    if q.startswith(("when ", "how long", "what year", "what month", "what date")) or time is not None:
        return "temporal"
    if re.match(r"^(would|could|might|is it likely|does .* likely|what might)\b", q) or " likely " in q:
        return "open_domain"
    if n_entities >= 2 or re.search(r"\b(both|and|all|activities|things|which|what kinds?)\b", q):
        return "multi_hop"
    return "single_hop"


class RulesPlanner:
    """Deterministic planner: question route + per-entity routes + time constraint from the text."""

    backend = RULES_BACKEND

    def __init__(self, cfg: PlannerConfig, encoding: str = DEFAULT_ENCODING) -> None:
        self.cfg = cfg
        self.encoding = encoding

    def plan(self, question: str, question_date: datetime | None, ctx: PlanContext, question_id: str | None = None) -> PlanOutcome:
        base = question_route(question, question_date)
        # a speaker named for its role ("User", "Assistant") is in most of an agent log's records:
        # no route of its own, and not a name to drop from other routes
        ent_keys = [k for k in match_keys(question, ctx.entities) if k not in _ROLE_KEYS]
        topic_keys = [k for k in match_keys(question, ctx.topics) if k not in ent_keys]
        base.entities = [ctx.entities[k][0] for k in ent_keys]
        base.topics = topic_keys
        if _RULE_QUESTION.search(question):
            base.record_types = ["constraint", "procedure"]
        if ctx.recent:  # H_q: names and ids of the agent's recent turns the question may refer to
            recent_keys = [k for k in match_keys(" ".join(ctx.recent), ctx.entities) if k not in ent_keys]
            names = [ctx.entities[k][0] for k in recent_keys]
            if names:
                base.entities = [*base.entities, *names]
                base.search_texts = [question, f"{question} ({', '.join(names)})"][: self.cfg.max_search_texts]
        routes = [base]
        # One route per named entity — only when the question names several: with a single entity
        # the question route already carries it (exact node matches), and an identical second route
        # would only double every list in RRF without changing the order.
        for k in (ent_keys if len(ent_keys) > 1 else [])[: self.cfg.max_entity_routes]:
            if len(routes) >= self.cfg.max_routes:
                break
            name = ctx.entities[k][0]
            # the other names leave this route's text; identifiers (codes, ids: they have digits)
            # stay — a route that lost the reservation code it asks about finds other reservations
            others = [ctx.entities[o][0] for o in ent_keys if o != k and not _is_identifier(ctx.entities[o][0])]
            text = question
            for o in others:  # the route is about this entity: drop the other names from its search text
                text = re.sub(re.escape(o), " ", text, flags=re.I)
            text = " ".join(text.split())
            if normalise_key(name) not in normalise_key(text):
                text = f"{name}: {text}"
            routes.append(
                Route(goal=f"what the memory says about {name}", search_texts=[text], entities=[name],
                      topics=topic_keys, time=base.time, origin="entity")
            )
        plan = QueryPlan(
            question=question, question_date=question_date.isoformat() if question_date else None,
            question_type=guess_question_type(question, base.time, len(ent_keys)), routes=routes, backend=self.backend,
            history=asks_history(question),
        )
        msgs = plan_messages(question, question_date, ctx.top_entities(self.cfg.context_entities), self.cfg.max_routes,
                             ctx.recent)
        return PlanOutcome(plan=plan, prompt_tokens=prompt_tokens_estimate(msgs, PlanReply, self.encoding))


__all__ = ["RulesPlanner", "guess_question_type", "match_keys"]
