"""Canonical conversation data model (DESIGN §3) and its Arrow schemas.

A conversation is a list of sessions, each a list of turns. A turn is identified by
(conversation_id, session_id, turn index within the session); the dataset's own ``turn_id``
(e.g. LoCoMo's ``dia_id``) is preserved so that gold evidence can be checked.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any
from collections.abc import Iterator

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lychee_ray.core.tools import TOOL_META_KEY, ToolCall, ToolInfo, render_turn_text, split_tool_meta, tool_meta

USER_ROLE = "user"
ROLES = (USER_ROLE, "assistant", "system", "tool")


class Turn(BaseModel):
    """One utterance."""

    model_config = ConfigDict(extra="forbid")

    turn_id: str = Field(min_length=1, description="Original id from the source (kept for evidence checks).")
    role: str = Field(default="user", description="user / assistant / system / tool.")
    speaker: str = Field(default="", description="Display name of whoever spoke; defaults to the role.")
    content: str
    timestamp: str | None = Field(default=None, description="ISO datetime of the turn, if the source has one.")
    meta: dict[str, Any] = Field(default_factory=dict, description="Source-specific extras (e.g. has_answer).")
    # (left out of dumps when empty: a plain turn serialises as it did before agent logs)
    tool_calls: list[ToolCall] = Field(default_factory=list, description="Calls an assistant turn makes (agent logs).",
                                       exclude_if=lambda v: not v)
    tool_call_id: str | None = Field(default=None, description="The call a tool turn answers.",
                                     exclude_if=lambda v: v is None)
    tool_name: str | None = Field(default=None, description="The tool whose result a tool turn is.",
                                  exclude_if=lambda v: v is None)

    @field_validator("role")
    @classmethod
    def _known_role(cls, v: str) -> str:
        if v not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {v!r}")
        return v

    @field_validator("timestamp")
    @classmethod
    def _iso_timestamp(cls, v: str | None) -> str | None:
        return None if v is None else _check_iso(v)

    @field_validator("meta")
    @classmethod
    def _free_meta(cls, v: dict[str, Any]) -> dict[str, Any]:
        if TOOL_META_KEY in v:
            raise ValueError(f"meta key {TOOL_META_KEY!r} is reserved (tool calls go in tool_calls / tool_call_id)")
        return v

    @model_validator(mode="after")
    def _default_speaker(self) -> Turn:
        if not self.speaker:
            self.speaker = self.role
        if self.tool_calls and self.role != "assistant":
            raise ValueError(f"tool_calls on a {self.role!r} turn (only assistant turns call tools)")
        if (self.tool_call_id is not None or self.tool_name is not None) and self.role != "tool":
            raise ValueError(f"tool_call_id / tool_name on a {self.role!r} turn (only tool turns answer calls)")
        return self

    @property
    def tool_info(self) -> ToolInfo | None:
        """The turn's tool fields (None for a plain turn)."""
        if not self.tool_calls and self.tool_call_id is None and self.tool_name is None:
            return None
        return ToolInfo(calls=self.tool_calls, call_id=self.tool_call_id, name=self.tool_name)

    @property
    def text(self) -> str:
        """What the turn shows to search, embedding, segmenting and encoding: its content with its
        tool calls rendered (:func:`~lychee_ray.core.tools.render_turn_text`)."""
        return render_turn_text(self.content, self.tool_info)

    def row_fields(self) -> dict[str, Any]:
        """The turn's own columns of :data:`TURN_SCHEMA` (tool fields inside ``meta``)."""
        meta = tool_meta(self.meta, self.tool_info)
        return {"turn_id": self.turn_id, "role": self.role, "speaker": self.speaker, "content": self.content,
                "timestamp": self.timestamp, "meta": json.dumps(meta, sort_keys=True) if meta else None}

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Turn:
        """A turns-table row (or :data:`TURN_STRUCT` value) as a turn: the inverse of :meth:`row_fields`."""
        meta = row.get("meta")
        decoded = json.loads(meta) if isinstance(meta, str) and meta else (meta or {})
        user_meta, info = split_tool_meta(decoded) if isinstance(decoded, dict) else (decoded, None)
        return cls(turn_id=row["turn_id"], role=row["role"], speaker=row["speaker"], content=row["content"],
                   timestamp=row.get("timestamp"), meta=user_meta,
                   tool_calls=info.calls if info else [], tool_call_id=info.call_id if info else None,
                   tool_name=info.name if info else None)


class Session(BaseModel):
    """A contiguous chat session with its start time."""

    model_config = ConfigDict(extra="forbid")

    session_id: str = Field(min_length=1)
    started_at: str | None = Field(default=None, description="ISO datetime the session started.")
    turns: list[Turn] = Field(default_factory=list)

    @field_validator("started_at")
    @classmethod
    def _iso_started(cls, v: str | None) -> str | None:
        return None if v is None else _check_iso(v)


class Conversation(BaseModel):
    """A whole multi-session conversation belonging to one user."""

    model_config = ConfigDict(extra="forbid")

    conversation_id: str = Field(min_length=1)
    user_id: str = Field(default="", description="Owner of the memory; defaults to the conversation id.")
    sessions: list[Session]
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _check(self) -> Conversation:
        if not self.user_id:
            self.user_id = self.conversation_id
        if not any(s.turns for s in self.sessions):
            raise ValueError("conversation has no turns")
        seen: set[str] = set()
        turn_ids: set[str] = set()
        for s in self.sessions:
            if s.session_id in seen:
                raise ValueError(f"duplicate session_id {s.session_id!r}")
            seen.add(s.session_id)
            for t in s.turns:
                # turn ids are the key that records, evidence and the turn index refer to
                if t.turn_id in turn_ids:
                    raise ValueError(f"duplicate turn_id {t.turn_id!r} in session {s.session_id!r}")
                turn_ids.add(t.turn_id)
        return self

    @property
    def num_turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)

    def iter_turns(self) -> Iterator[tuple[int, Session, int, Turn]]:
        """Yield (session_index, session, turn_index_in_session, turn) in order."""
        for si, s in enumerate(self.sessions):
            for ti, t in enumerate(s.turns):
                yield si, s, ti, t

    def iter_turns_from(self, start: int) -> Iterator[tuple[int, Session, int, Turn]]:
        """:meth:`iter_turns` from the ``start``-th turn on; earlier sessions are skipped whole, so
        the cost is the turns yielded (an append's few), not the conversation's."""
        before = 0
        for si, s in enumerate(self.sessions):
            n = len(s.turns)
            if before + n > start:
                for ti in range(max(0, start - before), n):
                    yield si, s, ti, s.turns[ti]
            before += n

    def turn_rows(self, start: int = 0) -> list[dict[str, Any]]:
        """Flatten to rows matching :data:`TURN_SCHEMA` (the turns from position ``start`` on)."""
        return [turn_row(self.conversation_id, self.user_id, s.session_id, si, ti, s.started_at, t)
                for si, s, ti, t in self.iter_turns_from(start)]


class QAItem(BaseModel):
    """A benchmark question kept beside the conversations (the QA side file)."""

    model_config = ConfigDict(extra="forbid")

    conversation_id: str
    question_id: str
    question: str
    answer: str
    category: str = Field(description="LoCoMo category number or LongMemEval question type.")
    evidence: list[str] = Field(default_factory=list, description="Gold evidence turn ids.")
    question_date: str | None = None
    answer_session_ids: list[str] = Field(default_factory=list)
    meta: dict[str, Any] = Field(default_factory=dict)


def turn_row(conversation_id: str, user_id: str, session_id: str, session_index: int, turn_index: int,
             session_started_at: str | None, turn: Turn) -> dict[str, Any]:
    """One :data:`TURN_SCHEMA` row: the one place a turn becomes a stored row (:meth:`Turn.from_row` reads it back)."""
    return {"conversation_id": conversation_id, "user_id": user_id, "session_id": session_id,
            "session_index": session_index, "turn_index": turn_index, **turn.row_fields(),
            "session_started_at": session_started_at}


def _check_iso(v: str) -> str:
    try:
        datetime.fromisoformat(v)
    except ValueError as e:
        raise ValueError(f"not an ISO datetime: {v!r}") from e
    return v


# --- Arrow schemas: the single definition used by every writer and reader -------------------

TURN_SCHEMA = pa.schema(
    [
        pa.field("conversation_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("session_index", pa.int32(), nullable=False),
        pa.field("turn_index", pa.int32(), nullable=False),
        pa.field("turn_id", pa.string(), nullable=False),
        pa.field("role", pa.string(), nullable=False),
        pa.field("speaker", pa.string(), nullable=False),
        pa.field("content", pa.string(), nullable=False),
        pa.field("timestamp", pa.string()),
        pa.field("session_started_at", pa.string()),
        pa.field("meta", pa.string()),  # JSON object or null
    ]
)

TURN_STRUCT = pa.struct(
    [
        pa.field("turn_id", pa.string()),
        pa.field("role", pa.string()),
        pa.field("speaker", pa.string()),
        pa.field("content", pa.string()),
        pa.field("timestamp", pa.string()),
        pa.field("meta", pa.string()),
    ]
)
SESSION_STRUCT = pa.struct(
    [
        pa.field("session_id", pa.string()),
        pa.field("started_at", pa.string()),
        pa.field("turns", pa.list_(TURN_STRUCT)),
    ]
)
CONVERSATION_SCHEMA = pa.schema(
    [
        pa.field("conversation_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("sessions", pa.list_(SESSION_STRUCT)),
        pa.field("meta", pa.string()),
    ]
)

QA_SCHEMA = pa.schema(
    [
        pa.field("conversation_id", pa.string(), nullable=False),
        pa.field("question_id", pa.string(), nullable=False),
        pa.field("question", pa.string(), nullable=False),
        pa.field("answer", pa.string(), nullable=False),
        pa.field("category", pa.string(), nullable=False),
        pa.field("evidence", pa.list_(pa.string())),
        pa.field("question_date", pa.string()),
        pa.field("answer_session_ids", pa.list_(pa.string())),
        pa.field("meta", pa.string()),
    ]
)


def conversation_to_row(conv: Conversation) -> dict[str, Any]:
    """Row for :data:`CONVERSATION_SCHEMA` (nested; meta dicts as JSON strings)."""
    return {
        "conversation_id": conv.conversation_id,
        "user_id": conv.user_id,
        "sessions": [
            {
                "session_id": s.session_id,
                "started_at": s.started_at,
                "turns": [t.row_fields() for t in s.turns],
            }
            for s in conv.sessions
        ],
        "meta": json.dumps(conv.meta, sort_keys=True) if conv.meta else None,
    }


def _row_meta(v: Any) -> Any:
    """A meta column holds a JSON object as a string; unreadable text is left for validation."""
    if isinstance(v, str):
        try:
            return json.loads(v) if v else {}
        except json.JSONDecodeError:
            return v
    return {} if v is None else v


def _turn_object(t: dict[str, Any]) -> dict[str, Any]:
    """A :data:`TURN_STRUCT` value as a turn object: meta decoded, tool fields out of it."""
    meta = _row_meta(t.get("meta"))
    if isinstance(meta, dict) and TOOL_META_KEY in meta:
        meta, info = split_tool_meta(meta)
        if info is not None:
            extra = {"tool_calls": [c.model_dump() for c in info.calls], "tool_call_id": info.call_id, "tool_name": info.name}
            return {**t, "meta": meta, **{k: v for k, v in extra.items() if v}}
    return {**t, "meta": meta}


def conversation_object_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row of :data:`CONVERSATION_SCHEMA` as a plain conversation object (meta strings decoded),
    ready for repair and validation; shapes it cannot read are passed through for validation to report."""
    obj = dict(row)
    obj["meta"] = _row_meta(obj.get("meta"))
    sessions = obj.get("sessions")
    if isinstance(sessions, list):
        obj["sessions"] = [
            {**s, "turns": [_turn_object(t) if isinstance(t, dict) else t for t in s["turns"]]}
            if isinstance(s, dict) and isinstance(s.get("turns"), list) else s
            for s in sessions
        ]
    return obj


def conversation_from_row(row: dict[str, Any]) -> Conversation:
    """Inverse of :func:`conversation_to_row` (accepts rows read back from Arrow/Parquet)."""
    obj = conversation_object_from_row(row)
    if obj.get("user_id") is None:
        obj.pop("user_id", None)
    return Conversation.model_validate(obj)


def conversations_to_table(convs: list[Conversation]) -> pa.Table:
    """Arrow table of whole conversations, one row each."""
    return pa.Table.from_pylist([conversation_to_row(c) for c in convs], schema=CONVERSATION_SCHEMA)
