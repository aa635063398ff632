"""Links between what a user said, from explicit cues in the words (docs/current-memory.md).

Chat statements carry no structure, so two of them are linked only where the text says so
(:mod:`lychee_ray.text.change_cues`) — every statement of the ``rules`` backend, and one an LLM
backend's model left without a slot (ingest/supersede.py):

* a statement that **changes a value** ("my test coverage has recently improved to 78%") replaces
  the earlier statements of the best-matching earlier value of the same kind with another value and
  enough words in common around it ("I've reached 65% test coverage"): the new record names the
  slot the two share (``user · <shared words> <unit>``) and supersedes the old ones;
* a statement that **says a count again with another number** ("I secured 5 interviews for
  producer roles" after "I only secured 3 interviews for producer roles") does the same without a
  change word, with more words in common (``count_min_shared``) and never over a plan or a goal;
* a **denial** ("I've never submitted my cover letter to Greg") and a statement that says the denied
  thing happened ("I've submitted my cover letter to Greg for review") conflict, whichever came
  first: the newer one names the other in ``conflicts_with``. It must say the denied verb too
  ("never written Flask routes" against "reviewed Flask routing" is no contradiction). A statement
  of a plan, a wish or an attempt ("I want to submit ...", "I'm trying to submit ...") affirms
  nothing. A value said as a bound ("under 200ms") is never replaced; a count never replaces, or is
  replaced as, a goal ("my goal of 10 problems").

Only what people say is read (records all of whose source turns are one speaker's turns of role
``user``: the user of an assistant chat, each person of a two-person chat; not a record describing a
code block, table or document they shared), one speaker at a time,
and the slot is that speaker's (``user · …``, ``caroline · …``); a change links to the statements of
the value it replaces, a denial to one statement (the best match, the latest on ties), so a misread
cue costs one link, never a slot's history.
"""

from __future__ import annotations

import re
from collections.abc import Hashable, Iterator, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from lychee_ray.config import CurrencyConfig
from lychee_ray.core.currency import slot_key
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import MemoryRecord
from lychee_ray.text.change_cues import (PLAN, ValueMention, changed_values, counted_values, denial, denied_verb,
                                         replaced_by, same_day_other_time, same_unit, says_done, value_mentions)
from lychee_ray.text.lexical import lexical_terms

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

SUBJECT = "user"  # whose statements these are, when the speaker has no name
_ATTEMPT = re.compile(r"\b(?:trying|try|tries|tried|attempting)\s+to\b", re.I)  # an attempt says nothing happened
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
    mentions: list[ValueMention]
    denied: frozenset[str]
    terms: frozenset[str]
    affirms: bool  # no plan, wish or attempt in it (what a denial's verb is not checked against)
    text: str
    turns: frozenset[str]
    verb: str | None = None  # a denial's verb
    plan: bool = False  # it says a plan, a wish or an attempt


class _SpeakerStatements:
    """One speaker's earlier statements of one conversation, in order (see the module doc)."""

    def __init__(self, cfg: CurrencyConfig, subject: str) -> None:
        self.cfg = cfg
        self.subject = subject
        self.statements: list[_Statement] = []
        self._denials: list[_Statement] = []
        self._df: dict[str, int] = {}  # statements so far holding each word
        # positions in ``statements`` by (value kind, a word around the value) and by word: a change or a
        # denial is matched only against statements sharing a word with it (a scan of them all per new
        # statement made a conversation's links quadratic in its length)
        self._by_value: SharedLists[tuple[str, str], int] = SharedLists()
        self._by_term: SharedLists[str, int] = SharedLists()

    def copy(self) -> _SpeakerStatements:
        """An independent copy: the statements (never changed) and the position lists are shared, the
        lists and counts copied flat (no text is analysed again)."""
        out = _SpeakerStatements(self.cfg, self.subject)
        out.statements, out._denials, out._df = list(self.statements), list(self._denials), dict(self._df)
        out._by_value, out._by_term = self._by_value.copy(), self._by_term.copy()
        return out

    def add(self, r: MemoryRecord, st: _Statement | None = None) -> None:
        """Remember a stored statement of the user's (``st``: its analysis, when :meth:`link` made it)."""
        st = st or self._statement(r)
        pos = len(self.statements)
        self.statements.append(st)
        for t in st.terms:
            self._df[t] = self._df.get(t, 0) + 1
            self._by_term.append(t, pos)
        for kw in {(m.kind, w) for m in st.mentions for w in m.context}:
            self._by_value.append(kw, pos)
        if st.denied:
            self._denials.append(st)

    def _statement(self, r: MemoryRecord) -> _Statement:
        """What the cues read in ``r``'s text, read once (a new statement is linked, then remembered)."""
        denied = denial(r.text, self.subject)
        plan = bool(PLAN.search(r.text) or _ATTEMPT.search(r.text))
        return _Statement(r.record_id, value_mentions(r.text, self.cfg.cue_window), denied,
                          frozenset(lexical_terms(r.text)), not denied and not plan, r.text,
                          frozenset(r.source_turn_ids), denied_verb(r.text, self.subject) if denied else None,
                          plan)

    def _specific(self, words: frozenset[str]) -> frozenset[str]:
        """``words`` without the conversation's everyday ones (in more than ``cue_max_df`` of the
        user's statements so far: the project's name, its usual verbs): they tell no two things apart."""
        n = len(self.statements)
        if n < self.cfg.cue_min_statements:
            return words
        return frozenset(w for w in words if self._df.get(w, 0) <= self.cfg.cue_max_df * n)

    def link(self, r: MemoryRecord, quality: QualityCounts) -> None:
        """Write ``r``'s links from its cues (it must be a statement of the user's), then remember it."""
        st = self._statement(r)
        if r.slot is None:
            self._change(r, quality)
        if r.slot is None:
            self._contradiction(r, st, quality)
        self.add(r, st)

    def _change(self, r: MemoryRecord, quality: QualityCounts) -> None:
        cfg = self.cfg
        changed = [(v, cfg.change_min_shared + (0 if v.kind == "num" and v.unit[:1].isalpha() else 1), False)
                   for v in changed_values(r.text, cfg.cue_window, cfg.change_gap)]
        said = {v.text for v, _, _ in changed}
        if cfg.count_min_shared:  # a count said again with another number: a newer count, if more words agree
            changed += [(v, cfg.count_min_shared, True) for v in counted_values(r.text, cfg.cue_window)
                        if v.text not in said and not v.hedge]
        for new, need, counted in changed:
            new = ValueMention(new.kind, new.unit, new.text, self._specific(new.context), new.hedge)
            best: tuple[int, int, ValueMention, frozenset[str]] | None = None
            # (every match shares a word around the value: ``need`` >= 1)
            candidates = sorted({i for w in new.context for i in self._by_value.get((new.kind, w))})
            for i in candidates:
                st = self.statements[i]
                if not self._may_replace(r, st, new):
                    continue
                for old in st.mentions:
                    # a bound ("under 200ms") is no value to replace; a count replaces what was, not a goal
                    if old.hedge == "bound" or (counted and old.hedge):
                        continue
                    shared = replaced_by(new, old, self._need(new, old, need, counted))
                    if shared and (best is None or (len(shared), i) > best[:2]):
                        best = (len(shared), i, old, shared)
            if best is None:
                continue
            # the old value, and every earlier statement of it (a restatement is replaced too)
            old_value = best[2]
            ids = [st.record_id for st in (self.statements[i] for i in candidates) if self._may_replace(r, st, new)
                   and any(m.text == old_value.text and m.hedge != "bound" and not (counted and m.hedge)
                          and replaced_by(new, m, self._need(new, m, need, counted)) for m in st.mentions)]
            words = _surface(r.text, [*sorted(best[3])[:_SLOT_WORDS], *(new.unit.split() or [new.kind])])
            r.slot, r.slot_value = slot_key(self.subject, " ".join(words)), new.text
            r.supersedes = list(dict.fromkeys(ids))
            quality.link("supersedes", len(r.supersedes))
            return

    def _need(self, new: ValueMention, old: ValueMention, need: int, counted: bool) -> int:
        """Shared words a change needs: fewer for a time moved within its day (the day itself says
        which appointment it is; ``same_day_min_shared``)."""
        if not counted and same_day_other_time(new, old):
            return min(need, self.cfg.same_day_min_shared)
        return need

    @staticmethod
    def _may_replace(r: MemoryRecord, st: _Statement, new: ValueMention) -> bool:
        """``st`` is an earlier statement ``new`` may replace: of another message (one message lists
        values, it does not update itself) and not already saying the new value (a restatement)."""
        return not (st.turns & set(r.source_turn_ids)) and \
            not any(m.text == new.text and same_unit(m.unit, new.unit) for m in st.mentions)

    def _contradiction(self, r: MemoryRecord, new: _Statement, quality: QualityCounts) -> None:
        if new.denied:  # the best-matching earlier statement that says it happened
            best: tuple[tuple[int, int], _Statement] | None = None
            # (a statement it covers shares ``denial_min_shared`` >= 1 of its words)
            for i in sorted({i for t in new.denied for i in self._by_term.get(t)}):
                st = self.statements[i]
                if not st.denied and self._covers(st.terms, new.denied) and self._affirms(st.text, st.affirms, new.verb):
                    key = (len(st.terms & new.denied), i)
                    if best is None or key > best[0]:
                        best = (key, st)
            if best is not None:
                self._conflict(r, best[1], new.denied & best[1].terms, "no", quality)
            return
        hits = [st for st in self._denials if self._covers(new.terms, st.denied)
                and self._affirms(r.text, not new.plan, st.verb)]
        if hits:  # it says happened what the latest such denial denied
            self._conflict(r, hits[-1], new.terms & hits[-1].denied, "yes", quality)

    def _affirms(self, text: str, affirms: bool, verb: str | None) -> bool:
        """A statement says what a denial of ``verb`` denies happened: with ``denial_same_verb`` it
        says that verb outside a question, a plan or an attempt ("reviewed Flask routing" does not
        say "never written Flask routes" is false; "can you help me submit it" says nothing);
        otherwise it holds no plan, wish or attempt at all (``affirms``)."""
        if not self.cfg.denial_same_verb:
            return affirms
        return verb is not None and says_done(text, verb)

    def _covers(self, terms: frozenset[str], denied: frozenset[str]) -> bool:
        shared = terms & denied
        return bool(denied) and len(shared) >= self.cfg.denial_min_shared and \
            len(shared) >= self.cfg.denial_min_share * len(denied)

    def _conflict(self, r: MemoryRecord, other: _Statement, shared: frozenset[str], value: str,
                  quality: QualityCounts) -> None:
        r.slot = slot_key(self.subject, " ".join(_surface(r.text, sorted(shared)[:_SLOT_WORDS])))
        r.slot_value = value
        r.conflicts_with = [other.record_id]
        quality.link("conflicts")


class StatementIndex:
    """Each speaker's statements of one conversation (two people's "never" are no contradiction):
    :meth:`add` a stored statement, :meth:`link` a new one (see the module doc)."""

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

    def link(self, r: MemoryRecord, speaker: str, quality: QualityCounts) -> None:
        if r.artifact is None:  # a record describing shared code or a table quotes words, it states nothing
            self._of(speaker).link(r, quality)


__all__ = ["SharedLists", "StatementIndex"]
