"""Request and response bodies of the query service's HTTP API (the OpenAPI schema is built from them).

``SearchResponse``/``QueryResponse`` document what :func:`lychee_ray.query.results.result_json` writes
(the same JSON as ``lychee-ray query --json``): the query engine's
:class:`~lychee_ray.query.results.SearchResult`/``QueryResult`` serialised by alias.
"""

from __future__ import annotations

from datetime import timezone
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator
from pydantic.json_schema import SkipJsonSchema

from lychee_ray.ingest.increment.models import AppendResult, AppendTurn  # the append endpoints' bodies (re-exported)
from lychee_ray.core.ids import MAX_ID_CHARS, PolicyId
from lychee_ray.io.store.erase import EraseReport  # the DELETE endpoints' body (re-exported here)
from lychee_ray.ingest.forget import ForgetReport  # POST /v1/users/{id}/forget's body (re-exported here)
from lychee_ray.query.explain import SearchExplain
from lychee_ray.query import request as query_request
from lychee_ray.query.results import ANSWER_KIND_DOC, EvidenceItem, QueryUsage
from lychee_ray.query.plan import QueryPlan
from lychee_ray.query.plan.model import RecentTurn  # recent_turns items (re-exported)
from lychee_ray.query.rerank import RerankReport
from lychee_ray.names import BY_SCORE, GENERATED_ANSWER, AnswerKind, EvidenceOrder, LLMBackend
from lychee_ray.text.dates import as_datetime

# The body of POST /v1/search and /v1/query: the query request with the service's limits (ids by the
# id policy, an ISO question date, at most 64 recent turns) and without the backend and the question
# id, which the service decides.
class QueryRequest(query_request.QueryRequest):
    """One question, scoped to one conversation or to all conversations of one user."""

    conversation_id: PolicyId | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS,
                                             description="the conversation to read (needs no user_id)")
    user_id: PolicyId | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS,
                                     description="read all of this user's conversations; with conversation_id: that "
                                                 "conversation must be this user's")
    question: str = Field(min_length=1, description="the question (at most serve.max_question_chars characters)")
    question_date: str | None = Field(default=None, max_length=64,
                                      description="ISO date/datetime anchoring relative times ('last week'); default now")
    recent_turns: list[RecentTurn] = Field(
        default_factory=list, max_length=64,
        description="the asking agent's last turns, oldest first (what 'it' or 'that order' refers to); shown to the "
                    "planner up to query.planner.recent_turns_tokens, newest kept")
    llm: SkipJsonSchema[None] = Field(default=None, exclude=True)  # the service's configuration decides
    question_id: SkipJsonSchema[None] = Field(default=None, exclude=True)

    @field_validator("question_date")
    @classmethod
    def _iso_date(cls, v: str | None) -> str | None:
        if v is None or not v.strip():
            return None
        d = as_datetime(v)  # ValueError with the reason -> 422
        if d is not None and d.tzinfo is not None:
            d = d.astimezone(timezone.utc).replace(tzinfo=None)
        return d.isoformat() if d is not None else None

    def with_backend(self, llm: LLMBackend | None) -> query_request.QueryRequest:
        """The engine's request: these fields, planned and answered by ``llm`` (None: the configured one)."""
        return query_request.QueryRequest.model_validate({**self.model_dump(), "llm": llm})


class AppendBody(BaseModel):
    """``POST /v1/conversations/{id}/turns``: turns to add, in conversation order (docs/serving.md)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"user_id": "u-1", "turns": [
            {"turn_id": "t-101", "role": "user", "speaker": "Ana", "content": "We adopted a cat named Pixel.",
             "timestamp": "2024-05-02T18:03:00", "session_id": "2024-05-02"}]}]})

    turns: list[AppendTurn] = Field(min_length=1, description="turns with their own ids (the idempotency key); "
                                                              "a session_id not stored yet opens a new session")
    user_id: PolicyId | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS,
                                     description="must equal the conversation's owner; required to create it")
    flush: bool = Field(default=False, description="also encode the open tail segment after these turns")


class ForgetBody(BaseModel):
    """``POST /v1/users/{user_id}/forget``: which of the user's records to forget — exactly one of
    ``record_id``, ``slot``, ``entity``, ``expired`` (docs/erasure.md, "Forgetting")."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"examples": [
        {"slot": "user · shipping address"}, {"record_id": "r-3f2a", "redact_turns": True}]})

    record_id: str | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS, description="one record")
    slot: str | None = Field(default=None, min_length=1, description="every record of this slot ('subject · attribute')")
    entity: str | None = Field(default=None, min_length=1, description="every record naming this entity (its "
                                                                       "entities, its slot's subject, or its text)")
    expired: bool = Field(default=False, description="the records past store.retention_days for their type")
    conversation_id: PolicyId | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS,
                                             description="only in this conversation (it must be the user's)")
    redact_turns: bool = Field(default=False, description="also replace the forgotten records' source turns' text")


class FlushBody(BaseModel):
    """``POST /v1/conversations/{id}/flush`` (the body is optional)."""

    model_config = ConfigDict(extra="forbid")

    user_id: PolicyId | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS,
                                     description="must equal the conversation's owner")


class SearchResponse(BaseModel):
    """Selected evidence for a question (everything but the answer)."""

    question_id: str
    question: str
    question_date: str | None
    conversation_ids: list[str] = Field(description="the conversations the query was scoped to")
    evidence: list[EvidenceItem] = Field(description="selected records / raw-turn windows, with ids, text, type, "
                                                     "time, source turn ids and score; by score, highest first")
    evidence_order: EvidenceOrder = Field(default=BY_SCORE, description="how `evidence` is listed: by score, "
                                                                          "highest first (`context` lists the same "
                                                                          "evidence by date)")
    plan: QueryPlan
    usage: QueryUsage
    timings: dict[str, float] = Field(description="milliseconds per stage; 'queue' = wait for a worker, "
                                                  "'server' = whole request in the service")
    context: str = Field(description="the evidence serialised exactly as the answer prompt shows it (by date)")
    budget_tokens: int
    pool_size: int
    rerank: RerankReport
    explain: SearchExplain | None = Field(default=None, description="only when the request set explain: true")


class QueryResponse(SearchResponse):
    """Selected evidence and the answer written (or, with the rules backend, quoted) from it."""

    answer: str
    answer_kind: AnswerKind = Field(default=GENERATED_ANSWER, description=ANSWER_KIND_DOC)


class ConversationInfo(BaseModel):
    """One conversation as committed in the store: counts, sessions, date range, build models."""

    conversation_id: str
    user_id: str
    committed_at: str | None
    sessions: int
    turns: int
    records: int
    segments: int
    failed_segments: int
    failed_segment_ids: list[str] = Field(description="segments whose encoding failed (raw turns stay searchable)")
    nodes: int
    speakers: list[str]
    date_from: str | None = Field(description="first session start")
    date_to: str | None = Field(description="last session start")
    backend: str | None = None
    model: str | None = None
    embedder: str | None = None
    cached: bool = Field(description="loaded in this replica's cache right now")
    encode_pending_turns: int = Field(default=0, description="turns stored (searchable as raw turns) whose segmentation "
                                                     "and encoding are queued")
    quality: dict[str, Any] | None = Field(default=None, description="memory checks of the build: drafted records, records "
                                           "per segment, rejected by reason, repairs, segments repaired / failed as "
                                           "degenerate (docs/llm-quality.md)")


class ConversationSummary(BaseModel):
    """One conversation in a listing, from its commit marker (no table is read for it)."""

    conversation_id: str
    user_id: str
    sessions: int | None = Field(description="sessions among its turns (null when the marker does not say and "
                                             "its turns could not be read)")
    turns: int
    records: int
    segments: int
    failed_segments: int = Field(description="segments whose encoding failed (raw turns stay searchable)")
    committed_at: str | None = Field(description="when its build was committed (ISO 8601, UTC)")
    key: str | None = Field(default=None, description="its commit marker: commits/<key>.json")


class ConversationPage(BaseModel):
    """A page of the conversations a request may read, ordered by id."""

    conversations: list[ConversationSummary]
    total: int = Field(description="conversations in scope, all pages together")
    offset: int
    limit: int
    next_offset: int | None = Field(description="the offset of the next page; null on the last page")


class Health(BaseModel):
    """Liveness of one replica."""

    status: str
    version: str
    conversations: int


class ReloadResult(BaseModel):
    """What a re-read of the store's commit markers changed in this replica."""

    conversations: int
    added: int
    removed: int
    evicted: int
    seconds: float


class ErrorBody(BaseModel):
    """Every error response: a message for people and a stable code for programs."""

    detail: str
    error: str
    turn_id: str | None = Field(default=None, description="history_conflict: the stored turn the append contradicts")


__all__ = [
    "AppendBody", "AppendResult", "AppendTurn", "FlushBody", "ConversationInfo", "ConversationPage",
    "ConversationSummary", "EraseReport", "ErrorBody", "ForgetBody", "ForgetReport", "Health", "QueryRequest",
    "QueryResponse", "ReloadResult", "SearchResponse",
]
