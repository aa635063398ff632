"""Types of incremental builds and online appends: the append request/result and the typed errors.

Kept apart from the logic (:mod:`lychee_ray.build.incremental`) so that the HTTP layer
(``serve/``, layer 7) can import the bodies and map the errors to status codes by their ``kind``
without importing the build machinery. Every error carries its kind as data (a ``Literal``
attribute) plus the conversation and, where one is to blame, the turn id.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from lychee_ray.core.conversation import Turn
from lychee_ray.core.tools import ToolCall
from lychee_ray.core.ids import MAX_ID_CHARS, PolicyId

# changed: a stored turn id arrives with other content (role, speaker, text, time, meta, session);
# removed: a stored turn is missing from the input; reordered: stored turns arrive in another order,
# or a new turn was inserted before a stored one (also: a turn appended to a session that is not the
# last one).
ConflictKind = Literal["changed", "removed", "reordered"]
AppendErrorKind = Literal[
    "history_conflict", "owner_mismatch", "unknown_conversation", "user_id_required", "conversation_busy",
    "invalid_turns", "config_mismatch",
]


class IncrementError(Exception):
    """Base of the errors an incremental build or an append raises instead of writing anything."""

    kind: AppendErrorKind

    def __init__(self, message: str, conversation_id: str, turn_id: str | None = None) -> None:
        super().__init__(message)
        self.conversation_id = conversation_id
        self.turn_id = turn_id


class HistoryConflict(IncrementError):
    """The stored history of a conversation and the new input disagree (``conflict`` names how).

    A build quarantines the conversation with stage ``conflict`` (unless ``on_conflict=rebuild``);
    the HTTP API answers 409 naming ``turn_id``.
    """

    kind: AppendErrorKind = "history_conflict"

    def __init__(self, conflict: ConflictKind, conversation_id: str, turn_id: str, detail: str = "") -> None:
        what = {"changed": "differs from the stored turn", "removed": "is stored but missing from the input",
                "reordered": "is out of the stored order"}[conflict]
        msg = f"conversation {conversation_id!r}: turn {turn_id!r} {what}" + (f" ({detail})" if detail else "")
        super().__init__(msg, conversation_id, turn_id)
        self.conflict: ConflictKind = conflict


class OwnerMismatch(IncrementError):
    """The conversation is stored under another user id than the one given."""

    kind: AppendErrorKind = "owner_mismatch"

    def __init__(self, conversation_id: str, stored_user_id: str, user_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} does not belong to user {user_id!r}", conversation_id)
        self.stored_user_id = stored_user_id
        self.user_id = user_id


class UnknownConversationError(IncrementError, KeyError):
    """Append to a conversation that is not stored while ``build.append_create`` is false."""

    kind: AppendErrorKind = "unknown_conversation"

    def __init__(self, conversation_id: str) -> None:
        IncrementError.__init__(self, f"unknown conversation {conversation_id!r} (build.append_create is false)",
                                conversation_id)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class UserIdRequired(IncrementError, ValueError):
    """Creating a conversation by appending to it needs the owner's ``user_id``."""

    kind: AppendErrorKind = "user_id_required"

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} is not stored: creating it needs a user_id", conversation_id)


class ConversationBusy(IncrementError, TimeoutError):
    """Another writer held the conversation's write lock longer than ``build.append_lock_timeout_s``."""

    kind: AppendErrorKind = "conversation_busy"

    def __init__(self, conversation_id: str, waited_s: float) -> None:
        super().__init__(f"conversation {conversation_id!r} is being written by another writer "
                         f"(waited {waited_s:.1f} s)", conversation_id)
        self.waited_s = waited_s


class InvalidTurns(IncrementError, ValueError):
    """Turns that cannot be stored as given (``field`` names the offending field, ``turn_id`` the turn)."""

    kind: AppendErrorKind = "invalid_turns"

    def __init__(self, conversation_id: str, message: str, turn_id: str | None = None, field: str | None = None) -> None:
        super().__init__(message, conversation_id, turn_id)
        self.field = field


class ConfigMismatch(IncrementError):
    """The conversation was built with other settings or models (its fingerprint differs) than the
    appender's configuration: appending would re-encode it from scratch. Open the store with the
    configuration it was built with, or rebuild it with ``lychee-ray build``."""

    kind: AppendErrorKind = "config_mismatch"

    def __init__(self, conversation_id: str, stored: str, current: str) -> None:
        super().__init__(f"conversation {conversation_id!r} was built with another configuration "
                         f"({stored}) than this appender's ({current})", conversation_id)
        self.stored_fingerprint = stored
        self.fingerprint = current


class AppendTurn(BaseModel):
    """One turn to append. ``session_id`` None continues the conversation's last session (a new
    conversation starts session ``s1``); a session id not stored yet opens a new session after the
    last one, starting at ``session_started_at`` (or the turn's ``timestamp``)."""

    model_config = ConfigDict(extra="forbid")

    turn_id: PolicyId = Field(min_length=1, max_length=MAX_ID_CHARS, description="the turn's own id: the idempotency key")
    role: str = Field("user", description="user / assistant / system / tool")
    speaker: str = Field("", description="display name (default: the role)")
    content: str = Field(description="the turn's text")
    timestamp: str | None = Field(None, description="ISO datetime of the turn")
    session_id: PolicyId | None = Field(None, min_length=1, max_length=MAX_ID_CHARS)
    session_started_at: str | None = Field(None, description="ISO start of a new session (default: timestamp)")
    meta: dict[str, Any] = Field(default_factory=dict)
    tool_calls: list[ToolCall] = Field(default_factory=list, description="an assistant turn's tool calls (agent logs)")
    tool_call_id: str | None = Field(None, description="a tool turn: the call it answers")
    tool_name: str | None = Field(None, description="a tool turn: the tool whose result it is")

    def to_turn(self) -> Turn:
        """The turn this appends (validated as any input turn; ``ValidationError`` otherwise)."""
        return Turn(turn_id=self.turn_id, role=self.role, speaker=self.speaker, content=self.content,
                    timestamp=self.timestamp, meta=self.meta, tool_calls=self.tool_calls,
                    tool_call_id=self.tool_call_id, tool_name=self.tool_name)


class AppendRequest(BaseModel):
    """What :func:`~lychee_ray.build.incremental.append_turns` takes (the HTTP body adds the id from the path)."""

    model_config = ConfigDict(extra="forbid")

    conversation_id: PolicyId = Field(min_length=1, max_length=MAX_ID_CHARS)
    turns: list[AppendTurn] = Field(default_factory=list, description="in conversation order; may be empty with flush")
    user_id: PolicyId | None = Field(None, min_length=1, max_length=MAX_ID_CHARS,
                                     description="must equal the stored owner; required to create a conversation")
    flush: bool = Field(False, description="also encode the open tail segment (the segmenter's undecided turns)")


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
    records_removed: int = Field(0, description="records of re-opened tail segments replaced by this call")
    open_turn_ids: list[str] = Field(description="turns waiting in the open tail segment (not encoded yet)")
    generation: str | None = Field(description="the committed generation (None: nothing changed)")
    committed_at: str | None = None
    rebuilt: str | None = Field(None, description="why the conversation was re-segmented from scratch, if it was")
    encode_queued: bool = Field(False, description="turns of this conversation wait for segmentation and encoding "
                                                   "in the background (searchable as raw turns meanwhile)")
    timings_ms: dict[str, float] = Field(default_factory=dict)


__all__ = [
    "AppendErrorKind", "AppendRequest", "AppendResult", "AppendTurn", "ConfigMismatch", "ConflictKind", "ConversationBusy",
    "HistoryConflict", "IncrementError", "InvalidTurns", "OwnerMismatch", "UnknownConversationError",
    "UserIdRequired",
]
