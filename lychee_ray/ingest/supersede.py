"""Which earlier records a segment's records replace or contradict, decided at write time.

A conversation's slotted records (core/currency.py) are kept as a :class:`SlotState`: the current
records of each slot, replayed from the stored records and their links, so an append or an
incremental build continues exactly where a one-shot build would be. Per encoded segment:

* before the call, :meth:`SlotState.candidates` picks the current records of the slots the
  segment's turns mention (``encoder.currency``); the ``openai`` encoder shows them in the
  reference context under labels (:mod:`~lychee_ray.ingest.encode.candidates`) and its records name
  the labels they replace (``replaces``) or contradict (``contradicts``);
* after the call, :meth:`SlotState.link` normalises each record's slot, value and ``valid_from``
  and writes its links on the record itself (``supersedes``, ``conflicts_with``), never on the
  older one:

  - ``rules`` records link by structure: a record of a slot whose value differs from the slot's
    current records replaces them (a newer state of an object); one that ends its subject (a
    cancellation, ``RecordDraft.ends``) replaces every current record of the subject;
  - ``openai`` records link as the reply says, validated: a label that was not a candidate, or a
    candidate of another slot than the record's, is dropped and counted (``QualityCounts.links``);
  - the values a person states, and an assistant states to its user, of either backend, are read
    from each record's text into statements of value, put into slots by the meaning of their
    subjects and linked (:mod:`~lychee_ray.ingest.value_slots`);
  - a person's denial ("I've never ...") and an earlier statement that says it happened conflict
    (:mod:`~lychee_ray.ingest.text_links`).

Records of a segment are linked in the order of the turns they come from, so a lookup and the
change after it in one segment link as they would across two.
"""

from __future__ import annotations

from lychee_ray.names import RULES_BACKEND

from dataclasses import dataclass
from collections.abc import Iterable, Sequence

from lychee_ray.config import CurrencyConfig
from lychee_ray.core.conversation import Conversation
from lychee_ray.core.currency import parse_slot, slot_subject, value_key
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import MemoryRecord, normalise_type
from lychee_ray.ingest.encode.base import EncodeRequest, RecordDraft, SlotCandidate, SegmentTurn
from lychee_ray.ingest.text_links import SharedLists, StatementIndex
from lychee_ray.ingest.value_slots import EmbedFn, ValueSlots
from lychee_ray.text.dates import iso_day
from lychee_ray.text.lexical import lexical_terms

LABEL_PREFIX = "c"  # candidate labels: c1, c2, ...


@dataclass
class _Entry:
    """A current record of a slot."""

    record_id: str
    slot: str
    value: str | None
    text: str
    valid_from: str | None


class SlotState:
    """The current records of one conversation's slots (see the module doc)."""

    def __init__(self, statements: StatementIndex | None = None, speakers: dict[str, str] | None = None,
                 values: ValueSlots | None = None) -> None:
        self.current: SharedLists[str, _Entry] = SharedLists()  # slot -> its current records, oldest first
        self._slot_of: dict[str, str] = {}  # record id -> the slot it was made current in (what a link drops)
        # rules: what people said, for links from denial cues (None: off)
        self.statements = statements
        self.values = values  # slots of stated values (None: off)
        self.speakers = speakers or {}  # turn id -> speaker, for the turns of role user
        self.assistant_turns: set[str] = set()  # ids of the turns of role assistant
        self.heard = 0  # the conversation's turns :meth:`hear` has taken into ``speakers``

    @classmethod
    def after(cls, records: Iterable[MemoryRecord], conv: Conversation, cfg: CurrencyConfig) -> SlotState:
        """:meth:`of` ``records`` of ``conv`` (stored, with their links): what people said is indexed
        when ``cfg.text_cues``, stated values when ``cfg.statements``, each turn's speaker heard from
        ``conv``."""
        state = cls(StatementIndex(cfg) if cfg.text_cues else None, values=ValueSlots(cfg) if cfg.statements else None)
        state.hear(conv)
        state.absorb(records)
        return state

    def hear(self, conv: Conversation) -> None:
        """Take the speakers of ``conv``'s turns after the ones heard already (statements are read
        only from what people said and an assistant said to them): the new turns of an increment,
        not the conversation."""
        if self.statements is not None or self.values is not None:
            for *_, t in conv.iter_turns_from(self.heard):
                if t.role == "user":
                    self.speakers[t.turn_id] = t.speaker
                elif t.role == "assistant":
                    self.assistant_turns.add(t.turn_id)
        self.heard = conv.num_turns

    def copy(self) -> SlotState:
        """An independent copy (an appending process keeps the state of the stored final segments and
        continues each increment from a copy of it)."""
        out = SlotState(self.statements.copy() if self.statements is not None else None, dict(self.speakers),
                        self.values.copy() if self.values is not None else None)
        out.current, out._slot_of = self.current.copy(), dict(self._slot_of)
        out.assistant_turns = set(self.assistant_turns)
        out.heard = self.heard
        return out

    @classmethod
    def of(cls, records: Iterable[MemoryRecord], statements: StatementIndex | None = None,
           speakers: dict[str, str] | None = None, values: ValueSlots | None = None) -> SlotState:
        """The state after ``records`` (stored, with their links): a slotted record is current
        unless a record names it in ``supersedes``; replayed in two passes, so the order of the
        records within a segment does not matter. ``statements``: an empty index to fill with what
        people said (``speakers``: the speaker of each turn of role user), for the denial cues of the
        records to come; ``values``: empty value slots to fill."""
        state = cls(statements, speakers, values)
        state.absorb(records)
        return state

    def absorb(self, records: Iterable[MemoryRecord]) -> None:
        """Take stored records (a reused segment's) into the state with the links they carry."""
        recs = list(records)
        gone = {old for r in recs for old in r.supersedes}
        if gone:
            self._drop(gone)
        for r in recs:
            if r.slot and r.record_id not in gone:
                self._current(r)
            speaker = self._said_by(r)
            if self.statements is not None and speaker is not None:
                self.statements.add(r, speaker)
        if self.values is not None:
            self.values.absorb(recs, self._owner)

    def _said_by(self, r: MemoryRecord) -> str | None:
        """The one speaker whose user-role turns ``r`` comes from, else None."""
        who = {self.speakers.get(t) for t in r.source_turn_ids}
        return next(iter(who)) if len(who) == 1 and None not in who else None

    def _owner(self, r: MemoryRecord) -> tuple[str, bool] | None:
        """Whose value statements ``r``'s are, and whether an assistant said them: a person's own
        turns; an assistant's reply belongs to the conversation's one person. None: a tool's result,
        shared code or a table, a condensed answer citing the person's turn too, several people."""
        if r.artifact is not None or not r.source_turn_ids:
            return None
        said = self._said_by(r)
        if said is not None:
            return said, False
        src = set(r.source_turn_ids)
        if not src & self.assistant_turns or src & set(self.speakers):
            return None  # a tool's, or a condensed answer (its person's statements are in the person's records)
        people = set(self.speakers.values())
        if len(people) != 1 or src - self.assistant_turns:
            return None
        return next(iter(people)), True

    async def prepare(self, records: Sequence[MemoryRecord], embed: EmbedFn) -> None:
        """Before :meth:`link`: read the statements of value of ``records`` that have an owner and
        embed their subjects (``embed``: the record model)."""
        if self.statements is not None:
            said = [(r, sp) for r in records if not r.slot and (sp := self._said_by(r)) is not None]
            await self.statements.prepare(said, embed)
        if self.values is None:
            return
        mine = []
        for r in records:
            owner = None if r.slot else self._owner(r)
            if owner is not None:
                self.values.parse(r, *owner)
                mine.append(r)
        await self.values.prepare(mine, embed)

    def entries(self) -> list[_Entry]:
        return [e for es in self.current.values() for e in es]

    # -- before the call -------------------------------------------------------------------------
    def candidates(self, turns: Sequence[SegmentTurn], cfg: CurrencyConfig) -> list[SlotCandidate]:
        """Current records of the slots the turns mention: a slot whose subject or attribute shares
        a content term with the turns, best share first (newest first on ties), at most
        ``max_candidates``, labelled ``c1``, ``c2``, ..."""
        if cfg.max_candidates <= 0 or not self.current:
            return []
        said = set(lexical_terms(" ".join(t.content for t in turns)))
        scored: list[tuple[float, int, _Entry]] = []
        for i, e in enumerate(self.entries()):
            terms = set(lexical_terms(e.slot))
            hit = len(terms & said)
            if hit:
                scored.append((hit / len(terms), i, e))
        scored.sort(key=lambda x: (-x[0], -x[1]))
        return [SlotCandidate(label=f"{LABEL_PREFIX}{n + 1}", record_id=e.record_id, slot=e.slot, value=e.value,
                              text=e.text, valid_from=e.valid_from)
                for n, (_, _, e) in enumerate(scored[: cfg.max_candidates])]

    # -- after the call --------------------------------------------------------------------------
    def link(self, records: list[MemoryRecord], drafts: Sequence[RecordDraft], request: EncodeRequest, backend: str,
             quality: QualityCounts) -> None:
        """Normalise the slot fields of a segment's ``records`` and write their links (in place),
        then take them into the state. ``drafts``: the reply's drafts the records were made from
        (matched by type and text)."""
        by_key: dict[tuple[str, str], RecordDraft] = {}
        for d in drafts:
            rtype = normalise_type(d.type)
            if rtype is not None:
                by_key.setdefault((rtype, " ".join(d.text.split())), d)
        turn_at = {t.turn_id: t.index for t in request.turns}
        dates = {t.turn_id: t.session_date for t in request.turns}
        labels = {c.label: c for c in request.candidates}
        ordered = sorted(records, key=lambda r: (max((turn_at.get(t, -1) for t in r.source_turn_ids), default=-1), r.ordinal))
        for r in ordered:
            draft = by_key.get((r.type, r.text))
            _normalise(r, dates)
            if draft is not None:
                if backend == RULES_BACKEND:
                    self._link_by_structure(r, draft, quality)
                elif self._link_declared(r, draft, labels, quality):
                    _normalise(r, dates)  # the record took the slot of a candidate it named
                had = r.slot
                owner = self._owner(r) if self.values is not None and r.statements else None
                if owner is not None:  # the values it states, slotted by meaning
                    self.values.link(r, *owner, quality)  # type: ignore[union-attr]
                speaker = self._said_by(r)
                if self.statements is not None and speaker is not None:
                    # a denial of what a person said
                    self.statements.link(r, speaker, quality)
                if r.slot != had:
                    _normalise(r, dates)
            self._take(r)

    def _link_by_structure(self, r: MemoryRecord, d: RecordDraft, quality: QualityCounts) -> None:
        if not r.slot:
            return
        if d.ends:
            subject = slot_subject(r.slot)
            old = [e for e in self.entries() if slot_subject(e.slot) == subject]
        else:
            old = [e for e in self.current.get(r.slot) if e.value != r.slot_value and e.value is not None
                   and r.slot_value is not None]
        if old:
            r.supersedes = list(dict.fromkeys([*r.supersedes, *(e.record_id for e in old)]))
            quality.link("supersedes", len(old))

    def _link_declared(self, r: MemoryRecord, d: RecordDraft, labels: dict[str, SlotCandidate],
                       quality: QualityCounts) -> bool:
        """Links as the reply names them; True when the record took a candidate's slot."""
        named: list[tuple[str, SlotCandidate]] = []
        for kind, refs in (("supersedes", d.replaces), ("conflicts", d.contradicts)):
            for ref in dict.fromkeys(x.strip() for x in refs if x and x.strip()):
                c = labels.get(ref) or labels.get(f"{LABEL_PREFIX}{ref}")  # "3" for "c3"
                if c is None:
                    quality.link("dropped_unknown")
                else:
                    named.append((kind, c))
        if not named:
            return False
        adopted = r.slot is None
        if adopted:  # the reply named what it replaces but no slot: the candidate's is the record's
            r.slot = named[0][1].slot
        for kind, c in named:
            if c.slot != r.slot:
                quality.link("dropped_other_slot")
                continue
            target = r.supersedes if kind == "supersedes" else r.conflicts_with
            if c.record_id not in target:
                target.append(c.record_id)
                quality.link(kind)
        return adopted

    def _drop(self, gone: set[str]) -> None:
        # only the slots the gone records were current in (not every slot: a link costs its own slots)
        for slot in dict.fromkeys(self._slot_of[g] for g in gone if g in self._slot_of):
            if slot not in self.current:
                continue
            kept = [e for e in self.current[slot] if e.record_id not in gone]
            if kept:
                self.current.put(slot, kept)
            else:
                self.current.pop(slot)

    def _take(self, r: MemoryRecord) -> None:
        """Apply ``r``'s links to the state and add it as a current record of its slot."""
        if r.supersedes:
            self._drop(set(r.supersedes))
        if r.slot:
            self._current(r)

    def _current(self, r: MemoryRecord) -> None:
        """Add ``r`` as a current record of its slot."""
        assert r.slot is not None
        self.current.append(r.slot, _Entry(r.record_id, r.slot, r.slot_value, r.text, r.valid_from))
        self._slot_of[r.record_id] = r.slot


def _normalise(r: MemoryRecord, dates: dict[str, str | None]) -> None:
    """The record's slot and value as :mod:`~lychee_ray.core.currency` normalises them; its
    ``valid_from`` an ISO day the draft gave, else the time of its latest source turn (the day the
    statement was made). A record without a slot keeps none of the three."""
    r.slot = parse_slot(r.slot)
    if r.slot is None:
        r.slot_value = r.valid_from = None
        return
    r.slot_value = value_key(r.slot_value)
    given = iso_day(r.valid_from) if r.valid_from else None
    if given is not None:
        r.valid_from = given.isoformat()
    else:
        said = [dates.get(t) for t in r.source_turn_ids]
        r.valid_from = max((s for s in said if s), default=None) or r.created_at


__all__ = ["LABEL_PREFIX", "SlotState"]
