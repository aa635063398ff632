"""Statements of value: what a record says a value of, decided once, at write time.

A record may state values ("my rent is 1,450 dollars", "I've finished 5 chapters"); each becomes a
:class:`ValueStatement` stored on the record (``MemoryRecord.statements``, a list of structs in the
records table). The write path (:mod:`lychee_ray.ingest.value_slots`) puts statements whose subjects
mean the same thing into one slot and links the newer statement to the ones it replaces; readers
derive each statement's status from those links, as they do for records (:mod:`.status`).

Fields: ``subject`` a short phrase of what the value is about ("rent", "shipping address",
"chapters of thesis"); ``kind`` one of :data:`VALUE_KINDS`; ``unit`` the value's unit ("usd",
"usd/month", "%", "s", "mb", the counted noun) or ""; ``value`` the value normalised (digits without
separators, seconds for durations, an ISO day, "15:30", lower-case words); ``said`` the value as the
text writes it (what a reader looks for in a line); ``context`` the sentence's other content words
(what else it speaks of); ``changed`` its clause says the value is new or holds now ("went up to",
"now": only such a statement replaces another); ``modality`` one of :data:`MODALITIES`;
``slot`` the slot the write path put it in (None: none); ``supersedes`` ids
(:func:`statement_id`) of earlier statements it replaces.
"""

from __future__ import annotations

from typing import Final, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field

ValueKind = Literal["count", "money", "percentage", "duration", "date", "time", "identifier", "state"]
VALUE_KINDS: Final[tuple[ValueKind, ...]] = get_args(ValueKind)
COUNT, MONEY, PERCENTAGE, DURATION, DATE, TIME, IDENTIFIER, STATE = VALUE_KINDS

# done: said as having happened; now: said to hold; plan: a plan, a goal, a wish or a bound
# ("under 200ms"); question: asked; denial: said not to hold. Only done and now hold a slot's value.
Modality = Literal["done", "now", "plan", "question", "denial"]
MODALITIES: Final[tuple[Modality, ...]] = get_args(Modality)
DONE, NOW, PLAN, QUESTION, DENIAL = MODALITIES
HOLDING: Final[frozenset[str]] = frozenset({DONE, NOW})

_ID_SEP = "#"


class ValueStatement(BaseModel):
    """One statement of a value (see the module doc)."""

    model_config = ConfigDict(extra="forbid")

    subject: str
    kind: ValueKind
    unit: str = ""
    value: str
    said: str
    context: str = ""
    changed: bool = False
    modality: Modality = NOW
    slot: str | None = None
    supersedes: list[str] = Field(default_factory=list)

    @property
    def meaning(self) -> str:
        """The text whose embedding places the statement among slots: its subject, then its context."""
        return f"{self.subject}: {self.context}" if self.context else self.subject

    @property
    def holds(self) -> bool:
        """It states what holds (done / now), not a plan, a question or a denial."""
        return self.modality in HOLDING


def statement_id(record_id: str, index: int) -> str:
    """The id of a record's ``index``-th statement."""
    return f"{record_id}{_ID_SEP}{index}"


def statement_record(sid: str) -> str:
    """The record id a statement id belongs to."""
    return sid.rpartition(_ID_SEP)[0]


def statement_parts(sid: str) -> tuple[str, int]:
    """(record id, index) of a statement id; index -1 when the id names no index."""
    rid, _, i = sid.rpartition(_ID_SEP)
    return rid, int(i) if i.isdigit() else -1


__all__ = ["COUNT", "DATE", "DENIAL", "DONE", "DURATION", "HOLDING", "IDENTIFIER", "MODALITIES", "MONEY", "Modality", "NOW",
           "PERCENTAGE", "PLAN", "QUESTION", "STATE", "TIME", "VALUE_KINDS", "ValueKind", "ValueStatement", "statement_id",
           "statement_parts", "statement_record"]
