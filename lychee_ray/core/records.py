"""Memory records, evidence nodes and segment/error rows, with their Arrow schemas.

Ids are deterministic: the same input and the same LLM output give the same ids, so a re-run
overwrites rather than duplicates, and ids are unique per conversation.
"""

from __future__ import annotations

import functools
import hashlib
from typing import Any, Literal, get_args

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator

RecordType = Literal["fact", "preference", "event", "constraint", "procedure", "failure_pattern", "tool_affordance"]
RECORD_TYPES: tuple[RecordType, ...] = get_args(RecordType)
NODE_KINDS = ("entity", "topic", "entity_topic", "time", "event_frame")
NodeKind = Literal["entity", "topic", "entity_topic", "time", "event_frame"]
TimeGranularity = Literal["datetime", "day", "week", "month", "year", "range"]
SegmentStatus = Literal["ok", "failed"]

# Types an LLM tends to invent, mapped onto the seven the method defines. Anything else is rejected
# (the draft is dropped and counted), so the type field stays a closed vocabulary for recall.
TYPE_ALIASES: dict[str, RecordType] = {
    "preferences": "preference",
    "like": "preference",
    "opinion": "preference",
    "plan": "event",
    "activity": "event",
    "experience": "event",
    "goal": "event",
    "rule": "constraint",
    "requirement": "constraint",
    "instruction": "procedure",
    "howto": "procedure",
    "how_to": "procedure",
    "failure": "failure_pattern",
    "error": "failure_pattern",
    "tool": "tool_affordance",
    "skill": "tool_affordance",
    "relationship": "fact",
    "attribute": "fact",
    "knowledge": "fact",
    "belief": "fact",
}


_RECORD_TYPE_NAMES: dict[str, RecordType] = {t: t for t in RECORD_TYPES}


def normalise_type(raw: str) -> RecordType | None:
    """Map a drafted type to one of :data:`RECORD_TYPES`, or None to reject it.

    Shared by the encoder (validating drafts) and the query planner (an LLM route's record types)."""
    t = raw.strip().lower().replace("-", "_").replace(" ", "_")
    return _RECORD_TYPE_NAMES.get(t) or TYPE_ALIASES.get(t)


def stable_id(prefix: str, *parts: Any, length: int = 20) -> str:
    """``prefix-<hex>`` from a SHA-256 of the parts; deterministic across processes and runs."""
    h = hashlib.sha256("\x1f".join(str(p) for p in parts).encode("utf-8")).hexdigest()
    return f"{prefix}-{h[:length]}"


@functools.lru_cache(maxsize=1 << 16)
def _node_id(conversation_id: str, kind: str, key: str) -> str:
    # memoised: every build of a conversation's nodes (each incremental one too) names the same
    # nodes again, thousands of hashes per call for a long conversation
    return stable_id("n", conversation_id, kind, key)


def segment_id(conversation_id: str, index: int) -> str:
    """Segments are numbered in order within a conversation."""
    return f"{conversation_id}#s{index:05d}"


class TimeSpan(BaseModel):
    """When a record's content happened (not when it was said): ISO dates, inclusive."""

    model_config = ConfigDict(extra="forbid")

    start: str | None = None
    end: str | None = None
    granularity: TimeGranularity | None = None
    expression: str | None = Field(default=None, description="The original wording, e.g. 'last Saturday'.")


class MemoryRecord(BaseModel):
    """One self-contained memory: a standalone sentence with typed metadata."""

    model_config = ConfigDict(extra="forbid")

    record_id: str
    conversation_id: str
    user_id: str
    session_id: str
    segment_id: str
    ordinal: int = Field(description="Position of the record within its segment's output.")
    type: RecordType
    text: str
    entities: list[str] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=list)
    time: TimeSpan = Field(default_factory=lambda: TimeSpan())  # (a lambda: the class itself fits both factory overloads)
    source_turn_ids: list[str] = Field(default_factory=list)
    created_at: str | None = Field(default=None, description="Session time of the source turns (ISO).")
    backend: str
    model: str

    @staticmethod
    def make_id(conversation_id: str, seg_id: str, ordinal: int, rtype: str, text: str) -> str:
        return stable_id("r", conversation_id, seg_id, ordinal, rtype, text)

    def to_row(self) -> dict[str, Any]:
        d = self.model_dump()
        t = d.pop("time")
        d.update(time_start=t["start"], time_end=t["end"], time_granularity=t["granularity"], time_expression=t["expression"])
        return d

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> MemoryRecord:
        r = dict(row)
        r["time"] = TimeSpan(
            start=r.pop("time_start"), end=r.pop("time_end"), granularity=r.pop("time_granularity"), expression=r.pop("time_expression")
        )
        return cls.model_validate(r)


class EvidenceNode(BaseModel):
    """A structural index entry (entity, topic, entity×topic, time, event frame) → record ids."""

    model_config = ConfigDict(extra="forbid")

    node_id: str
    conversation_id: str
    user_id: str
    kind: NodeKind
    key: str = Field(description="Normalised key used for exact matches.")
    text: str = Field(description="Display text; this is what gets embedded.")
    record_ids: list[str]

    @staticmethod
    def make_id(conversation_id: str, kind: str, key: str) -> str:
        return _node_id(conversation_id, kind, key)

    def to_row(self) -> dict[str, Any]:
        return self.model_dump()


class SegmentRow(BaseModel):
    """Outcome of one segment's encode call; failed segments keep their error for --retry-failed."""

    model_config = ConfigDict(extra="forbid")

    conversation_id: str
    segment_id: str
    index: int
    session_ids: list[str]
    turn_ids: list[str]
    num_tokens: int
    close_reason: str
    status: SegmentStatus
    error: str | None = None
    # Machine-readable failure kind: an LLM call failure kind (lychee_ray.llm.errors) or
    # ``degenerate_output`` (lychee_ray.core.quality) when the memory checks rejected the reply.
    error_kind: str | None = None
    attempts: int = 0
    num_records: int = 0
    resolution_state: str = ""
    backend: str
    model: str
    # What happened to the segment's drafted records (QualityCounts.to_flat()).
    quality: dict[str, int] = Field(default_factory=dict)

    @field_validator("quality", mode="before")
    @classmethod
    def _quality_from_arrow(cls, v: Any) -> Any:
        # Arrow map columns read back as lists of (key, value) pairs.
        return dict(v) if isinstance(v, list) else (v or {})

    def to_row(self) -> dict[str, Any]:
        row = self.model_dump()
        row["quality"] = list(self.quality.items())
        return row


RECORD_SCHEMA = pa.schema(
    [
        pa.field("record_id", pa.string(), nullable=False),
        pa.field("conversation_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("segment_id", pa.string(), nullable=False),
        pa.field("ordinal", pa.int32(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("entities", pa.list_(pa.string())),
        pa.field("topics", pa.list_(pa.string())),
        pa.field("time_start", pa.string()),
        pa.field("time_end", pa.string()),
        pa.field("time_granularity", pa.string()),
        pa.field("time_expression", pa.string()),
        pa.field("source_turn_ids", pa.list_(pa.string())),
        pa.field("created_at", pa.string()),
        pa.field("backend", pa.string()),
        pa.field("model", pa.string()),
    ]
)

NODE_SCHEMA = pa.schema(
    [
        pa.field("node_id", pa.string(), nullable=False),
        pa.field("conversation_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("kind", pa.string(), nullable=False),
        pa.field("key", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("record_ids", pa.list_(pa.string())),
    ]
)

SEGMENT_SCHEMA = pa.schema(
    [
        pa.field("conversation_id", pa.string(), nullable=False),
        pa.field("segment_id", pa.string(), nullable=False),
        pa.field("index", pa.int32(), nullable=False),
        pa.field("session_ids", pa.list_(pa.string())),
        pa.field("turn_ids", pa.list_(pa.string())),
        pa.field("num_tokens", pa.int32()),
        pa.field("close_reason", pa.string()),
        pa.field("status", pa.string(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("error_kind", pa.string()),
        pa.field("attempts", pa.int32()),
        pa.field("num_records", pa.int32()),
        pa.field("resolution_state", pa.string()),
        pa.field("backend", pa.string()),
        pa.field("model", pa.string()),
        pa.field("quality", pa.map_(pa.string(), pa.int32())),
    ]
)

ERROR_SCHEMA = pa.schema(
    [
        pa.field("conversation_id", pa.string()),
        pa.field("stage", pa.string(), nullable=False),
        pa.field("message", pa.string(), nullable=False),
        pa.field("file", pa.string()),
        pa.field("line", pa.int64()),
        pa.field("time", pa.string()),
    ]
)


def records_table(records: list[MemoryRecord]) -> pa.Table:
    return pa.Table.from_pylist([r.to_row() for r in records], schema=RECORD_SCHEMA)


def nodes_table(nodes: list[EvidenceNode]) -> pa.Table:
    return pa.Table.from_pylist([n.to_row() for n in nodes], schema=NODE_SCHEMA)


def segments_table(rows: list[SegmentRow]) -> pa.Table:
    return pa.Table.from_pylist([r.to_row() for r in rows], schema=SEGMENT_SCHEMA)
