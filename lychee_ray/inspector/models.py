"""The inspector's JSON: what each page's endpoint answers (the pages' scripts read these fields).

Record rows, other tables' rows and eval rows travel as plain column → value mappings: the pages
render whatever columns a store or a run has (a record's status and replacement once stores carry
them, a new table's rows), so a new column or table needs nothing here.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

from lychee_ray.core.kinds import ConversationKind  # the shape of a conversation's turns (core/kinds.py)
from lychee_ray.core.status import CURRENT_STATUS, Status
from lychee_ray.query.history import HistoryEntry

ConversationStatus = Literal["built", "failed"]
# An eval question's result: every gold turn in the selected context, some, none, or no gold turns.
EvalOutcome = Literal["hit", "partial", "miss", "n/a"]


class StoreSummary(BaseModel):
    """The store as a whole: its build, counts in the request's scope, what the pages can offer."""

    root: str
    conversations: int = Field(description="conversations the request may see")
    failed_builds: int = Field(description="conversations that failed to build (admins only)")
    users: int
    written_at: str | None
    backend: str | None
    models: dict[str, Any]
    counts: dict[str, Any]
    quality: dict[str, Any] | None
    tokens: dict[str, Any]
    last_run: dict[str, Any] | None
    auth: bool = Field(description="requests need a bearer key")
    admin: bool = Field(description="the request's key is an admin's (eval runs, the store report)")
    eval_runs: list[str]
    page_size: int
    kinds: list[str]


class ConversationRow(BaseModel):
    """One conversation in the list (from its commit marker; ``kind`` once its turns were read)."""

    conversation_id: str
    user_id: str | None
    status: ConversationStatus
    turns: int
    segments: int
    records: int
    failed_segments: int
    degenerate_segments: int
    committed_at: str | None
    kind: ConversationKind | None = None
    error: str | None = Field(default=None, description="why it failed to build")


class ConversationList(BaseModel):
    """A page of the list, with the filters it applied."""

    rows: list[ConversationRow]
    total: int
    offset: int
    limit: int
    next_offset: int | None
    filters: dict[str, str | None]
    users: list[str] = Field(description="users in scope (for the filter), first ones by id")
    server_ms: float


class PassageView(BaseModel):
    """One passage of a long turn (core/passages.py): where it lies in the turn's text, and in its
    content as the transcript shows it."""

    passage_id: str
    index: int = Field(description="position in its turn, from 1")
    count: int = Field(description="passages its turn has")
    char_start: int = Field(description="span in the turn's text (content with tool calls rendered)")
    char_end: int
    tokens: int
    content_start: int | None = Field(description="the span in the turn's content; None when it lies in "
                                                  "the rendered tool calls only")
    content_end: int | None


class TurnView(BaseModel):
    """One stored turn, with its tool calls parsed and a long turn's passages."""

    turn_id: str
    position: int
    session_id: str
    role: str
    speaker: str
    content: str
    timestamp: str | None
    segment: int = Field(description="index into the conversation's segments (-1: in no segment yet)")
    tool_calls: list[dict[str, Any]] = Field(default_factory=list, description="[{call_id, name, arguments}]")
    tool_call_id: str | None = None
    tool_name: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)
    passages: list[PassageView] = Field(default_factory=list, description="a long turn's passages, in order")


class SessionView(BaseModel):
    session_id: str
    started_at: str | None
    first_turn: int
    turns: int


class SegmentView(BaseModel):
    """A segment on the timeline: its turns, why it was cut, what its encoding made."""

    segment_id: str
    index: int
    first_turn: int
    turns: int
    turn_ids: list[str]
    close_reason: str
    status: str
    num_records: int
    num_tokens: int
    error: str | None = None
    error_kind: str | None = None
    quality: dict[str, int] = Field(default_factory=dict)


class SystemPrompt(BaseModel):
    """The conversation's system prompt, shown once (its repeats in later sessions listed by id)."""

    turn_id: str
    content: str
    repeats: list[str] = Field(default_factory=list)


class TableView(BaseModel):
    """Rows of a table the pages have no view of their own for (rendered by column)."""

    name: str
    columns: list[str]
    rows: list[dict[str, Any]]


class RecordCurrency(BaseModel):
    """A record's status as the query path derives it (query/currency.py) within its conversation."""

    status: Status = CURRENT_STATUS
    superseded_by: list[str] = Field(default_factory=list, description="records that replaced it")
    valid_until: str | None = Field(None, description="when a newer record replaced it (ISO), if one did")
    conflicts_with: list[str] = Field(default_factory=list, description="records it conflicts with (either side wrote the link)")
    latest: list[str] = Field(default_factory=list, description="the current records at the end of its chain")


class SlotChain(BaseModel):
    """Every value the conversation recorded for one slot, oldest first (query/history.py)."""

    slot: str
    entries: list[HistoryEntry]


class ConversationDetail(BaseModel):
    """One conversation: sessions, segments, turns, records (every column), other tables, tokens."""

    conversation_id: str
    user_id: str
    committed_at: str | None
    backend: str | None
    model: str | None
    embedder: str | None
    kind: ConversationKind
    counts: dict[str, int]
    quality: dict[str, Any] | None
    sessions: list[SessionView]
    segments: list[SegmentView]
    turns: list[TurnView]
    system_prompt: SystemPrompt | None
    records: list[dict[str, Any]]
    record_columns: list[str]
    currency: dict[str, RecordCurrency] = Field(
        default_factory=dict, description="record id -> its derived status (records absent: current)")
    slots: list[SlotChain] = Field(default_factory=list, description="slot chains, by their first value's time")
    tables: list[TableView]
    usage: dict[str, dict[str, float]] = Field(description="tokens by stage: prompt, completion, calls")
    server_ms: float


class SearchPage(BaseModel):
    """A playground search: the result (with its explanation), and the same request as JSON and curl."""

    result: dict[str, Any]
    request: dict[str, Any]
    curl: str


class EvalRunInfo(BaseModel):
    """One eval run as the reports page lists it."""

    name: str
    kind: Literal["eval", "eval-retrieval"]
    path: str
    questions: int
    systems: list[str]
    categories: list[str]
    summary: dict[str, Any]
    has_questions: bool = Field(description="per-question rows are available")


class EvalQuestion(BaseModel):
    """One question of one system in an eval run: gold vs selected, hit or miss."""

    question_id: str
    conversation_id: str
    category: str
    system: str
    question: str
    gold_turns: list[str]
    covered: list[str]
    selected_turns: list[str]
    outcome: EvalOutcome
    recall: float | None
    answer: str | None = None
    gold_answer: str | None = None
    extra: dict[str, Any] = Field(default_factory=dict)


class EvalQuestionPage(BaseModel):
    rows: list[EvalQuestion]
    total: int
    offset: int
    limit: int
    counts: dict[str, int] = Field(description="outcome -> questions, under the filters")
    budget_tokens: int | None


class Histogram(BaseModel):
    """Counts by value (a plot's bars)."""

    label: str
    bins: list[str]
    counts: list[int]


class StoreReport(BaseModel):
    """The build report: quality figures, the token ledger and the plots' data."""

    quality: dict[str, Any] | None
    tokens: dict[str, Any]
    last_run: dict[str, Any] | None
    conversations_read: int
    conversations_total: int
    plots: list[Histogram]


__all__ = [
    "ConversationDetail", "ConversationKind", "ConversationList", "ConversationRow", "ConversationStatus", "EvalOutcome", "EvalQuestion",
    "EvalQuestionPage", "EvalRunInfo", "Histogram", "PassageView", "RecordCurrency", "SearchPage", "SegmentView",
    "SessionView", "SlotChain", "StoreReport", "StoreSummary", "SystemPrompt", "TableView", "TurnView",
]
