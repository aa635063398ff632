"""Memory that stays current: slots, values, and the status readers derive from supersession links.

Records stay append-only. A record may name its *slot* — a subject and an attribute or relation,
normalised, ``"reservation m05knl · flights"``, ``"user · shipping address"`` — the value it states
(``slot_value``, normalised: two records of a slot with equal values restate, with different ones
change) and when that value became true (``valid_from``, an ISO day or time). A newer record that
replaces earlier ones names them in its ``supersedes``; one that contradicts them without a clear
change names them in ``conflicts_with``. The link is written on the newer record only, so a write
never touches a stored row (appends stay tail-only, and an incremental build writes what a one-shot
build would).

Readers derive, per record (:func:`derive_status`):

* ``status`` — ``superseded`` when a later record names it in ``supersedes`` (directly or through
  a chain), else ``conflicting`` when a record it conflicts with (either direction) is not
  superseded, else ``current``; a query that asks for history shows old records as ``history``;
* ``superseded_by`` — the records that replaced it; ``latest`` — the current records at the end of
  its chain (what the slot holds now);
* ``valid_until`` — when its value stopped being true: the earliest ``valid_from`` of the records
  that replaced it.

Supersession never crosses slots: links are only ever made between records of one slot (or, for a
record that ends its subject — a cancellation —, between records of one subject). Across a user's
conversations, which are built independently, the same rule is applied when they are read together
(:func:`links_across`): the latest value of a slot, strictly later in time, supersedes the other
conversations' different values; records that cannot be ordered in time are left as they are.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from collections.abc import Iterable, Sequence

from lychee_ray.core.status import STATUSES, Status  # re-exported: readers import them from here

SLOT_SEP = " · "
# separators a model may write between subject and attribute (the first one found splits)
_SEPARATORS = ("·", "|", "::", " / ", " - ")
_SPACE = re.compile(r"\s+")
_EDGE = re.compile(r"^[\s\"'`“”‘’.,;:!?()\[\]]+|[\s\"'`“”‘’.,;:!?()\[\]]+$")
_MAX_PART_CHARS = 120  # a slot's subject or attribute is a name, not a sentence


def _clean(text: str) -> str:
    return _EDGE.sub("", _SPACE.sub(" ", text)).lower()


def slot_key(subject: str, attribute: str) -> str | None:
    """The normalised slot ``"subject · attribute"`` (lower case, one space, no edge punctuation),
    or None when either part is empty or too long to be a name."""
    s, a = _clean(subject or ""), _clean(attribute or "")
    if not s or not a or len(s) > _MAX_PART_CHARS or len(a) > _MAX_PART_CHARS:
        return None
    return f"{s}{SLOT_SEP}{a}"


_PLACEHOLDER_SLOT = f"subject{SLOT_SEP}attribute"


def parse_slot(raw: str | None) -> str | None:
    """A slot as a model or a caller writes it (``"User · shipping address"``, ``"user | address"``)
    normalised by :func:`slot_key`; None when it does not name a subject and an attribute (also
    ``"subject · attribute"`` itself)."""
    if not raw or not raw.strip():
        return None
    for sep in _SEPARATORS:
        if sep in raw:
            subject, _, attribute = raw.partition(sep)
            slot = slot_key(subject, attribute)
            # the format's own words, copied from the prompt by a small model, name nothing
            return None if slot == _PLACEHOLDER_SLOT else slot
    return None


def slot_subject(slot: str) -> str:
    """The subject part of a normalised slot."""
    return slot.partition(SLOT_SEP)[0]


def value_key(raw: str | None) -> str | None:
    """A slot value normalised for comparison (lower case, one space, no edge punctuation); None
    when empty."""
    if raw is None:
        return None
    v = _clean(str(raw))
    return v or None


def day(iso: str | None) -> str | None:
    """The ``YYYY-MM-DD`` of an ISO date or time."""
    return iso[:10] if iso and len(iso) >= 10 else None


def strictly_before(a: str | None, b: str | None) -> bool:
    """``a`` is known to be earlier than ``b``: both times given, compared at the precision both
    have (two days, or two times of day when both carry one); equal or unknown is not before."""
    if not a or not b:
        return False
    if len(a) > 10 and len(b) > 10:
        return a < b
    da, db = day(a), day(b)
    return da is not None and db is not None and da < db


@dataclass(frozen=True)
class LinkRow:
    """What status derivation reads of one record."""

    id: str
    supersedes: Sequence[str] = ()
    conflicts_with: Sequence[str] = ()
    valid_from: str | None = None


@dataclass
class RecordStatus:
    """A record's derived status (see the module doc)."""

    status: Status = "current"
    superseded_by: list[str] = field(default_factory=list)
    valid_until: str | None = None
    conflicts: list[str] = field(default_factory=list)
    latest: list[str] = field(default_factory=list)


CURRENT = RecordStatus()


def derive_status(rows: Iterable[LinkRow], extra: Iterable[tuple[str, str]] = (),
                  extra_conflicts: Iterable[tuple[str, str]] = ()) -> dict[str, RecordStatus]:
    """Each linked record's status from the links on the newer records (``extra``: more
    ``(newer, older)`` supersession pairs, ``extra_conflicts`` more conflicting pairs, e.g. from
    :func:`links_across`). Records without any link are absent from the result: they are current
    (:data:`CURRENT`). A link to an id not among ``rows`` (an erased record) is ignored."""
    rows = list(rows)
    by_id = {r.id: r for r in rows}
    replaced_by: dict[str, list[str]] = {}
    for r in rows:
        for old in r.supersedes:
            if old in by_id and old != r.id:
                replaced_by.setdefault(old, []).append(r.id)
    for new, old in extra:
        if old in by_id and new in by_id and old != new and new not in replaced_by.get(old, []):
            replaced_by.setdefault(old, []).append(new)
    conflicts: dict[str, list[str]] = {}
    pairs = [(r.id, other) for r in rows for other in r.conflicts_with]
    for rid, other in [*pairs, *extra_conflicts]:
        if rid in by_id and other in by_id and other != rid:
            conflicts.setdefault(rid, []).append(other)
            conflicts.setdefault(other, []).append(rid)
    out: dict[str, RecordStatus] = {}

    def latest(rid: str) -> list[str]:
        seen, frontier, ends = {rid}, [rid], []
        while frontier:
            nxt = []
            for x in frontier:
                succ = [s for s in replaced_by.get(x, []) if s not in seen]
                if not replaced_by.get(x) and x != rid:
                    ends.append(x)
                seen.update(succ)
                nxt.extend(succ)
            frontier = nxt
        return list(dict.fromkeys(ends))

    for rid, succ in replaced_by.items():
        untils = [v for v in (by_id[s].valid_from for s in succ) if v]
        out[rid] = RecordStatus("superseded", list(dict.fromkeys(succ)), min(untils) if untils else None,
                                list(dict.fromkeys(conflicts.get(rid, []))), latest(rid))
    for rid, others in conflicts.items():
        if rid in out:
            continue
        live = [o for o in dict.fromkeys(others) if o not in replaced_by]
        out[rid] = RecordStatus("conflicting" if live else "current", [], None, list(dict.fromkeys(others)))
    return out


@dataclass(frozen=True)
class SlotRow:
    """A slotted record as :func:`links_across` reads it."""

    id: str
    conversation_id: str
    slot: str
    value: str | None
    valid_from: str | None


@dataclass
class AcrossLinks:
    """Links between a user's conversations, derived when they are read together."""

    supersedes: list[tuple[str, str]] = field(default_factory=list)  # (newer, older)
    conflicts: list[tuple[str, str]] = field(default_factory=list)


def links_across(rows: Iterable[SlotRow], superseded: set[str] | frozenset[str] = frozenset()) -> AcrossLinks:
    """Links between records of one slot in different conversations of a user, built
    independently: per slot, the records (not ``superseded`` already) whose time is latest
    supersede those of other conversations that are strictly earlier and state another value;
    latest records of different conversations that cannot be ordered (the same time) and state
    different values conflict. Records with no time are left as they are."""
    by_slot: dict[str, list[SlotRow]] = {}
    for r in rows:
        if r.id not in superseded and r.value is not None:
            by_slot.setdefault(r.slot, []).append(r)
    out = AcrossLinks()
    for recs in by_slot.values():
        if len({r.conversation_id for r in recs}) < 2:
            continue
        dated = [r for r in recs if r.valid_from]
        if not dated:
            continue
        top = max(dated, key=lambda r: r.valid_from or "")
        newest = [r for r in dated if not strictly_before(r.valid_from, top.valid_from)]
        latest_values = {r.value for r in newest}
        for i, a in enumerate(newest):
            for b in newest[i + 1:]:
                if a.conversation_id != b.conversation_id and a.value != b.value:
                    out.conflicts.append((a.id, b.id))
        for old in recs:
            if old in newest or old.value in latest_values:
                continue
            for new in newest:
                if new.conversation_id != old.conversation_id and new.value != old.value \
                        and strictly_before(old.valid_from, new.valid_from):
                    out.supersedes.append((new.id, old.id))
    return out


__all__ = [
    "CURRENT", "AcrossLinks", "LinkRow", "RecordStatus", "SLOT_SEP", "STATUSES", "SlotRow", "Status", "day", "derive_status",
    "links_across", "parse_slot", "slot_key", "slot_subject", "strictly_before", "value_key",
]
