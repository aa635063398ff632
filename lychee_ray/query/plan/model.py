"""The plan: what the query path consumes (routes, question type, how the plan was produced),
what a planner may know about the memory (:class:`PlanContext`) and the :class:`Planner` protocol."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field

from lychee_ray.core.records import TimeSpan
from lychee_ray.llm.usage import CallUsage
from lychee_ray.text.time.query import parse_query_time
from lychee_ray.text.tokens import DEFAULT_ENCODING, count_tokens, truncate_to_tokens
from lychee_ray.names import LLMBackend

RouteOrigin = Literal["question", "entity", "llm", "fallback"]
QUESTION_TYPES = ("single_hop", "multi_hop", "temporal", "open_domain", "preference", "procedural", "other")


class Route(BaseModel):
    """One retrieval route: the channels run once per route and RRF fuses across routes."""

    model_config = ConfigDict(extra="forbid")

    goal: str
    search_texts: list[str] = Field(min_length=1)
    entities: list[str] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=list)
    record_types: list[str] = Field(default_factory=list)
    time: TimeSpan | None = Field(None, description="Absolute date range (ISO, inclusive; open ends allowed).")
    origin: RouteOrigin = "question"


class QueryPlan(BaseModel):
    """The planner's output plus how it was produced."""

    model_config = ConfigDict(extra="forbid")

    question: str
    question_date: str | None = None
    question_type: str = "other"
    routes: list[Route] = Field(min_length=1)
    backend: LLMBackend
    fallback: bool = False
    fallback_reason: str | None = None
    # why the planner fell back, as data: an LLM error kind (``LLMCallFailed.kind``) or "invalid_plan"
    fallback_kind: str | None = None
    # the question asks what a value was before or when it changed (query/plan/history.py): the
    # context shows each found slot's values in time order instead of the current value first
    history: bool = False


class RecentTurn(BaseModel):
    """One of the asking agent's recent turns (the paper's H_q): context for planning, not memory."""

    model_config = ConfigDict(extra="forbid")

    role: str = Field(default="user", max_length=32, description="user / assistant / tool / system")
    speaker: str = Field(default="", max_length=200, description="display name (default: the role)")
    content: str = Field(description="the turn's text")

    def line(self) -> str:
        return f"{self.speaker or self.role}: {' '.join(self.content.split())}"


def recent_lines(turns: list[RecentTurn | str | dict] | None, max_tokens: int, encoding: str = DEFAULT_ENCODING) -> list[str]:
    """The recent turns as ``speaker: text`` lines, oldest first, keeping the newest that fit
    ``max_tokens`` (a turn that alone does not fit is cut to the budget left; 0 = none)."""
    if not turns or max_tokens <= 0:
        return []
    items = [t if isinstance(t, RecentTurn) else RecentTurn(content=t) if isinstance(t, str) else RecentTurn.model_validate(t)
             for t in turns]
    kept: list[str] = []
    used = 0
    for t in reversed(items):
        line = t.line()
        n = count_tokens(line, encoding) + 1
        if used + n > max_tokens:
            if not kept:  # the newest turn is what the question most likely refers to: keep its head
                kept.append(truncate_to_tokens(line, max_tokens - 1, encoding))
            break
        kept.append(line)
        used += n
    return kept[::-1]


@dataclass
class PlanContext:
    """What the planner may know about the memory being queried (scoped conversations only).

    ``entities`` maps normalised entity keys to (display name, number of linked records);
    ``topics`` is the set of normalised topic keys.
    """

    entities: dict[str, tuple[str, int]] = field(default_factory=dict)
    topics: set[str] = field(default_factory=set)
    speakers: list[str] = field(default_factory=list)
    # the asking agent's recent turns (H_q), bounded lines, oldest first (:func:`recent_lines`)
    recent: list[str] = field(default_factory=list)

    def top_entities(self, n: int) -> list[str]:
        """Display names of the ``n`` most-referenced entities (speakers first)."""
        if n <= 0:
            return []
        ranked = sorted(self.entities.values(), key=lambda v: (-v[1], v[0]))
        names = list(dict.fromkeys([*self.speakers, *(d for d, _ in ranked)]))
        return names[:n]


@dataclass
class PlanOutcome:
    """A plan and what producing it cost."""

    plan: QueryPlan
    prompt_tokens: int
    completion_tokens: int = 0
    estimated: bool = True  # True = offline count of the prompt (rules backend or no usage reported)
    calls: int = 0
    usage: CallUsage | None = None


class Planner(Protocol):
    """Question → :class:`PlanOutcome`; ``backend`` names the implementation (openai | rules)."""

    backend: LLMBackend

    def plan(
        self, question: str, question_date: datetime | None, ctx: PlanContext, question_id: str | None = None
    ) -> PlanOutcome: ...


def question_route(question: str, question_date: datetime | None, origin: RouteOrigin = "question") -> Route:
    """The route "the question itself" (also the openai planner's fallback)."""
    return Route(goal="the question itself", search_texts=[question], time=parse_query_time(question, question_date), origin=origin)


__all__ = [
    "PlanContext", "PlanOutcome", "Planner", "QUESTION_TYPES", "QueryPlan", "RecentTurn", "Route", "RouteOrigin",
    "question_route", "recent_lines",
]
