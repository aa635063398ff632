"""Canonical conversation data model (DESIGN §3) and its Arrow schemas.

A conversation is a list of sessions, each a list of turns. A turn is identified by
(conversation_id, session_id, turn index within the session); the dataset's own ``turn_id``
(e.g. LoCoMo's ``dia_id``) is preserved so that gold evidence can be checked.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any, Iterator

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

ROLES = ("user", "assistant", "system", "tool")


class Turn(BaseModel):
    """One utterance."""

    model_config = ConfigDict(extra="forbid")

    turn_id: str = Field(min_length=1, description="Original id from the source (kept for evidence checks).")
    role: str = Field(default="user", description="user / assistant / system / tool.")
    speaker: str = Field(default="", description="Display name of whoever spoke; defaults to the role.")
    content: str
    timestamp: str | None = Field(default=None, description="ISO datetime of the turn, if the source has one.")
    meta: dict[str, Any] = Field(default_factory=dict, description="Source-specific extras (e.g. has_answer).")

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

    @model_validator(mode="after")
    def _default_speaker(self) -> "Turn":
        if not self.speaker:
            self.speaker = self.role
        return self


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
    def _check(self) -> "Conversation":
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
        rows = []
        for si, s, ti, t in self.iter_turns_from(start):
            rows.append(
                {
                    "conversation_id": self.conversation_id,
                    "user_id": self.user_id,
                    "session_id": s.session_id,
                    "session_index": si,
                    "turn_index": ti,
                    "turn_id": t.turn_id,
                    "role": t.role,
                    "speaker": t.speaker,
                    "content": t.content,
                    "timestamp": t.timestamp,
                    "session_started_at": s.started_at,
                    "meta": json.dumps(t.meta, sort_keys=True) if t.meta else None,
                }
            )
        return rows


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
                "turns": [
                    {
                        "turn_id": t.turn_id,
                        "role": t.role,
                        "speaker": t.speaker,
                        "content": t.content,
                        "timestamp": t.timestamp,
                        "meta": json.dumps(t.meta, sort_keys=True) if t.meta else None,
                    }
                    for t in s.turns
                ],
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


def conversation_object_from_row(row: dict[str, Any]) -> dict[str, Any]:
    """A row of :data:`CONVERSATION_SCHEMA` as a plain conversation object (meta strings decoded),
    ready for repair and validation; shapes it cannot read are passed through for validation to report."""
    obj = dict(row)
    obj["meta"] = _row_meta(obj.get("meta"))
    sessions = obj.get("sessions")
    if isinstance(sessions, list):
        obj["sessions"] = [
            {**s, "turns": [{**t, "meta": _row_meta(t.get("meta"))} if isinstance(t, dict) else t for t in s["turns"]]}
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
