"""The openai planner's reply schema and prompt (the rules planner counts the same prompt, so
query costs are comparable across backends)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from lychee_ray.core.records import RECORD_TYPES
from lychee_ray.llm.schema import lean_json_schema

# The schema and the instructions are billed on every query: titles and docstrings are kept out of
# the schema (``lean_json_schema``), field descriptions are a few words, and the instructions say the
# rest once.
_LEAN = ConfigDict(extra="forbid", json_schema_extra=lean_json_schema)


class TimeDraft(BaseModel):
    """A route's time constraint read from the reply's ``time`` text (:func:`parse_time_text`)."""

    model_config = ConfigDict(extra="forbid")

    start: str | None = None
    end: str | None = None
    expression: str | None = None


TIME_RANGE_SEP = ".."


def parse_time_text(text: str | None) -> TimeDraft | None:
    """``"2023-05-01..2023-05-31"`` (either end may be empty: an open end), ``"2023-05"`` (one
    period), or wording such as ``"last week"`` left for the code's normaliser; empty = None."""
    t = (text or "").strip()
    if not t or t.lower() in ("null", "none"):
        return None
    if TIME_RANGE_SEP in t:
        head, _, tail = t.partition(TIME_RANGE_SEP)
        a, b = head.strip() or None, tail.strip() or None
        return TimeDraft(start=a, end=b) if (a or b) else None
    if t[:4].isdigit():
        return TimeDraft(start=t, end=t)
    return TimeDraft(expression=t)


class RouteDraft(BaseModel):
    """One route as the model writes it (cleaned into a :class:`~lychee_ray.query.plan.model.Route`,
    whose goal is its first search text)."""

    model_config = _LEAN

    search_texts: list[str]
    entities: list[str]
    topics: list[str]
    record_types: list[str]
    time: str | None = Field(description="ISO start..end or null")


class PlanReply(BaseModel):
    """The JSON the openai planner must return: its routes. The question type is informational (no
    channel reads it), so the code names it (:func:`~lychee_ray.query.plan.rules.guess_question_type`)
    and the tokens of every query go to the routes."""

    model_config = _LEAN

    routes: list[RouteDraft] = Field(min_length=1)
    history: bool = Field(False, description="asks what a value was before, or when it changed")


PLAN_SYSTEM = (
    "Plan memory retrieval for a question about a long conversation. JSON: 1-{max_routes} routes, one "
    "per thing the answer needs (hop, person or item). Route: 1-3 search_texts phrased like stored "
    "statements; entities (known names' spelling); topics; record_types if implied ("
    + ", ".join(RECORD_TYPES) + "); time: ISO 'start..end' the question restricts to (relative times "
    "resolved from the question date; open end empty) or null. Do not answer."
)


def plan_messages(question: str, question_date: datetime | None, known_names: list[str], max_routes: int,
                  recent: list[str] | None = None) -> list[dict[str, str]]:
    """The openai planner's chat messages (static instructions first, for prompt caching);
    ``recent``: the asking agent's recent turns (bounded lines), which the question may refer to."""
    lines = []
    if question_date is not None:
        lines.append(f"Question date: {question_date.date().isoformat()} ({question_date:%A})")
    if known_names:
        lines.append("Known names: " + ", ".join(known_names))
    if recent:
        lines.append("Recent turns (what the question may refer to):")
        lines.extend(f"- {r}" for r in recent)
    lines.append(f"Question: {question}")
    return [
        {"role": "system", "content": PLAN_SYSTEM.replace("{max_routes}", str(max_routes))},
        {"role": "user", "content": "\n".join(lines)},
    ]


__all__ = ["PLAN_SYSTEM", "PlanReply", "RouteDraft", "TIME_RANGE_SEP", "TimeDraft", "parse_time_text", "plan_messages"]
