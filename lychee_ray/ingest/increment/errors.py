"""The typed errors of increments: appends, and a build run's re-imported conversations.

Every error carries its kind as data (a ``Literal`` attribute) plus the conversation and, where one
is to blame, the turn id; the HTTP layer (``serve/``) maps them to status codes by ``kind``, never
by their text. Nothing is written when one is raised.
"""

from __future__ import annotations

from typing import Literal

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
    """Base of the errors an increment (an append, a re-imported conversation) raises instead of writing anything."""

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
    """Append to a conversation that is not stored while ``appends.create`` is false."""

    kind: AppendErrorKind = "unknown_conversation"

    def __init__(self, conversation_id: str) -> None:
        IncrementError.__init__(self, f"unknown conversation {conversation_id!r} (appends.create is false)",
                                conversation_id)

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


class UserIdRequired(IncrementError, ValueError):
    """Creating a conversation by appending to it needs the owner's ``user_id``."""

    kind: AppendErrorKind = "user_id_required"

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} is not stored: creating it needs a user_id", conversation_id)


class ConversationBusy(IncrementError, TimeoutError):
    """Another writer held the conversation's write lock longer than ``appends.lock_timeout_s``
    (raised by :func:`~lychee_ray.io.store.locks.write_lock` for an append: its ``busy`` error)."""

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


__all__ = [
    "AppendErrorKind", "ConfigMismatch", "ConflictKind", "ConversationBusy", "HistoryConflict", "IncrementError",
    "InvalidTurns", "OwnerMismatch", "UnknownConversationError", "UserIdRequired",
]
