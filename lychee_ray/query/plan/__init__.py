"""Query planner (DESIGN §1 step 4): question → question type + retrieval routes.

Two backends with one output type (:class:`QueryPlan`):

- ``openai``: one schema-constrained LLM call returning ``{question_type, routes[]}``; each route
  has a goal, search texts, entities, topics, record types and a time constraint that is resolved
  to an absolute range against the question date. A failed call or an unusable reply falls back to
  the single route "the question itself", and the plan says so (``fallback`` + reason).
- ``rules``: deterministic. The question as one route, one more route per known entity when the
  question names several (matched by normalised key against the conversation's entity nodes; each
  entity route drops the other names from its search text), and a time
  constraint when the question names a date, month, year or relative time
  (:func:`~lychee_ray.text.time.query.parse_query_time`).

Both report the prompt tokens the openai planner's prompt costs (for the rules backend it is the
offline count of the prompt it *would* send), so query costs are comparable across backends.

Modules: :mod:`.model` (the plan and the planner protocol), :mod:`.prompt` (the openai reply schema
and prompt), :mod:`.rules` and :mod:`.openai` (the two planners). This package is their public face.
"""

from __future__ import annotations

from typing import Any

from lychee_ray.config import PlannerConfig
from lychee_ray.query.plan.model import (
    QUESTION_TYPES,
    PlanContext,
    PlanOutcome,
    Planner,
    QueryPlan,
    Route,
    RouteOrigin,
    question_route,
)
from lychee_ray.query.plan.openai import OpenAIPlanner
from lychee_ray.query.plan.prompt import PLAN_SYSTEM, PlanReply, RouteDraft, TimeDraft, plan_messages
from lychee_ray.query.plan.rules import RulesPlanner, guess_question_type, match_keys
from lychee_ray.text.tokens import DEFAULT_ENCODING
from lychee_ray.names import LLMBackend, OPENAI_BACKEND


def make_planner(backend: LLMBackend, cfg: PlannerConfig, client: Any = None, encoding: str = DEFAULT_ENCODING) -> Planner:
    """The planner for ``backend`` (``openai`` needs an LLM client)."""
    if backend == OPENAI_BACKEND:
        if client is None:
            raise ValueError("the openai planner needs an LLM client")
        return OpenAIPlanner(client, cfg, encoding)
    return RulesPlanner(cfg, encoding)


__all__ = [
    "OpenAIPlanner", "PLAN_SYSTEM", "PlanContext", "PlanOutcome", "PlanReply", "Planner", "QUESTION_TYPES", "QueryPlan",
    "Route", "RouteDraft", "RouteOrigin", "RulesPlanner", "TimeDraft", "guess_question_type", "make_planner",
    "match_keys", "plan_messages", "question_route",
]
