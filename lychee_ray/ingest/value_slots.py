"""Slots of stated values, by meaning, and the links between them, decided at write time.

Each record a person's turns (or an assistant's reply to its one user) were made into gets the
statements of value its text makes (:func:`~lychee_ray.text.values.parse_values`, stored as
``MemoryRecord.statements``). A statement joins a slot of its owner (the speaker; an assistant's
statements belong to the user it answers) when the **cosine of their subject phrases' embeddings**
(the record model) is at least ``encoder.currency.slot_min_similarity``, with the same kind and a
compatible unit; else it opens a slot ``<owner> · <subject>``. Within a slot:

* a statement that is *done* or *now* holds; one with another value than the slot's holders, said
  as a new value or what holds now ("went up to", "moved to", "now": ``ValueStatement.changed``),
  **supersedes** them (the link is written on the newer statement and its record, never on the
  older one); one with the same value, or said plainly, holds beside them and links nothing;
* plans, goals, questions and denials join the slot for its history but never replace a value;
* a message does not update itself: statements of the same turn never replace each other;
* an assistant's statement never replaces what a person said (it echoes, or it errs).

The record takes the slot and value of its first holding statement and supersedes the records of
the statements its statements supersede, so every reader of record links sees the change.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from lychee_ray.config import CurrencyConfig
from lychee_ray.core.currency import slot_key
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import MemoryRecord
from lychee_ray.core.statements import COUNT, DURATION, MONEY, ValueStatement, statement_id, statement_record
from lychee_ray.text.values import parse_values

EmbedFn = Callable[[Sequence[str]], Awaitable[np.ndarray]]


@dataclass
class _Holder:
    sid: str
    value: str
    assistant: bool
    turns: frozenset[str]


@dataclass
class _Slot:
    key: str
    owner: str
    subject: str  # the meaning (subject and context) of its first statement, which its vector embeds
    kind: str
    unit: str
    holders: list[_Holder] = field(default_factory=list)


def _unit_base(kind: str, unit: str) -> str:
    """What two units must share to be one slot's: a currency without its rate ("usd" of
    "usd/month": a rent said without "a month" is the same rent), a measure's unit."""
    if kind == MONEY:
        return unit.partition("/")[0]
    if kind == DURATION:
        return ""
    if kind == COUNT and unit.isalpha() and len(unit) > 3:
        return ""  # a counted noun: its subject phrase holds it
    return unit


@functools.lru_cache(maxsize=64)
def _about(owner: str) -> re.Pattern[str]:
    """Words that name ``owner`` in an assistant's sentence (its name, "user", "you")."""
    names = {re.escape(owner.strip()), "user", "you", "your"} - {""}
    return re.compile(rf"\b(?:{'|'.join(sorted(names))})\b", re.I)


class ValueSlots:
    """One conversation's value slots (see the module doc): :meth:`absorb` stored records,
    :meth:`prepare` then :meth:`link` new ones."""

    def __init__(self, cfg: CurrencyConfig) -> None:
        self.cfg = cfg
        self.slots: dict[str, _Slot] = {}
        self._by_group: dict[tuple[str, str, str], list[str]] = {}  # (owner, kind, unit base) -> slot keys
        self._matrix: dict[tuple[str, str, str], np.ndarray] = {}  # the group's slot subject vectors, stacked
        self._vectors: dict[str, np.ndarray] = {}  # subject phrase -> its unit vector
        self._unembedded: set[str] = set()  # slot subjects without a vector yet (slots replayed from stored records)
        self._gone: set[str] = set()  # statement ids superseded
        # record id -> its holding statements not yet superseded: a record is superseded with its last one
        self._holding: dict[str, set[str]] = {}

    def copy(self) -> ValueSlots:
        out = ValueSlots(self.cfg)
        out.slots = {k: _Slot(s.key, s.owner, s.subject, s.kind, s.unit, list(s.holders)) for k, s in self.slots.items()}
        out._by_group = {k: list(v) for k, v in self._by_group.items()}
        out._matrix = dict(self._matrix)  # (arrays are replaced, never changed in place)
        out._vectors = self._vectors  # phrase vectors never change: shared
        out._unembedded = set(self._unembedded)
        out._gone = set(self._gone)
        out._holding = {k: set(v) for k, v in self._holding.items()}
        return out

    def _meaning(self, st: ValueStatement) -> str:
        return st.meaning if self.cfg.slot_context else st.subject

    # -- stored records ----------------------------------------------------------------------------
    def absorb(self, records: Iterable[MemoryRecord], owner_of: Callable[[MemoryRecord], tuple[str, bool] | None]) -> None:
        """Take stored records' statements into the slots with the links they carry."""
        recs = list(records)
        for r in recs:
            for st in r.statements:
                self._gone.update(st.supersedes)
        for r in recs:
            who = owner_of(r)
            for i, st in enumerate(r.statements):
                if not st.slot:
                    continue
                slot = self._slot(st.slot, who[0] if who else "", st)
                slot.holders = [h for h in slot.holders if h.sid not in self._gone]
                sid = statement_id(r.record_id, i)
                if st.holds and sid not in self._gone:
                    slot.holders.append(_Holder(sid, st.value, bool(who and who[1]), frozenset(r.source_turn_ids)))
                    self._holding.setdefault(r.record_id, set()).add(sid)

    def _slot(self, key: str, owner: str, st: ValueStatement) -> _Slot:
        got = self.slots.get(key)
        if got is None:
            got = self.slots[key] = _Slot(key, owner, self._meaning(st), st.kind, st.unit)
            self._by_group.setdefault((owner, st.kind, _unit_base(st.kind, st.unit)), []).append(key)
            if got.subject not in self._vectors:
                self._unembedded.add(got.subject)  # a replayed slot: embedded by the next prepare
        return got

    # -- new records ---------------------------------------------------------------------------------
    def parse(self, r: MemoryRecord, owner: str, assistant: bool) -> None:
        """Fill ``r.statements`` from its text (unless the encoder gave them); of an assistant's
        text only the sentences that speak of its person ("your budget", "the user's budget": an
        example's figures are no statement about anyone)."""
        if not r.statements:
            about = _about(owner) if assistant else None
            r.statements = [ValueStatement(subject=v.subject, kind=v.kind, unit=v.unit, value=v.value, said=v.said,
                                           context=v.context, changed=v.changed, modality=v.modality)
                            for v in parse_values(r.text, self.cfg.subject_words, about, self.cfg.context_words)]

    async def prepare(self, records: Sequence[MemoryRecord], embed: EmbedFn) -> None:
        """Embed the subject phrases :meth:`link` will compare: the new statements' and the slots'."""
        want = {self._meaning(st) for r in records for st in r.statements} | self._unembedded
        self._unembedded = set()
        todo = sorted(w for w in want if w and w not in self._vectors)
        if not todo:
            return
        vecs = np.asarray(await embed(todo), dtype=np.float32)
        norms = np.linalg.norm(vecs, axis=1, keepdims=True)
        vecs = (vecs / np.where(norms > 0, norms, 1)).astype(np.float32)
        self._vectors.update(zip(todo, vecs, strict=True))

    def _similar(self, owner: str, st: ValueStatement, turns: frozenset[str]) -> _Slot | None:
        """The slot of ``owner``, ``st``'s kind and unit whose subject is nearest ``st``'s in meaning,
        if near enough (one matrix product over the group's slots); never a slot a statement of the
        same turns holds (one message lists values: "3 card draws and 5 dice rolls" are two slots)."""
        group = (owner, st.kind, _unit_base(st.kind, st.unit))
        keys = self._by_group.get(group, [])
        v = self._vectors.get(self._meaning(st))
        if v is None or not keys:
            return None
        m = self._matrix.get(group)
        if m is None or len(m) != len(keys):
            dim = len(v)
            m = np.stack([self._vectors.get(self.slots[k].subject, np.zeros(dim, np.float32)) for k in keys])
            self._matrix[group] = m
        sims = m @ v
        for i in np.argsort(-sims):
            if float(sims[i]) < self.cfg.slot_min_similarity:
                return None
            slot = self.slots[keys[int(i)]]
            if not any(h.turns & turns for h in slot.holders):
                return slot
        return None

    def link(self, r: MemoryRecord, owner: str, assistant: bool, quality: QualityCounts) -> None:
        """Slot ``r``'s statements and write their links (see the module doc); ``owner``: whose
        slots they are; ``assistant``: an assistant said them."""
        turns = frozenset(r.source_turn_ids)
        replaced: list[str] = []
        for i, st in enumerate(r.statements):
            slot = self._similar(owner, st, turns)
            if slot is None:  # a slot of its own: the same words of another meaning are another slot
                key = slot_key(owner, st.subject)
                n = 1
                while key is not None and key in self.slots:
                    n += 1
                    key = slot_key(owner, f"{st.subject} ({n})")
                if key is None:
                    continue
                slot = self._slot(key, owner, st)
            st.slot = slot.key
            if not st.holds:
                continue
            sid = statement_id(r.record_id, i)
            differing = [h for h in slot.holders if h.value != st.value and not (h.turns & turns)]
            if assistant and any(not h.assistant for h in differing):
                continue  # an assistant's other value of what a person said: an echo gone wrong, not a change
            # only a value said as new or holding now replaces ("went up to", "now"); another one said
            # plainly may be a recap or an aside, and holds beside them
            other_values = differing if st.changed else []
            if other_values:
                st.supersedes = [h.sid for h in other_values]
                self._gone.update(st.supersedes)
                replaced += st.supersedes
                quality.link("supersedes", len(st.supersedes))
            slot.holders = [h for h in slot.holders if h not in other_values]
            slot.holders.append(_Holder(sid, st.value, assistant, turns))
            self._holding.setdefault(r.record_id, set()).add(sid)
        ended = []  # records whose every holding statement is replaced now: superseded as a whole
        for s in replaced:
            rid = statement_record(s)
            left = self._holding.get(rid)
            if left is not None:
                left.discard(s)
                if not left and rid != r.record_id:
                    ended.append(rid)
                    del self._holding[rid]
        if ended:
            r.supersedes = list(dict.fromkeys([*r.supersedes, *ended]))
        first = next((st for st in r.statements if st.holds and st.slot), None)
        if first is not None and r.slot is None:
            r.slot, r.slot_value = first.slot, first.said  # (shown in marks as said: "52 sources")


__all__ = ["ValueSlots"]
