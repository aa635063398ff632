"""Denials and what they deny, matched by meaning (docs/current-memory.md).

A **denial** ("I've never submitted my grant proposal to Ines") and a statement of the same person
that says the denied thing happened or is being done ("I've submitted my grant proposal to Ines",
"I'm trying to submit my grant proposal to Ines") conflict, whichever came first: the newer one names
the other in ``conflicts_with``. The two are the same event when the cosine of the denied phrase's
embedding and the statement's (the record model) is at least ``encoder.currency.denial_min_similarity``;
the statements compared are those sharing ``denial_min_shared`` of the denied phrase's words (an
index, so a conversation's links stay linear in its length) and, with ``denial_same_verb``, saying
its verb as done or being done ("never written Rust macros" against "I wrote a route", not "I
reviewed routing tutorials"). A question or a plan ("can you help me
submit it", "I want to submit it") says nothing happened. Only what people say is read (records all
of whose source turns are one speaker's turns of role ``user``, not a record describing shared code
or a table), one speaker at a time; a denial links to the few statements nearest in meaning
(``denial_max_links``), a later statement to the one denial it answers. Changed values are linked by :mod:`lychee_ray.ingest.value_slots`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import numpy as np

from lychee_ray.config import CurrencyConfig
from lychee_ray.core.currency import slot_key
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import MemoryRecord
from lychee_ray.text.denials import PLAN, denial, denied_text, denied_verb, says_done
from lychee_ray.text.lexical import lexical_terms
from lychee_ray.text.values import is_question

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")
EmbedFn = Callable[[Sequence[str]], Awaitable[np.ndarray]]

SUBJECT = "user"  # whose statements these are, when the speaker has no name
_SLOT_WORDS = 3  # shared words a text slot is named by


def _surface(text: str, stems: list[str]) -> list[str]:
    """The words of ``text`` the lexical ``stems`` come from ("merg" -> "merged"), lower case, for a
    slot a reader can read; a stem not found stays as it is."""
    found: dict[str, str] = {}
    for w in re.findall(r"[A-Za-z0-9][\w'-]*", text):
        t = lexical_terms(w)
        if len(t) == 1 and t[0] in stems:
            found.setdefault(t[0], w.lower())
    return [found.get(x, x) for x in stems]


class SharedLists(Generic[K, V]):
    """A map of keys to lists whose :meth:`copy` costs a copy of the map, not of its lists: the two
    share the lists, and whichever first changes a shared list changes its own copy of it (copy on
    write, per key). An appending process keeps the index of a conversation's stored statements and
    links each increment's records in a copy, so the copy must not cost the conversation's length."""

    def __init__(self) -> None:
        self._lists: dict[K, list[V]] = {}
        self._own: set[K] = set()  # keys whose list no copy shares

    def get(self, key: K) -> Sequence[V]:
        return self._lists.get(key, ())

    def __getitem__(self, key: K) -> Sequence[V]:
        return self._lists[key]

    def __contains__(self, key: object) -> bool:
        return key in self._lists

    def __len__(self) -> int:
        return len(self._lists)

    def values(self) -> Iterator[Sequence[V]]:
        return iter(self._lists.values())

    def append(self, key: K, value: V) -> None:
        got = self._lists.get(key)
        if got is not None and key in self._own:
            got.append(value)
        else:
            self._lists[key] = [*(got or ()), value]
            self._own.add(key)

    def put(self, key: K, values: list[V]) -> None:
        """Set ``key``'s list to ``values`` (taken over: the caller keeps no reference to it)."""
        self._lists[key] = values
        self._own.add(key)

    def pop(self, key: K) -> None:
        self._lists.pop(key, None)
        self._own.discard(key)

    def copy(self) -> SharedLists[K, V]:
        out: SharedLists[K, V] = SharedLists()
        out._lists = dict(self._lists)
        self._own = set()  # every list is shared now: each side copies a list before changing it
        return out


@dataclass
class _Statement:
    record_id: str
    denied: frozenset[str]  # the words of what it denies (empty: no denial)
    denied_phrase: str
    terms: frozenset[str]
    affirms: bool  # no question, plan or denial in it: it can say a denied thing happened
    text: str
    verb: str | None = None  # a denial's verb (as verb_terms writes it)


def _unit(v: np.ndarray) -> np.ndarray:
    n = float(np.linalg.norm(v))
    return (v / n).astype(np.float32) if n > 0 else v.astype(np.float32)


class _SpeakerStatements:
    """One speaker's earlier statements of one conversation, in order (see the module doc)."""

    def __init__(self, cfg: CurrencyConfig, subject: str) -> None:
        self.cfg = cfg
        self.subject = subject
        self.statements: list[_Statement] = []
        self._denials: list[_Statement] = []
        # positions in ``statements`` by word: a denial is compared only with statements sharing its words
        self._by_term: SharedLists[str, int] = SharedLists()
        self.vectors: dict[str, np.ndarray] = {}  # text -> unit vector (phrases and statements compared)

    def copy(self) -> _SpeakerStatements:
        """An independent copy: the statements (never changed) and the position lists are shared, the
        lists copied flat (no text is analysed again)."""
        out = _SpeakerStatements(self.cfg, self.subject)
        out.statements, out._denials = list(self.statements), list(self._denials)
        out._by_term = self._by_term.copy()
        out.vectors = self.vectors  # (a text's vector never changes)
        return out

    def add(self, r: MemoryRecord, st: _Statement | None = None) -> None:
        """Remember a stored statement (``st``: its analysis, when :meth:`link` made it)."""
        st = st or self.statement(r)
        pos = len(self.statements)
        self.statements.append(st)
        for t in st.terms:
            self._by_term.append(t, pos)
        if st.denied:
            self._denials.append(st)

    def statement(self, r: MemoryRecord) -> _Statement:
        """What the cues read in ``r``'s text, read once."""
        denied = denial(r.text, self.subject)
        phrase = denied_text(r.text, self.subject) if denied else ""
        affirms = not denied and not PLAN.search(r.text) and not is_question(r.text)
        return _Statement(r.record_id, denied, phrase, frozenset(lexical_terms(r.text)), affirms, r.text,
                          denied_verb(r.text, self.subject) if denied else None)

    def _says(self, statement: _Statement, verb: str | None) -> bool:
        """``statement`` says the denied verb happened or is being done (``denial_same_verb``)."""
        return not self.cfg.denial_same_verb or verb is None or says_done(statement.text, verb, attempts=True)

    def _candidates(self, new: _Statement) -> list[_Statement]:
        """Earlier statements a new denial may deny, or earlier denials a new statement may contradict:
        those sharing ``denial_min_shared`` of the denied words, most shared first, at most ``denial_candidates``."""
        need = self.cfg.denial_min_shared
        if new.denied:
            pos = {i for t in new.denied for i in self._by_term.get(t)}
            got = [self.statements[i] for i in pos if self.statements[i].affirms
                   and len(self.statements[i].terms & new.denied) >= need and self._says(self.statements[i], new.verb)]
            got.sort(key=lambda st: (-len(st.terms & new.denied), -self.statements.index(st)))
        elif new.affirms:
            got = [d for d in self._denials if len(new.terms & d.denied) >= need and self._says(new, d.verb)]
            got.reverse()
        else:
            return []
        return got[: self.cfg.denial_candidates]

    def texts_to_embed(self, new: _Statement) -> list[str]:
        """What :meth:`link` of ``new`` will compare: its text or denied phrase, and its candidates'."""
        cands = self._candidates(new)
        if not cands:
            return []
        mine = new.denied_phrase if new.denied else new.text
        theirs = [c.text if new.denied else c.denied_phrase for c in cands]
        return [t for t in (mine, *theirs) if t not in self.vectors]

    def link(self, r: MemoryRecord, quality: QualityCounts) -> None:
        """Write ``r``'s conflict link (it must be a statement of the speaker's), then remember it."""
        st = self.statement(r)
        if r.slot is None:
            self._contradiction(r, st, quality)
        self.add(r, st)

    def _contradiction(self, r: MemoryRecord, new: _Statement, quality: QualityCounts) -> None:
        cands = self._candidates(new)
        mine = self.vectors.get(new.denied_phrase if new.denied else new.text)
        if not cands or mine is None:
            return
        near: list[tuple[float, int, _Statement]] = []
        for i, c in enumerate(cands):
            other = self.vectors.get(c.text if new.denied else c.denied_phrase)
            if other is not None and (sim := float(mine @ other)) >= self.cfg.denial_min_similarity:
                near.append((sim, -i, c))
        near.sort(key=lambda x: (x[0], x[1]), reverse=True)
        # a denial conflicts with the statements of the same event (the nearest few); a statement
        # with the one denial it answers
        picked = [c for _, _, c in near[: self.cfg.denial_max_links if new.denied else 1]]
        if picked:
            shared = (new.denied & picked[0].terms) if new.denied else (new.terms & picked[0].denied)
            self._conflict(r, picked, shared, "no" if new.denied else "yes", quality)

    def _conflict(self, r: MemoryRecord, others: list[_Statement], shared: frozenset[str], value: str,
                  quality: QualityCounts) -> None:
        r.slot = slot_key(self.subject, " ".join(_surface(r.text, sorted(shared)[:_SLOT_WORDS])))
        r.slot_value = value
        r.conflicts_with = [o.record_id for o in others]
        quality.link("conflicts", len(others))


class StatementIndex:
    """Each speaker's statements of one conversation (two people's "never" are no contradiction):
    :meth:`add` a stored statement, :meth:`prepare` then :meth:`link` a new one (see the module doc)."""

    def __init__(self, cfg: CurrencyConfig) -> None:
        self.cfg = cfg
        self._by: dict[str, _SpeakerStatements] = {}

    def _of(self, speaker: str) -> _SpeakerStatements:
        sp = self._by.get(speaker)
        if sp is None:
            sp = self._by[speaker] = _SpeakerStatements(self.cfg, speaker.strip() or SUBJECT)
        return sp

    def copy(self) -> StatementIndex:
        """An independent copy: an increment links its records in a copy of the index an appending
        process keeps of the stored statements."""
        out = StatementIndex(self.cfg)
        out._by = {k: v.copy() for k, v in self._by.items()}
        return out

    def add(self, r: MemoryRecord, speaker: str) -> None:
        if r.artifact is None:
            self._of(speaker).add(r)

    async def prepare(self, said: Sequence[tuple[MemoryRecord, str]], embed: EmbedFn) -> None:
        """Embed what linking ``said`` (records and their speakers, in order) will compare. Each
        record is compared with the statements stored before it; a record of the same batch that
        denies or affirms an earlier one of the batch is compared when it is linked (its texts are
        embedded here too: every text a batch record holds)."""
        want: dict[str, list[str]] = {}
        mine = [(speaker, self._of(speaker).statement(r)) for r, speaker in said if r.artifact is None]
        denied = {(speaker, t) for speaker, st in mine for t in st.denied}
        for speaker, st in mine:
            sp = self._of(speaker)
            want.setdefault(speaker, []).extend(sp.texts_to_embed(st))
            if st.denied:
                want[speaker].append(st.denied_phrase)
            elif st.affirms and sum((speaker, t) in denied for t in st.terms) >= self.cfg.denial_min_shared:
                want[speaker].append(st.text)  # a denial later in the batch may deny it
        for speaker, texts in want.items():
            sp = self._of(speaker)
            todo = list(dict.fromkeys(t for t in texts if t and t not in sp.vectors))
            if todo:
                vecs = np.asarray(await embed(todo), dtype=np.float32)
                sp.vectors.update((t, _unit(v)) for t, v in zip(todo, vecs, strict=True))

    def link(self, r: MemoryRecord, speaker: str, quality: QualityCounts) -> None:
        if r.artifact is None:  # a record describing shared code or a table quotes words, it states nothing
            self._of(speaker).link(r, quality)


__all__ = ["SharedLists", "StatementIndex"]
