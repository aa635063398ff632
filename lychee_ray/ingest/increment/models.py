"""What an append takes and gives: the request, its turns and the result (pydantic models).

The HTTP layer (``serve/schemas.py``) builds its bodies from these; the errors live in
:mod:`.errors`.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from lychee_ray.core.conversation import Turn
from lychee_ray.core.tools import ToolCall
from lychee_ray.core.ids import MAX_ID_CHARS, PolicyId


class AppendTurn(BaseModel):
    """One turn to append. ``session_id`` None continues the conversation's last session (a new
    conversation starts session ``s1``); a session id not stored yet opens a new session after the
    last one, starting at ``session_started_at`` (or the turn's ``timestamp``)."""

    model_config = ConfigDict(extra="forbid")

    turn_id: PolicyId = Field(min_length=1, max_length=MAX_ID_CHARS, description="the turn's own id: the idempotency key")
    role: str = Field("user", description="user / assistant / system / tool")
    speaker: str = Field(default="", description="display name (default: the role)")
    content: str = Field(description="the turn's text")
    timestamp: str | None = Field(default=None, description="ISO datetime of the turn")
    session_id: PolicyId | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS)
    session_started_at: str | None = Field(default=None, description="ISO start of a new session (default: timestamp)")
    meta: dict[str, Any] = Field(default_factory=dict)
    tool_calls: list[ToolCall] = Field(default_factory=list, description="an assistant turn's tool calls (agent logs)")
    tool_call_id: str | None = Field(default=None, description="a tool turn: the call it answers")
    tool_name: str | None = Field(default=None, description="a tool turn: the tool whose result it is")

    def to_turn(self) -> Turn:
        """The turn this appends (validated as any input turn; ``ValidationError`` otherwise)."""
        return Turn(turn_id=self.turn_id, role=self.role, speaker=self.speaker, content=self.content,
                    timestamp=self.timestamp, meta=self.meta, tool_calls=self.tool_calls,
                    tool_call_id=self.tool_call_id, tool_name=self.tool_name)


class AppendRequest(BaseModel):
    """What :func:`~lychee_ray.ingest.append.service.append_turns` takes (the HTTP body adds the id from the path)."""

    model_config = ConfigDict(extra="forbid")

    conversation_id: PolicyId = Field(min_length=1, max_length=MAX_ID_CHARS)
    turns: list[AppendTurn] = Field(default_factory=list, description="in conversation order; may be empty with flush")
    user_id: PolicyId | None = Field(default=None, min_length=1, max_length=MAX_ID_CHARS,
                                     description="must equal the stored owner; required to create a conversation")
    flush: bool = Field(default=False, description="also encode the open tail segment (the segmenter's undecided turns)")


class AppendResult(BaseModel):
    """What one append (or flush) did. Nothing was written when ``generation`` is None."""

    model_config = ConfigDict(extra="forbid")

    conversation_id: str
    user_id: str
    created: bool = Field(description="the conversation did not exist before this append")
    stored_turn_ids: list[str] = Field(description="turns stored by this call (searchable now as raw turns)")
    duplicate_turn_ids: list[str] = Field(description="turns already stored with the same content (idempotent)")
    segments_encoded: list[str] = Field(description="segment ids encoded by this call (closed, or flushed)")
    segments_failed: list[str] = Field(default_factory=list, description="of those, the ones whose encoding failed")
    records_written: int = Field(description="records added by this call")
    records_removed: int = Field(default=0, description="records of re-opened tail segments replaced by this call")
    open_turn_ids: list[str] = Field(description="turns waiting in the open tail segment (not encoded yet)")
    generation: str | None = Field(description="the committed generation (None: nothing changed)")
    committed_at: str | None = None
    rebuilt: str | None = Field(default=None, description="why the conversation was re-segmented from scratch, if it was")
    encode_queued: bool = Field(default=False, description="turns of this conversation wait for segmentation and encoding "
                                                   "in the background (searchable as raw turns meanwhile)")
    timings_ms: dict[str, float] = Field(default_factory=dict)


__all__ = ["AppendRequest", "AppendResult", "AppendTurn"]
