"""What a query returns: the selected evidence, token usage, and the search / query results.

These are the query API's (and the HTTP service's) output models; :class:`QueryResult` is a
:class:`SearchResult` plus the answer.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator

from lychee_ray.core.currency import Status
from lychee_ray.names import BY_SCORE, GENERATED_ANSWER, AnswerKind, EvidenceOrder
from lychee_ray.core.records import TimeSpan
from lychee_ray.query.evidence import Evidence
from lychee_ray.query.explain import SearchExplain
from lychee_ray.query.plan import QueryPlan
from lychee_ray.query.rerank import RerankReport


class PassagePosition(BaseModel):
    """Where a passage lies in its turn (docs/data-format.md, "Long turns")."""

    model_config = ConfigDict(extra="forbid")

    index: int = Field(description="the passage's position in its turn, from 1")
    count: int = Field(description="passages the turn has")
    char_start: int = Field(description="first character of the passage in the turn's text")
    char_end: int = Field(description="character after its last one")


class EvidenceItem(BaseModel):
    """One piece of selected context, as returned to callers."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="record id, the centre turn id of a raw-turn window, or a passage id (turn id + '#p' + index)")
    kind: str = Field(description="record | turns | passage")
    conversation_id: str
    text: str
    type: str = Field(description="record type, 'turns' or 'passage'")
    time: TimeSpan | None = None
    session_date: str | None = None
    source_turn_ids: list[str] = Field(description="a record's source turns; a window's turns; a passage's turn")
    score: float = Field(description="relevance in [0, 1] (fused or reranked), as used by selection")
    channels: list[str]
    routes: list[int]
    tokens: int
    # (left out of the JSON when None: a record or a window serialises as before passages)
    passage: PassagePosition | None = Field(default=None, description="a passage: where it lies in its turn",
                                            exclude_if=lambda v: v is None)
    status: Status = Field("current", description="current | superseded (a newer record replaced what it shows) | "
                                                  "conflicting (another current record contradicts it) | history (a "
                                                  "replaced value shown because the question asks for history)")
    valid_until: str | None = Field(None, description="when what it shows stopped holding (ISO), if it did")
    superseded_by: list[str] = Field(default_factory=list, description="ids of the records that replaced it")

    @classmethod
    def from_evidence(cls, e: Evidence) -> EvidenceItem:
        pos = None if e.passage is None else PassagePosition(index=e.passage[0], count=e.passage[1],
                                                              char_start=e.passage[2], char_end=e.passage[3])
        return cls(
            id=e.id, kind=e.kind, conversation_id=e.conversation_id, text=e.text, type=e.type, time=e.time,
            session_date=e.session_date, source_turn_ids=e.turn_ids, score=round(e.score, 6), channels=e.channels,
            routes=e.routes, tokens=e.tokens, passage=pos, status=e.status, valid_until=e.valid_until,  # type: ignore[arg-type]
            superseded_by=list(e.superseded_by),
        )


ANSWER_KIND_DOC = ("generated: written by the LLM from the evidence; extractive: the rules backend's quote of the "
                   "evidence sentence that answers (no model)")


class QueryUsage(BaseModel):
    """Token accounting of one query (DESIGN §2: query tokens per question, split by stage)."""

    backend: str
    plan_prompt_tokens: int = 0
    plan_completion_tokens: int = 0
    answer_prompt_tokens: int = 0
    answer_completion_tokens: int = 0
    # plan prompt + answer prompt with the selected evidence (offline count for rules, so comparable)
    query_prompt_tokens: int = 0
    context_tokens: int = 0
    llm_calls: int = 0
    estimated: bool = True


class SearchResult(BaseModel):
    """Everything up to (not including) the answer.

    ``evidence`` is listed by score, highest first — the order every reader of a result shows (the
    service's JSON, ``lychee-ray query`` as text and as JSON, the inspector) — while ``context`` shows
    the same evidence by date, as the answer prompt reads it. The result puts its evidence (and the
    explain figures that go with it) in that order itself, so no producer can list it otherwise.
    """

    question_id: str
    question: str
    question_date: str | None
    conversation_ids: list[str]
    plan: QueryPlan
    evidence: list[EvidenceItem] = Field(description="the selected evidence by score, highest first (equal scores "
                                                     "in the context's order); each item keeps its session_date")
    evidence_order: EvidenceOrder = Field(default=BY_SCORE, description="how `evidence` is listed: by score, "
                                                                          "highest first; `context` lists the same "
                                                                          "evidence by date")
    context: str = Field(description="the serialised evidence exactly as the answer prompt shows it (by date)")
    budget_tokens: int
    pool_size: int
    usage: QueryUsage
    # "timings" in the service's JSON (serialised by_alias)
    timings_ms: dict[str, float] = Field(serialization_alias="timings")
    rerank: RerankReport
    # only when asked for (``explain``): channel ranks, fused scores, what the budget dropped; a result
    # without it serialises as before (result_json leaves the field out)
    explain: SearchExplain | None = None

    @model_validator(mode="after")
    def _evidence_by_score(self) -> SearchResult:
        """``evidence`` (and ``explain.evidence``, which follows it item by item) by score, highest first;
        stable, so equal scores keep the order they came in (the selection's, by date)."""
        order = sorted(range(len(self.evidence)), key=lambda i: -self.evidence[i].score)
        if order != list(range(len(order))):
            self.evidence = [self.evidence[i] for i in order]
            if self.explain is not None and len(self.explain.evidence) == len(order):
                self.explain.evidence = [self.explain.evidence[i] for i in order]
        return self


class QueryResult(SearchResult):
    answer: str
    answer_kind: AnswerKind = Field(default=GENERATED_ANSWER, description=ANSWER_KIND_DOC)
    answer_error: str | None = None
    answer_error_kind: str | None = None  # LLMCallFailed.kind when the answer call failed


# Fields of a query result that are not part of its JSON: a failed answer call is reported as an
# error (HTTP 502/503, a line on the CLI's stderr), not as a field.
INTERNAL_FIELDS = frozenset({"answer_error", "answer_error_kind"})


def result_json(res: SearchResult | QueryResult, indent: int | None = None) -> bytes:
    """The one JSON form of a search/query result, written by the HTTP service and ``lychee-ray
    query --json`` alike: ``timings_ms`` as ``timings`` (its serialization alias), the internal
    fields left out. pydantic-core writes it directly (far less CPU than ``model_dump`` +
    ``json.dumps``); non-ASCII text stays as is."""
    exclude = set(INTERNAL_FIELDS) | ({"explain"} if res.explain is None else set())
    return res.model_dump_json(by_alias=True, exclude=exclude, indent=indent).encode("utf-8")


__all__ = ["INTERNAL_FIELDS", "EvidenceItem", "PassagePosition", "QueryResult", "QueryUsage", "SearchResult", "result_json"]
