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
  (:func:`~lychee_ray.timeparse.parse_query_time`).

Both report the prompt tokens the openai planner's prompt costs (for the rules backend it is the
offline count of the prompt it *would* send), so query costs are comparable across backends.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass, field
from datetime import date, datetime
from functools import lru_cache
from typing import Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .config import PlannerConfig
from .encode import normalise_type
from .llm.client import schema_for
from .llm.errors import LLMCallFailed
from .llm.usage import CallUsage
from .nodes import normalise_key
from .records import RECORD_TYPES, TimeSpan
from .timeparse import normalise_time, parse_query_time
from .tokens import DEFAULT_ENCODING, count_message_tokens, count_tokens

log = logging.getLogger(__name__)

RouteOrigin = Literal["question", "entity", "llm", "fallback"]
QUESTION_TYPES = ("single_hop", "multi_hop", "temporal", "open_domain", "preference", "procedural", "other")


# ------------------------------------------------------------------------------------------------
# plan model (what the rest of the query path consumes)
# ------------------------------------------------------------------------------------------------


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
    backend: str
    fallback: bool = False
    fallback_reason: str | None = None


@dataclass
class PlanContext:
    """What the planner may know about the memory being queried (scoped conversations only).

    ``entities`` maps normalised entity keys to (display name, number of linked records);
    ``topics`` is the set of normalised topic keys.
    """

    entities: dict[str, tuple[str, int]] = field(default_factory=dict)
    topics: set[str] = field(default_factory=set)
    speakers: list[str] = field(default_factory=list)

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
    backend: str

    def plan(
        self, question: str, question_date: datetime | None, ctx: PlanContext, question_id: str | None = None
    ) -> PlanOutcome: ...


# ------------------------------------------------------------------------------------------------
# the openai planner's schema and prompt (the rules planner counts the same prompt)
# ------------------------------------------------------------------------------------------------


class TimeDraft(BaseModel):
    """Time constraint as the model writes it: absolute ISO dates preferred."""

    model_config = ConfigDict(extra="forbid")

    start: str | None = Field(description="ISO date YYYY-MM-DD (or YYYY-MM / YYYY) the range starts, or null")
    end: str | None = Field(description="ISO date the range ends (inclusive), or null")
    expression: str | None = Field(description="the question's own time wording, or null")


class RouteDraft(BaseModel):
    model_config = ConfigDict(extra="forbid")

    goal: str = Field(description="what this route looks for")
    search_texts: list[str] = Field(description="1-3 short search queries phrased like the stored memories")
    entities: list[str] = Field(description="people, places, things the route is about")
    topics: list[str] = Field(description="short topic keywords")
    record_types: list[str] = Field(description="subset of: " + ", ".join(RECORD_TYPES) + " (empty = any)")
    time: TimeDraft | None = Field(description="time range the answer lies in, or null")


class PlanReply(BaseModel):
    """The JSON the openai planner must return."""

    model_config = ConfigDict(extra="forbid")

    question_type: str = Field(description="one of: " + ", ".join(QUESTION_TYPES))
    routes: list[RouteDraft] = Field(min_length=1)


PLAN_SYSTEM = (
    "You plan memory retrieval for a question about a long conversation history. The memory holds "
    "standalone records (types: " + ", ".join(RECORD_TYPES) + ") with entities, topics and absolute "
    "times, plus the raw turns.\n"
    "Return JSON with question_type and up to {max_routes} routes. Each route covers one thing the "
    "answer needs (for multi-hop questions one route per hop or per person/item); give each route "
    "1-3 short search texts phrased like a stored statement (e.g. 'Caroline adopted a dog'), the "
    "entities and topic keywords it concerns, record types if clearly implied, and a time range "
    "when the question restricts time. Resolve relative times (last week, in May) to absolute ISO "
    "dates using the question date (null for an open end). Use the known names' spelling when the question refers to them. "
    "Do not answer the question."
)


def plan_messages(question: str, question_date: datetime | None, known_names: list[str], max_routes: int) -> list[dict[str, str]]:
    """The openai planner's chat messages (static instructions first, for prompt caching)."""
    lines = []
    if question_date is not None:
        lines.append(f"Question date: {question_date.date().isoformat()} ({question_date:%A})")
    if known_names:
        lines.append("Known names: " + ", ".join(known_names))
    lines.append(f"Question: {question}")
    return [
        {"role": "system", "content": PLAN_SYSTEM.replace("{max_routes}", str(max_routes))},
        {"role": "user", "content": "\n".join(lines)},
    ]


@lru_cache(maxsize=64)
def schema_tokens(schema: type[BaseModel], encoding: str = DEFAULT_ENCODING) -> int:
    """Tokens of the JSON schema a structured-output call sends (providers bill it as prompt)."""
    schema_json, _ = schema_for(schema)
    return count_tokens(json.dumps(schema_json), encoding)


def prompt_tokens_estimate(messages: list[dict[str, str]], schema: type[BaseModel], encoding: str = DEFAULT_ENCODING) -> int:
    """Offline prompt tokens of a schema-constrained call: messages + the JSON schema."""
    return count_message_tokens(messages, encoding) + schema_tokens(schema, encoding)


# ------------------------------------------------------------------------------------------------
# helpers shared by both planners
# ------------------------------------------------------------------------------------------------


def as_datetime(value: datetime | date | str | None) -> datetime | None:
    """A question date from an ISO string / date / datetime (None stays None; bad strings raise)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    try:
        return datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError as e:
        raise ValueError(f"question_date is not an ISO date/datetime: {value!r}") from e


def question_route(question: str, question_date: datetime | None, origin: RouteOrigin = "question") -> Route:
    """The route "the question itself" (also the openai planner's fallback)."""
    return Route(goal="the question itself", search_texts=[question], time=parse_query_time(question, question_date), origin=origin)


_WORD = re.compile(r"\w+(?:['’]\w+)?")
# Words that are never useful as an entity/topic match on their own (question words, fillers).
_MATCH_STOP = frozenset(
    "a an the and or of to in on at for with from by about what when where who whom whose which why how "
    "did do does is are was were be been has have had i you he she it we they me my your his her its our "
    "their this that these those there here not no yes any some all both each other more most much many "
    "would could should will can may might must shall one two time day week month year ago last next "
    "first new good great like get got go went make made".split()
)


def match_keys(question: str, keys: set[str] | dict[str, Any], max_ngram: int = 4) -> list[str]:
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
            if k in keys and not (n == 1 and (k in _MATCH_STOP or len(k) < 2)):
                found.append((i, k))
                for j in range(i, i + n):
                    taken[j] = True
    return [k for _, k in sorted(found)]


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


# ------------------------------------------------------------------------------------------------
# planners
# ------------------------------------------------------------------------------------------------


class RulesPlanner:
    """Deterministic planner: question route + per-entity routes + time constraint from the text."""

    backend = "rules"

    def __init__(self, cfg: PlannerConfig, encoding: str = DEFAULT_ENCODING) -> None:
        self.cfg = cfg
        self.encoding = encoding

    def plan(self, question: str, question_date: datetime | None, ctx: PlanContext, question_id: str | None = None) -> PlanOutcome:
        base = question_route(question, question_date)
        ent_keys = match_keys(question, ctx.entities)
        topic_keys = [k for k in match_keys(question, ctx.topics) if k not in ent_keys]
        base.entities = [ctx.entities[k][0] for k in ent_keys]
        base.topics = topic_keys
        routes = [base]
        # One route per named entity — only when the question names several: with a single entity
        # the question route already carries it (exact node matches), and an identical second route
        # would only double every list in RRF without changing the order.
        for k in (ent_keys if len(ent_keys) > 1 else [])[: self.cfg.max_entity_routes]:
            if len(routes) >= self.cfg.max_routes:
                break
            name = ctx.entities[k][0]
            others = [ctx.entities[o][0] for o in ent_keys if o != k]
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
        )
        msgs = plan_messages(question, question_date, ctx.top_entities(self.cfg.context_entities), self.cfg.max_routes)
        return PlanOutcome(plan=plan, prompt_tokens=prompt_tokens_estimate(msgs, PlanReply, self.encoding))


class OpenAIPlanner:
    """One LLM call; falls back to the question route when the call fails or the reply is unusable."""

    backend = "openai"

    def __init__(self, client: Any, cfg: PlannerConfig, encoding: str = DEFAULT_ENCODING) -> None:
        self.client = client
        self.cfg = cfg
        self.encoding = encoding

    def plan(self, question: str, question_date: datetime | None, ctx: PlanContext, question_id: str | None = None) -> PlanOutcome:
        msgs = plan_messages(question, question_date, ctx.top_entities(self.cfg.context_entities), self.cfg.max_routes)
        estimate = prompt_tokens_estimate(msgs, PlanReply, self.encoding)
        keys = {"question_id": question_id} if question_id else None
        try:
            res = self.client.chat_json_sync(
                "plan", msgs, PlanReply, schema_name="query_plan",
                max_completion_tokens=self.cfg.max_completion_tokens, keys=keys,
            )
        except LLMCallFailed as e:
            log.warning("planner call failed, using the question as the only route: %s", e)
            spent = self._failed_usage(question_id)
            return self._fallback(question, question_date, f"llm call failed: {e.kind}: {e.error_text}", estimate, spent)
        try:
            plan = self._to_plan(res.parsed, question, question_date)
        except (ValueError, ValidationError) as e:
            log.warning("planner reply unusable, using the question as the only route: %s", e)
            out = self._fallback(question, question_date, f"invalid plan: {e}", estimate, None)
            out.usage, out.calls = res.usage, 1
            out.prompt_tokens, out.completion_tokens, out.estimated = res.usage.prompt_tokens, res.usage.completion_tokens, res.usage.estimated
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
                  spent: CallUsage | None) -> PlanOutcome:
        plan = QueryPlan(
            question=question, question_date=question_date.isoformat() if question_date else None,
            question_type="other", routes=[question_route(question, question_date, origin="fallback")],
            backend=self.backend, fallback=True, fallback_reason=reason[:500],
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
            types = [t for t in dict.fromkeys(normalise_type(x) for x in d.record_types) if t]
            routes.append(
                Route(
                    goal=d.goal.strip() or texts[0], search_texts=texts,
                    entities=[e.strip() for e in d.entities if e and e.strip()],
                    topics=[t.strip() for t in d.topics if t and t.strip()],
                    record_types=types, time=self._time(d.time, question_date), origin="llm",
                )
            )
            if len(routes) >= self.cfg.max_routes:
                break
        if not routes:
            raise ValueError("no route with a search text")
        qtype = reply.question_type.strip().lower().replace("-", "_").replace(" ", "_") or "other"
        return QueryPlan(
            question=question, question_date=question_date.isoformat() if question_date else None,
            question_type=qtype, routes=routes, backend=self.backend,
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


def make_planner(backend: str, cfg: PlannerConfig, client: Any = None, encoding: str = DEFAULT_ENCODING) -> Planner:
    """The planner for ``backend`` (``openai`` needs an LLM client)."""
    if backend == "openai":
        if client is None:
            raise ValueError("the openai planner needs an LLM client")
        return OpenAIPlanner(client, cfg, encoding)
    return RulesPlanner(cfg, encoding)


__all__ = [
    "OpenAIPlanner", "PlanContext", "PlanOutcome", "PlanReply", "Planner", "QueryPlan", "Route", "RouteDraft",
    "RulesPlanner", "TimeDraft", "as_datetime", "make_planner", "match_keys", "plan_messages", "question_route",
]
