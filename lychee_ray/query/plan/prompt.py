"""The openai planner's reply schema and prompt (the rules planner counts the same prompt, so
query costs are comparable across backends)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from lychee_ray.core.records import RECORD_TYPES
from lychee_ray.query.plan.model import QUESTION_TYPES


class TimeDraft(BaseModel):
    """Time constraint as the model writes it: absolute ISO dates preferred."""

    model_config = ConfigDict(extra="forbid")

    start: str | None = Field(description="ISO date YYYY-MM-DD (or YYYY-MM / YYYY) the range starts, or null")
    end: str | None = Field(description="ISO date the range ends (inclusive), or null")
    expression: str | None = Field(description="the question's own time wording, or null")


class RouteDraft(BaseModel):
    """One route as the model writes it (cleaned into a :class:`~lychee_ray.query.plan.model.Route`)."""

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


__all__ = ["PLAN_SYSTEM", "PlanReply", "RouteDraft", "TimeDraft", "plan_messages"]
