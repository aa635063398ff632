"""One query request: a question, where to look, and how to answer it.

Every surface carries this one model: :meth:`QueryEngine.search` / ``query`` (and ``MemoryStore``'s)
take it, the HTTP body of ``POST /v1/search`` and ``/v1/query`` is it (``serve/schemas.py`` adds
the service's limits and leaves out what the service decides itself), the HTTP client sends it and
``lychee-ray query`` builds it from its arguments::

    req = QueryRequest(question="Where did Caroline move from?", conversation_id="c-1", budget_tokens=600)
    store.search(req)       # or store.search("c-1", "Where did Caroline move from?", budget_tokens=600)
"""

from __future__ import annotations

from datetime import date, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lychee_ray.names import CONVERSATION_SCOPE, USER_SCOPE, LLMBackend, Scope
from lychee_ray.query.plan.model import RecentTurn


class QueryRequest(BaseModel):
    """One question, scoped to one conversation or to every conversation of one user.

    ``recent_turns`` may be given as :class:`RecentTurn` objects, dicts or plain strings (a string is
    a turn's content). ``llm`` and ``question_id`` are this process's choices: a service decides
    them itself, so its HTTP body has neither.
    """

    model_config = ConfigDict(extra="forbid", frozen=True, json_schema_extra={"examples": [
        {"conversation_id": "locomo-26", "question": "When did Caroline go to the LGBTQ support group?",
         "question_date": "2023-08-01"}]})

    conversation_id: str | None = Field(default=None, description="the conversation to read (needs no user_id)")
    user_id: str | None = Field(default=None, description="read all of this user's conversations; with "
                                                          "conversation_id: that conversation must be this user's")
    question: str = Field(min_length=1, description="the question")
    question_date: datetime | date | str | None = Field(
        default=None, description="ISO date/datetime anchoring relative times ('last week'); default now")
    budget_tokens: int | None = Field(default=None, ge=0, description="context token budget (default "
                                                                      "query.select.budget_tokens)")
    recent_turns: list[RecentTurn] = Field(
        default_factory=list,
        description="the asking agent's last turns, oldest first (what 'it' or 'that order' refers to); shown to the "
                    "planner up to query.planner.recent_turns_tokens, newest kept")
    explain: bool = Field(default=False, description="also return `explain`: every fused pool item with its rank in each "
                                                     "recall channel, its fused score and what became of it, and what the "
                                                     "token budget dropped")
    llm: LLMBackend | None = Field(default=None, description="the LLM backend for plan and answer (default: the "
                                                             "engine's)")
    question_id: str | None = Field(default=None, description="the result's question_id (default: a new random one)")

    @field_validator("question")
    @classmethod
    def _question_not_blank(cls, v: str) -> str:
        if not v.strip():
            raise ValueError("question is blank")
        return v

    @field_validator("recent_turns", mode="before")
    @classmethod
    def _turns_of_strings(cls, v: Any) -> Any:
        if isinstance(v, (list, tuple)):
            return [{"content": t} if isinstance(t, str) else t for t in v]
        return v

    @model_validator(mode="after")
    def _scoped(self) -> QueryRequest:
        if self.conversation_id is None and self.user_id is None:
            raise ValueError("a query needs conversation_id or user_id")
        return self

    @property
    def scope(self) -> Scope:
        """What the request reads: one conversation, or all of a user's."""
        return CONVERSATION_SCOPE if self.conversation_id is not None else USER_SCOPE

    def body(self) -> dict[str, Any]:
        """The request as the HTTP body sends it: set fields only, without this process's choices."""
        return self.model_dump(mode="json", exclude_defaults=True, exclude_none=True, exclude={"llm", "question_id"})


def as_request(request: QueryRequest | str | None, question: str | None = None,
               question_date: datetime | date | str | None = None, budget_tokens: int | None = None,
               **options: Any) -> QueryRequest:
    """``request`` itself, or the request the keyword form of ``search`` / ``query`` describes:
    ``(conversation_id, question, question_date, budget_tokens, user_id=, llm=, question_id=,
    recent_turns=, explain=)`` — the library's call since before the request was one object."""
    if isinstance(request, QueryRequest):
        given = [k for k, v in {"question": question, "question_date": question_date, "budget_tokens": budget_tokens,
                                **options}.items() if v not in (None, False)]
        if given:
            raise TypeError(f"a QueryRequest comes alone; {', '.join(given)} belong in it")
        return request
    if question is None:
        raise TypeError("a query needs a QueryRequest, or a conversation id (or None with user_id=) and a question")
    fields = {"conversation_id": request, "question": question, "question_date": question_date,
              "budget_tokens": budget_tokens, **options}
    return QueryRequest.model_validate({k: v for k, v in fields.items() if v is not None})


__all__ = ["QueryRequest", "RecentTurn", "as_request"]
