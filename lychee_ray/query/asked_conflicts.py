"""Whether something happened, asked of a context that says both: the denial and what contradicts it marked.

A yes/no question ("Have I ever downloaded or used Zotero?") names what it asks about. When the
selected context holds a statement of the user that denies it ("I've never used any citation
management software, like Zotero") and another statement of the user, said as done, about the same
words of the question ("I just downloaded Zotero on March 2"), both lines end with ``[conflicts
with: <the other> (day)]`` (status ``conflicting``): the answer says they disagree rather than pick
one. The write side links such pairs only when the denied verb is said again ("never used" /
"used"); the question supplies the words that say the two are about one thing.

Conservative: both statements are the user's (an assistant's account is not a statement of what
the user did), a statement counts when ``query.current.denial_min_shared`` of the question's content
words are in what it denies (the chat's frame words too, where the question says them: "on any
projects") or, for the other, in its words (frame words aside; one of them also in the denial's
line); a clause that asks or plans ("can you help me use Zotero", "I want to use …", "I'll start
with …") says nothing happened, one that tries does ("I'm trying to set up a project using
Bootstrap": the user works with it). Of the statements before a denial, those saying its verb
happened come first ("I had to miss my writing session" against "never missed"), and a denial is
marked against at most ``query.current.conflict_statements`` of them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from lychee_ray.config import CurrentConfig
from lychee_ray.core.currency import day
from lychee_ray.core.status import CONFLICTING_STATUS, CURRENT_STATUS
from lychee_ray.query.evidence import Evidence
from lychee_ray.query.unit_lines import unit_lines
from lychee_ray.query.view import ConversationView
from lychee_ray.text.change_cues import FRAME_TERMS, denial, denied_verb, says_done
from lychee_ray.text.lexical import lexical_terms

_YES_NO = re.compile(r"^\s*(?:have|has|had|did|do|does|am|was|were)\s+(?:I|we)\b", re.I)
_QUESTION_FRAME = frozenset(lexical_terms("have has had did do does am was were i we ever before any my me the this "
                                          "in of on for to a an with usually"))
# where the chat happens, not what the question asks about ("Have I used Bootstrap components in my project?")
_PLACE = re.compile(r"\b(?:in|for|within)\s+(?:this|my|the|our)\s+project\b", re.I)
_WORD = re.compile(r"[A-Za-z][\w'-]*")
_CLAUSE_END = re.compile(r"[.;!?,]")


@dataclass(frozen=True)
class AskedEvent:
    """What a yes/no question asks happened: its content words."""

    terms: frozenset[str]


def asked_event(question: str) -> AskedEvent | None:
    """The happening ``question`` asks about ("Have I ever …?", "Did I …?"), else None."""
    if not _YES_NO.search(question):
        return None
    terms = frozenset(lexical_terms(_PLACE.sub(" ", question))) - _QUESTION_FRAME
    return AskedEvent(terms) if terms else None


@dataclass(frozen=True)
class _Said:
    unit_index: int
    line: int
    text: str
    day: str | None
    turns: frozenset[int]
    denied: frozenset[str]  # what it denies, among the question's words (empty: no denial of it)
    verb: str | None  # the verb it denies ("never missed": "miss")
    asked: frozenset[str]  # the question's words in the whole line ("… software, like Zotero")


def _said_done(text: str, about: frozenset[str]) -> bool:
    """``text`` says something of ``about`` happened or is being done: a word of it stands in a
    clause that does not ask or plan (:func:`~lychee_ray.text.change_cues.says_done`; "I'm trying to
    set up a project using Bootstrap" says the user works with Bootstrap)."""
    words = {w for w in _WORD.findall(text) if frozenset(lexical_terms(w)) & about}
    return any(says_done(text, w, attempts=True) and not _asked_after(text, w) for w in words)


def _asked_after(text: str, word: str) -> bool:
    """The clause holding ``word``'s first occurrence ends with a question mark ("but what about
    adding the autocomplete feature?"): a question, whatever its first words."""
    at = text.find(word)
    end = _CLAUSE_END.search(text, at) if at >= 0 else None
    return end is not None and end.group(0) == "?"


def _brief(text: str, limit: int) -> str:
    t = " ".join(text.split())
    return t if len(t) <= limit else t[:limit].rsplit(" ", 1)[0] + " …"


def asked_conflict_marks(evidence: Sequence[Evidence], views: dict[str, ConversationView], asked: AskedEvent,
                         cfg: CurrentConfig) -> list[list[str]]:
    """Per unit, one mark (or "") per line; sets the status of each unit marked (units marked
    already by the scope's links keep theirs, and still count as the one side of a pair)."""
    said: list[_Said] = []
    marks: list[list[str]] = []
    for i, e in enumerate(evidence):
        lines = unit_lines(views[e.conversation_id], e.kind, e.id, e.turn_ids)
        marks.append([""] * len(lines))
        # only the user's own words: an assistant's account is not a statement of what the user did
        for j, line in ((j, line) for j, line in enumerate(lines) if line.by_user):
            denied = (denial(line.text, frame=True) | denial(line.text, line.speaker, frame=True)) & asked.terms
            denied = denied if len(denied) >= cfg.denial_min_shared else frozenset()
            said.append(_Said(i, j, line.text, line.day, line.turns, denied,
                              (denied_verb(line.text) or denied_verb(line.text, line.speaker)) if denied else None,
                              frozenset(lexical_terms(line.text)) & asked.terms))

    def mark(one: _Said, other: _Said) -> None:
        # a unit the scope's links marked keeps its mark; the other side is marked against it
        if evidence[one.unit_index].status == CURRENT_STATUS and not marks[one.unit_index][one.line]:
            when = f" ({day(other.day)})" if day(other.day) else ""
            marks[one.unit_index][one.line] = f"[conflicts with: {_brief(other.text, cfg.mark_chars)}{when}]"

    for d in (s for s in said if s.denied):
        # what says it happened, by statement (its source turns: a turn line and the records made
        # from it are one statement), ranked by the denied verb, the denied words and the question's words it holds
        best: dict[frozenset[int], tuple[int, int, int]] = {}
        shown: dict[frozenset[int], list[_Said]] = {}
        for o in said:
            # what was said after the denial is the user starting to do it, no contradiction
            if o.denied or o.turns & d.turns or max(o.turns) > max(d.turns) \
                    or evidence[o.unit_index].conversation_id != evidence[d.unit_index].conversation_id:
                continue
            # about what the question asks (its words: "downloaded or used Zotero") and what the denial denies
            about = frozenset(lexical_terms(o.text)) & asked.terms
            # its own words tie it to the question (a denial has its form too): frame words aside
            if len(about - FRAME_TERMS) < cfg.denial_min_shared or not about & d.asked or not _said_done(o.text, about):
                continue
            # the denied verb said as done first ("I had to miss my May 10 session" against "never missed")
            rank = (int(d.verb is not None and says_done(o.text, d.verb, attempts=True)), len(about & d.denied), len(about))
            best[o.turns] = max(best.get(o.turns, rank), rank)
            shown.setdefault(o.turns, []).append(o)
        for turns in sorted(best, key=lambda t: best[t], reverse=True)[:cfg.conflict_statements]:
            for o in shown[turns]:
                mark(d, o)
                mark(o, d)
    for e, m in zip(evidence, marks, strict=True):
        if any(m):
            e.status = CONFLICTING_STATUS
    return marks


__all__ = ["AskedEvent", "asked_conflict_marks", "asked_event"]
