"""Attribution by role: does a record say that the party who said or did something is
the one whose turns it cites? Measured from the outside on a built store.

A record's *subject* is read from how it opens: "The agent …", "Assistant said …", "On <date>, the
agent …" → the agent; "User …", "the user …", the conversation's user id → the user; "Policy …" →
the system prompt; "tool(args) returned …" / "After tool(args) …" → a tool; any other opening
names a speaker of the conversation ("Caroline said …") or is not attributed (left out of the
share). The subject *matches* when the cited turns include that role — the agent's work covers its
own turns and the tool results it caused (assistant or tool), a speaker's name its own turns.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass
from typing import Any

_DATE_LEAD = re.compile(r"^on \d{4}-\d{2}-\d{2},?\s+", re.I)
_CALL_LEAD = re.compile(r"^(?:after\s+)?[A-Za-z_][\w.]*\([^)]*\)(?:\s|:|$)")
_AGENT = ("the agent", "agent ", "assistant")
_USER = ("the user", "user ")


@dataclass
class AttributionFigures:
    """Records with an attributable subject, and of those the ones whose subject matches a cited role."""

    records: int = 0
    attributed: int = 0
    matching: int = 0

    def add(self, other: AttributionFigures) -> None:
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)

    def to_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = asdict(self)
        d["matching_share"] = round(self.matching / self.attributed, 4) if self.attributed else None
        return d


def record_subject(text: str, user_id: str | None, speakers: dict[str, str]) -> str | None:
    """The role a record's text names as its subject (``assistant``, ``user``, ``system``, ``tool``),
    the speaker's role for a record opening with a speaker's name, or None."""
    t = _DATE_LEAD.sub("", text.strip())
    low = t.lower()
    if low.startswith(_AGENT):
        return "assistant"
    if low.startswith(_USER) or low == "user" or (user_id and low.startswith(user_id.lower())):
        return "user"
    if low.startswith("policy"):
        return "system"
    if _CALL_LEAD.match(t):
        return "tool"
    for name, role in speakers.items():
        if name and low.startswith(name.lower() + " "):
            return role
    return None


def matches(subject: str, cited_roles: set[str]) -> bool:
    """Whether the cited turns are the subject's: the agent's work spans its turns and their tool results."""
    if subject == "assistant":
        return bool(cited_roles & {"assistant", "tool"})
    if subject == "tool":
        return "tool" in cited_roles or "assistant" in cited_roles and bool(cited_roles & {"tool"})
    return subject in cited_roles


def measure_attribution(records: list[dict[str, Any]], turns: list[dict[str, Any]], user_id: str | None) -> AttributionFigures:
    """Figures of one conversation from its record rows and turn rows (``turn_id``, ``role``, ``speaker``)."""
    role_of = {t["turn_id"]: t["role"] for t in turns}
    speakers = {str(t["speaker"]): t["role"] for t in turns if t["speaker"] and t["speaker"] != t["role"]}
    f = AttributionFigures(records=len(records))
    for r in records:
        subject = record_subject(r["text"], user_id, speakers)
        cited = {role_of[t] for t in r["source_turn_ids"] or [] if t in role_of}
        if subject is None or not cited:
            continue
        f.attributed += 1
        f.matching += matches(subject, cited)
    return f


__all__ = ["AttributionFigures", "matches", "measure_attribution", "record_subject"]
