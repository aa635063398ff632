"""The one id policy: what a conversation, user, session or turn id may be, used by
the adapters' cleaning, the HTTP API, the Python API's inputs and the CLI alike.

An id is 1 to :data:`MAX_ID_CHARS` characters, has no leading or trailing whitespace, and holds
no control, format, surrogate or line/paragraph-separator character (Unicode categories ``Cc``,
``Cf``, ``Cs``, ``Zl``, ``Zp``: NUL, ANSI escapes, tabs and newlines, bidi overrides and isolates,
zero-width characters, BOMs). Anything else is allowed, ``/`` included (the HTTP routes take an id
with ``/`` as it is or as ``%2F``; the store names files by a hash of the id, never the id).

The same rule is applied two ways: :func:`check_id` *rejects* a bad id with the reason
(:class:`InvalidId`, ``kind="invalid_id"``: the HTTP API's 422, the CLI's exit 2), and
:func:`repair_id` *repairs* one in bulk input (the characters removed, whitespace trimmed) and says
what it changed, for the warning the build records; what cannot be repaired (empty, too long) is
rejected there too. :func:`printable` escapes what a terminal would interpret, for ids already stored
(by older versions) when the CLI prints them.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated, Literal

from pydantic import AfterValidator, ValidationInfo

# The longest id (characters). Ids are keys, shown in every listing row and log line; a contract of
# the data format (docs/data-format.md), not a tuning knob.
MAX_ID_CHARS = 256
# Unicode categories an id may not contain (see the module doc).
FORBIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# ANSI/VT escape sequences: removed whole by a repair (their parameter bytes are printable).
_ESCAPE_SEQUENCE = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b\n]{0,512}(?:\x07|\x1b\\)|\x1b[@-Z\\-_]"
                              r"|\x9b[0-?]*[ -/]*[@-~]")

IdField = Literal["conversation_id", "user_id", "session_id", "turn_id"]


class InvalidId(ValueError):
    """An id that breaks the policy; ``field`` names which id, ``reason`` why. ``kind`` is
    ``"invalid_id"``."""

    kind: Literal["invalid_id"] = "invalid_id"

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field} {reason}")
        self.field = field
        self.reason = reason


def _forbidden(ch: str) -> bool:
    return unicodedata.category(ch) in FORBIDDEN_CATEGORIES


def _describe(ch: str) -> str:
    name = unicodedata.name(ch, "")
    return f"U+{ord(ch):04X}" + (f" ({name})" if name else "")


def id_problem(value: str) -> str | None:
    """Why ``value`` is not a valid id (None when it is)."""
    if not value:
        return "is empty"
    if len(value) > MAX_ID_CHARS:
        return f"has {len(value)} characters; at most {MAX_ID_CHARS} are allowed"
    bad = next((ch for ch in value if _forbidden(ch)), None)
    if bad is not None:
        return (f"contains the control or formatting character {_describe(bad)} at position {value.index(bad)}; "
                f"ids may not hold control, format (bidi, zero-width) or line-separator characters")
    if value != value.strip():
        return "has leading or trailing whitespace"
    return None


def check_id(value: str, field: str = "id") -> str:
    """``value`` when it is a valid id; else :class:`InvalidId` with the reason."""
    problem = id_problem(value)
    if problem is not None:
        raise InvalidId(field, problem)
    return value


def repair_id(value: str, field: str = "id") -> tuple[str, str | None]:
    """The id with forbidden characters (and whole escape sequences) removed and whitespace trimmed,
    and what was changed (None: nothing). :class:`InvalidId` when no valid id is left (empty, or
    longer than :data:`MAX_ID_CHARS`: cutting it could make two ids one)."""
    if id_problem(value) is None:
        return value, None
    out = _ESCAPE_SEQUENCE.sub("", value)
    out = "".join(ch for ch in out if not _forbidden(ch)).strip()
    problem = id_problem(out)
    if problem is not None:
        raise InvalidId(field, problem)
    if out == value:
        return value, None
    return out, f"{printable(value)!s} -> {out}"


def _policy(value: str, info: ValidationInfo) -> str:
    return check_id(value, info.field_name or "id")


# A pydantic field type holding a policy-checked id (the request models of the HTTP API and of
# MemoryStore.append): a bad id is a validation error naming the field and the reason.
PolicyId = Annotated[str, AfterValidator(_policy)]


def printable(text: str) -> str:
    """``text`` safe to print on a terminal: forbidden characters shown as escapes (``\\x1b``,
    ``\\u202e``), everything else as it is."""
    if not any(_forbidden(ch) for ch in text):
        return text
    return "".join(ch.encode("unicode_escape").decode("ascii") if _forbidden(ch) else ch for ch in text)


__all__ = ["FORBIDDEN_CATEGORIES", "IdField", "InvalidId", "MAX_ID_CHARS", "PolicyId", "check_id", "id_problem", "printable",
           "repair_id"]
