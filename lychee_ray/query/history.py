"""A slot's history: every value a conversation (or a user's conversations) recorded for it, in time
order, with when each held and what replaced it (docs/current-memory.md).

``MemoryStore.history`` / ``GET /v1/history`` / ``lychee-ray history``: by ``slot``
(``"reservation M05KNL · flights"``), by ``subject`` (every slot of ``"reservation M05KNL"``) or by
``record_id`` (the slot of that record). Statuses are the query path's (:mod:`.currency`): links
written on the newer records, and across a user's conversations the strict time order.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

from lychee_ray.core.currency import SLOT_SEP, Status, parse_slot, slot_key, slot_subject
from lychee_ray.core.statements import statement_id
from lychee_ray.core.status import CURRENT_STATUS, SUPERSEDED_STATUS
from lychee_ray.query.currency import ScopeCurrency, ViewCurrency


class HistoryEntry(BaseModel):
    """One recorded value of a slot."""

    record_id: str
    conversation_id: str
    slot: str
    value: str | None = None
    text: str
    type: str
    valid_from: str | None = Field(None, description="when the value became true (ISO)")
    valid_until: str | None = Field(None, description="when a newer record replaced it (ISO), if one did")
    status: Status = "current"
    superseded_by: list[str] = Field(default_factory=list)
    conflicts_with: list[str] = Field(default_factory=list)
    source_turn_ids: list[str] = Field(default_factory=list)


class HistoryResult(BaseModel):
    """A slot's (or a subject's slots') values in time order."""

    conversation_ids: list[str]
    slots: list[str] = Field(description="the slots shown, in order of their first value")
    entries: list[HistoryEntry] = Field(description="every value, oldest first (ties: conversation and record order)")


class HistoryQueryError(ValueError):
    """A history request that names no slot, subject or record (``kind`` says which problem)."""

    def __init__(self, message: str, kind: str = "invalid_history_query") -> None:
        super().__init__(message)
        self.kind = kind


def _subject_key(subject: str) -> str:
    key = slot_key(subject, "x")
    if key is None:
        raise HistoryQueryError(f"not a subject: {subject!r}")
    return slot_subject(key)


def _statement_replaced(currency: ViewCurrency, record_id: str, p: int, slot: str) -> list[int]:
    """Positions of the records that replaced record ``p``'s stated value of ``slot`` (empty: it holds)."""
    for i, st in enumerate(currency.statements[p] if p < len(currency.statements) else []):
        if st.get("slot") == slot:
            return currency.replaced_by.get(statement_id(record_id, i), [])
    return []


def slot_history(scope: ScopeCurrency, *, slot: str | None = None, subject: str | None = None,
                 record_id: str | None = None) -> HistoryResult:
    """The history of the slots ``slot``, ``subject`` or ``record_id`` name (exactly one of them)."""
    if sum(x is not None for x in (slot, subject, record_id)) != 1:
        raise HistoryQueryError("name exactly one of slot, subject or record_id")
    wanted: set[str] = set()
    if slot is not None:
        key = parse_slot(slot)
        if key is None:
            raise HistoryQueryError(f"not a slot (write it as 'subject · attribute'): {slot!r}")
        wanted = {key}
    elif record_id is not None:
        for cid in scope.views:
            pos = scope.views[cid].record_pos.get(record_id)
            if pos is not None:
                s = scope.per_view[cid].slot_of[pos] if pos < len(scope.per_view[cid].slot_of) else None
                wanted = {s} if s else set()
                break
        else:
            raise HistoryQueryError(f"unknown record {record_id!r}", kind="unknown_record")
    else:
        # the slot's subject ("reservation m05knl"), or what a person's stated value is about (its
        # attribute: "rent" of "user · rent")
        subj = _subject_key(subject or "")
        wanted = {s for currency in scope.per_view.values() for s in currency.slots
                  if subj in (slot_subject(s), s.partition(SLOT_SEP)[2])}
    rows: list[tuple[str, str, int, HistoryEntry]] = []
    for cid, currency in scope.per_view.items():
        view = scope.views[cid]
        for s in wanted:
            for p in currency.slots.get(s, []):
                record_status = scope.status(cid, p)
                status, until, by = record_status.status, record_status.valid_until, list(record_status.superseded_by)
                replaced = _statement_replaced(currency, view.record_ids[p], p, s)
                if replaced and status == CURRENT_STATUS:  # its value of this slot was replaced, not all it says
                    status, by = SUPERSEDED_STATUS, [view.record_ids[q] for q in replaced]
                    until = currency.valid_from[replaced[0]]
                e = HistoryEntry(
                    record_id=view.record_ids[p], conversation_id=cid, slot=s, value=currency.value_of[p],
                    text=view.record_text[p], type=view.record_type[p], valid_from=currency.valid_from[p],
                    valid_until=until, status=status, superseded_by=by,
                    conflicts_with=list(record_status.conflicts), source_turn_ids=list(view.record_sources[p]),
                )
                rows.append((e.valid_from or "", cid, p, e))
    rows.sort(key=lambda r: (r[0], r[1], r[2]))
    entries = [r[3] for r in rows]
    return HistoryResult(conversation_ids=list(scope.views), slots=list(dict.fromkeys(e.slot for e in entries)),
                         entries=entries)


__all__ = ["HistoryEntry", "HistoryQueryError", "HistoryResult", "slot_history"]
