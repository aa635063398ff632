"""Memory records, evidence nodes and segment/error rows, with their Arrow schemas.

Ids are deterministic: the same input and the same LLM output give the same ids, so a re-run
overwrites rather than duplicates, and ids are unique per conversation.
"""

from __future__ import annotations

import functools
import hashlib
import types
from typing import Annotated, Any, Literal, Union, get_args, get_origin

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator
from lychee_ray.core.statements import ValueStatement

RecordType = Literal["fact", "preference", "event", "constraint", "procedure", "failure_pattern", "tool_affordance"]
RECORD_TYPES: tuple[RecordType, ...] = get_args(RecordType)
# What an artifact record describes: one code block, table or drafted document (a letter, e-mail, will)
# produced in the conversation. Artifacts keep one of the seven types (``event``: produced on a date);
# the kind is a field so that the type set, and every planner route and stored store, stay as they are.
ArtifactKind = Literal["code", "table", "document"]
ARTIFACT_KINDS: tuple[ArtifactKind, ...] = get_args(ArtifactKind)
NODE_KINDS = ("entity", "topic", "entity_topic", "time", "event_frame")
NodeKind = Literal["entity", "topic", "entity_topic", "time", "event_frame"]
TimeGranularity = Literal["datetime", "day", "week", "month", "year", "range"]
# ok: encoded; salvaged: the encode reply was cut at the token limit and its complete records were
# kept (the rest of the reply is lost; error_kind says why); failed: no records, turns kept (--retry-failed).
SegmentStatus = Literal["ok", "salvaged", "failed"]
# Statuses of a segment whose records are stored: a later build or increment reuses it as it is.
STORED_SEGMENT_STATUSES: frozenset[str] = frozenset({"ok", "salvaged"})

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


@functools.cache  # per model class: asked once per row
def _nested_fields(model: type[BaseModel]) -> tuple[tuple[str, type[BaseModel], tuple[tuple[str, str], ...]], ...]:
    """``model``'s fields that are models themselves, stored flattened: (field, its model,
    ((its field, column ``<field>_<its field>``), ...))."""
    return tuple((n, f.annotation, tuple((k, f"{n}_{k}") for k in f.annotation.model_fields))
                 for n, f in model.model_fields.items()
                 if isinstance(f.annotation, type) and issubclass(f.annotation, BaseModel))


@functools.cache
def _default_on_null(model: type[BaseModel]) -> tuple[str, ...]:
    """Fields with a default that do not take None (``list[str] = []``): a null column means "not
    stored" (a part written before the field) and reads as the default. A field that takes None
    (``str | None = None``) reads a null as None, which is its default."""
    def takes_none(ann: Any) -> bool:
        return ann is None or ann is type(None) or any(takes_none(a) for a in get_args(ann) if get_origin(ann) in (Union, types.UnionType))
    return tuple(n for n, f in model.model_fields.items() if not f.is_required() and not takes_none(f.annotation))


class _NotNull:
    """``Annotated`` marker: the field's Arrow column is non-nullable (see :func:`arrow_schema`)."""

    def __repr__(self) -> str:
        return "NOT_NULL"


NOT_NULL = _NotNull()


class MemoryRecord(BaseModel):
    """One self-contained memory: a standalone sentence with typed metadata.

    Its fields are the store's record columns (:data:`RECORD_SCHEMA` is derived from them): a new
    field is a new column. Give it a default (stores written before it read it back as null) and
    mark it ``Annotated[..., NOT_NULL]`` only if it can never be missing."""

    model_config = ConfigDict(extra="forbid")

    record_id: Annotated[str, NOT_NULL]
    conversation_id: Annotated[str, NOT_NULL]
    user_id: Annotated[str, NOT_NULL]
    session_id: Annotated[str, NOT_NULL]
    segment_id: Annotated[str, NOT_NULL]
    ordinal: Annotated[int, NOT_NULL] = Field(description="Position of the record within its segment's output.")
    type: Annotated[RecordType, NOT_NULL]
    text: Annotated[str, NOT_NULL]
    entities: list[str] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=list)
    time: TimeSpan = Field(default_factory=lambda: TimeSpan())  # (a lambda: the class itself fits both factory overloads)
    source_turn_ids: list[str] = Field(default_factory=list)
    created_at: str | None = Field(default=None, description="Session time of the source turns (ISO).")
    backend: str
    model: str
    artifact: ArtifactKind | None = Field(default=None, description="The code block, table or document the record describes, if any.")
    # Memory that stays current (core/currency.py, docs/current-memory.md): what the record states a
    # value of, which value, since when, and the earlier records it replaces or contradicts. The links
    # live on the newer record, so a write never touches stored rows; readers derive each record's
    # status (current / superseded / conflicting), superseded_by and valid_until from them.
    slot: str | None = Field(default=None, description="'subject · attribute', normalised (core/currency.py slot_key).")
    slot_value: str | None = Field(default=None, description="The value it states, normalised: a change vs a restatement.")
    valid_from: str | None = Field(default=None, description="When the value became true (ISO day of the change).")
    supersedes: list[str] = Field(default_factory=list, description="Ids of earlier records of its slot it replaces.")
    conflicts_with: list[str] = Field(default_factory=list, description="Ids of earlier records of its slot it contradicts.")
    # The values the record states, each with its slot and links (core/statements.py).
    statements: list[ValueStatement] = Field(default_factory=list, description="Statements of value (core/statements.py).")

    @staticmethod
    def make_id(conversation_id: str, seg_id: str, ordinal: int, rtype: str, text: str) -> str:
        return stable_id("r", conversation_id, seg_id, ordinal, rtype, text)

    def to_row(self) -> dict[str, Any]:
        """One :data:`RECORD_SCHEMA` row: nested models (``time``) flattened to ``time_<field>``."""
        d = self.model_dump()
        for name, _, cols in _nested_fields(type(self)):
            sub = d.pop(name)
            for k, c in cols:
                d[c] = sub[k]
        return d

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> MemoryRecord:
        """The record of a :data:`RECORD_SCHEMA` row (:meth:`to_row`'s inverse)."""
        r = dict(row)
        for name, sub, cols in _nested_fields(cls):
            r[name] = sub(**{k: r.pop(c, None) for k, c in cols})
        for name in _default_on_null(cls):  # (a column a store written before the field lacks reads as null)
            if name in r and r[name] is None:
                del r[name]
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
    # ``degenerate_output`` (lychee_ray.core.quality) when the memory checks rejected the reply; for a
    # salvaged segment the kind of the cut reply (``truncated``), with ``error`` saying what was kept.
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


# Python type of a model field -> its Arrow column type (Literal[...] of strings is a string column).
_ARROW_TYPES: dict[Any, pa.DataType] = {str: pa.string(), int: pa.int32(), float: pa.float64(), bool: pa.bool_()}


def _arrow_type(annotation: Any, where: str) -> pa.DataType:
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = [a for a in get_args(annotation) if a is not type(None)]
        if len(args) == 1:
            return _arrow_type(args[0], where)
    elif origin is Annotated:
        return _arrow_type(get_args(annotation)[0], where)
    elif origin is Literal and all(isinstance(v, str) for v in get_args(annotation)):
        return pa.string()
    elif origin is list:
        return pa.list_(_arrow_type(get_args(annotation)[0], where))
    elif isinstance(annotation, type) and issubclass(annotation, BaseModel):  # a list of models: structs
        return pa.struct(list(arrow_schema(annotation)))
    elif annotation in _ARROW_TYPES:
        return _ARROW_TYPES[annotation]
    raise TypeError(f"{where}: no Arrow column type for {annotation!r}")


def arrow_schema(model: type[BaseModel]) -> pa.Schema:
    """The Arrow schema of ``model``'s rows, in field order: a nested model field ``time`` becomes
    columns ``time_<its field>`` (as :meth:`MemoryRecord.to_row` flattens it); a column is
    non-nullable when its field is ``Annotated[..., NOT_NULL]``."""
    fields: list[pa.Field] = []
    for name, info in model.model_fields.items():
        ann = info.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):  # as _nested_fields: flattened
            fields.extend(pa.field(f"{name}_{f.name}", f.type, f.nullable) for f in arrow_schema(ann))
            continue
        not_null = any(m is NOT_NULL for m in info.metadata)
        fields.append(pa.field(name, _arrow_type(ann, f"{model.__name__}.{name}"), nullable=not not_null))
    return pa.schema(fields)


# The store's record columns: one per MemoryRecord field (its TimeSpan as time_start ... time_expression).
RECORD_SCHEMA = arrow_schema(MemoryRecord)

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
    # column by column: a long conversation has tens of thousands of nodes, and a dict per row
    # costs Arrow several times the CPU (a node's row is its fields as they are, see ``to_row``)
    return pa.table({f: [getattr(n, f) for n in nodes] for f in NODE_SCHEMA.names}, schema=NODE_SCHEMA)


def segments_table(rows: list[SegmentRow]) -> pa.Table:
    return pa.Table.from_pylist([r.to_row() for r in rows], schema=SEGMENT_SCHEMA)
