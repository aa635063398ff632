"""The value a question asks for, across its context: older values marked against the newest.

A question about the state of one thing ("How many sources are in my Zotero library?", "When is my
Zoom call with the creative director?") names that thing. Every line of the selected context that
states a value of the kind asked (a count of the unit asked, a date or time, a percentage) in
words shared with the question is a statement of it; the one said last holds now, and a line that
states another value of the same kind and unit, said before it, and not that newest value too, ends
with ``[older value; later (2024-04-03): 52 sources]`` (status ``superseded``). No link need
exist: the question names the slot the write side could not (a change said without a change word,
an update inside a request, a count whose record lost its context).

Conservative: a value counts only with ``query.current.asked_min_shared`` of the question's content
words within ``asked_window`` words of it (besides its unit), values a plan or a bound qualifies
("my goal of 10 problems", "under 200ms") are no statement of what is, and a question that asks
for history, a yes/no question or one that names no kind of value marks nothing.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Literal

from lychee_ray.config import CurrentConfig
from lychee_ray.core.status import CURRENT_STATUS, SUPERSEDED_STATUS
from lychee_ray.core.conversation import USER_ROLE
from lychee_ray.core.currency import day
from lychee_ray.query.evidence import Evidence
from lychee_ray.query.fuse import FusedItem, ItemKey
from lychee_ray.query.unit_lines import UnitLine, key_lines, unit_lines
from lychee_ray.query.view import ConversationView
from lychee_ray.text.change_cues import (
    DURATION_UNITS,
    FRAME_TERMS,
    ValueMention,
    changed_spans,
    changed_values,
    same_unit,
    says_value,
    value_mentions,
)
from lychee_ray.text.lexical import lexical_terms

# What a question's words say of the kind of value it asks for.
_COUNT = re.compile(r"\bhow\s+(?:many|much)\b", re.I)
_MANY = re.compile(r"\bhow\s+many\b", re.I)  # a count: not an amount of money
_PERCENT = re.compile(r"\b(?:percent|percentage|rate|accuracy|coverage)\b|%", re.I)
_DURATION = re.compile(r"\b(?:response|load|latency|duration|time)\b", re.I)
_WHAT = re.compile(r"^\s*(?:what|which)\b", re.I)
_WHAT_ANYWHERE = re.compile(r"\b(?:what|which)\b", re.I)
_WHEN = re.compile(r"\b(?:when|what\s+(?:time|date|day)|which\s+(?:date|day)|deadline|due\s+date)\b", re.I)
_MOMENTS = frozenset({"date", "time"})
_AMOUNT = re.compile(r"\b(?:quota|count|number|total|target|limit|budget|price|cost|amount|score|size|balance)\b", re.I)
# a question about a goal or a quota: values a plan qualifies answer it ("targeting 1,200 words per week")
_GOAL = re.compile(r"\b(?:target|goal|aim|plan|quota|budget)\b", re.I)
_COUNTED_AS = re.compile(r"\bhow\s+many\b[^?,]*?\bas\s+([\w-]+)", re.I)
_COUNTED = re.compile(r"\bhow\s+(?:many|much)\s+((?:[\w-]+\s+){0,2}[\w-]+)", re.I)
# a question that asks whether something happened, or about before: not a question of what holds now
_YES_NO = re.compile(r"^\s*(?:have|has|had|did|do|does|am|is|are|was|were|can|could|should|would|will)\b", re.I)
_BEFORE = re.compile(r"\b(?:before|previous(?:ly)?|original(?:ly)?|used\s+to|at\s+first|initially|change[ds]?|history)\b",
                     re.I)
# a question about a course over time ("how much did my accuracy improve between ...", "in total across
# all sessions"): its older values are part of the answer, not stale
_OVER_TIME = re.compile(r"\b(?:between|how\s+long|until|since|across|happened\s+first|first\s+or)\b|"
                        r"\bdid\b[^?]*\b(?:improve|increase|decrease|grow|change|rise|drop|go\s+(?:up|down))\b", re.I)
# the question's own words that say nothing of what the value is about
_QUESTION_FRAME = frozenset(lexical_terms(
    "how many much what which when is are was were my i me do does did have has had current currently now the "
    "of in for to a an on at scheduled time date day plan should will total number"))
_MONTH_UNIT = re.compile(r"jan(?:uary)?|feb(?:ruary)?|march|apr(?:il)?|may|june?|july?|aug(?:ust)?|sept?(?:ember)?|"
                         r"oct(?:ober)?|nov(?:ember)?|dec(?:ember)?")
ASKED_CHANNEL = "asked_value"  # the channel name of a pool item brought in as the user's newest statement
_SENTENCE_END = re.compile(r"[.!?;]\s")
_FIGURE = re.compile(r"\d(?:[\d,]*\d)?(?:\.\d+)?")


@dataclass(frozen=True)
class AskedValue:
    """What a question asks for: its content words, and the kinds of value that answer it
    (``date``, ``time``, ``num``, ``money``); whether a ``num`` in % or in a unit of time answers it."""

    terms: frozenset[str]
    kinds: frozenset[str]
    percent: bool
    duration: bool
    goal: bool = False  # it asks for a target or a quota: a value said as a plan answers it
    counted: frozenset[str] = frozenset()  # the thing "how many" counts ("commits"), as lexical terms
    head: str = ""  # the noun counted: the last of those words ("conditional probability problems": "problem")
    # the words before it that name a kind of it ("conditional", "probability"; the chat's frame words aside)
    qualifiers: frozenset[str] = frozenset()
    # what the question says it counts them as ("how many women ... as mentees": "ment"): counts of it count them
    counted_as: frozenset[str] = frozenset()
    # the counts the question itself gives ("after completing 15 problems"): (unit, figure)
    given: frozenset[tuple[str, str]] = frozenset()


def asked_value(question: str) -> AskedValue | None:
    """The value ``question`` asks for now (None: it asks none, asks about before or a course over
    time, or is a yes/no question)."""
    if _YES_NO.search(question) or _BEFORE.search(question) or _OVER_TIME.search(question):
        return None
    terms = frozenset(lexical_terms(question)) - _QUESTION_FRAME
    if not terms:
        return None
    # "how many problems ... to improve my accuracy" asks a count; "..., and what accuracy rate" a rate too
    percent = bool(_PERCENT.search(question)) and not (_MANY.search(question) and not _WHAT_ANYWHERE.search(question))
    duration = bool(_DURATION.search(question))
    if _MANY.search(question):
        kinds = frozenset({"num"})
    elif _WHEN.search(question):
        kinds = _MOMENTS
    elif _COUNT.search(question) or (_WHAT.search(question) and _AMOUNT.search(question)):
        kinds = frozenset({"num", "money"})
    elif percent or (_WHAT.search(question) and duration):
        kinds = frozenset({"num"})
    else:
        return None
    found = _COUNTED.search(question)
    counted = [t for t in (lexical_terms(found.group(1)) if found else []) if t not in _QUESTION_FRAME]
    head = counted[-1] if counted else ""
    # (the counts it gives need no context: the smallest window)
    given = frozenset((m.unit, _number(m.text)) for m in value_mentions(question, 1) if m.kind == "num")
    role = _COUNTED_AS.search(question) if head else None
    counted_as = frozenset(lexical_terms(role.group(1))) - _QUESTION_FRAME - {head} if role else frozenset()
    return AskedValue(terms, kinds, percent, duration, bool(_GOAL.search(question)), frozenset(counted), head,
                      frozenset(counted) - {head} - FRAME_TERMS, counted_as, given)


@dataclass(frozen=True)
class _Parsed:
    """What a line says whatever the question (parsed once per conversation view and line):
    its values, the bare numbers a change word governs (figure, the words of its sentence before
    it, the terms around it) and the dates and times a change word moves (their sentence as context)."""

    values: tuple[ValueMention, ...]
    bare: tuple[tuple[str, tuple[str, ...], frozenset[str]], ...]
    moved: tuple[ValueMention, ...]


def _parse(text: str, cfg: CurrentConfig) -> _Parsed:
    bare = []
    for start, end in changed_spans(text, cfg.asked_change_gap):
        fig = _FIGURE.match(text[start:end].strip())
        if fig is None or value_mentions(text[start:end], cfg.asked_window):
            continue  # a date or time, or a number that says its unit itself ("165 after": bare)
        before = _SENTENCE_END.split(text[:start])[-1].split()  # the counted word may stand far back in its sentence
        ctx = frozenset(lexical_terms(" ".join(before + text[end:].split()[:cfg.asked_window])))
        bare.append((fig.group(0).rstrip(",."), tuple(before), ctx))
    moved = []
    for sentence in _SENTENCE_END.split(text):
        moved += [m for m in changed_values(sentence, len(sentence.split()), cfg.asked_change_gap) if m.kind in _MOMENTS]
    return _Parsed(tuple(value_mentions(text, cfg.asked_window, frame=True)), tuple(bare), tuple(moved))


def _parsed(view: ConversationView, text: str, cfg: CurrentConfig) -> _Parsed:
    """:func:`_parse` of ``text``, kept in the view's memo (the scan of a conversation's user turns
    repeats for every question; concurrent writers store equal values)."""
    memo = view.memo.setdefault(("asked_values", cfg.asked_window, cfg.asked_change_gap), {})
    got = memo.get(text)
    if got is None:
        got = memo[text] = _parse(text, cfg)
    return got


def _bare_counts(p: _Parsed, asked: AskedValue) -> list[ValueMention]:
    """Bare numbers a change word governs, counting what the question counts when its word stands
    before them in the sentence ("the commits merged into the main branch, which has now reached
    165" for "how many commits"): a mention with that word as its unit."""
    out = []
    for raw, before, ctx in p.bare:
        unit = next((t for w in reversed(before) for t in lexical_terms(w) if t in asked.counted | asked.counted_as), None)
        if unit is not None:
            out.append(ValueMention("num", asked.head if unit in asked.counted_as else unit, raw, ctx))
    return out


def _unit_named(asked: AskedValue, m: ValueMention) -> bool:
    """``m`` counts the thing the question counts ("5 interviews" for "how many interviews"), or,
    for a question that says no "how many", a thing it names."""
    return m.kind == "num" and m.unit != "%" and bool(frozenset(m.unit.split()) & (asked.counted or asked.terms))


def _about(asked: AskedValue, m: ValueMention) -> frozenset[str]:
    """The question's words near ``m`` (its unit aside)."""
    return (m.context - frozenset(m.unit.split())) & asked.terms


def _answers(asked: AskedValue, m: ValueMention, cfg: CurrentConfig) -> bool:
    """``m`` states a value of the kind asked, about what the question names."""
    if (m.hedge and not (m.hedge == "plan" and asked.goal)) or m.kind not in asked.kinds:
        return False
    if _MONTH_UNIT.fullmatch(m.unit):
        return False  # "28 august": a date written day first, not a count
    named = _unit_named(asked, m)
    if m.kind == "num" and not named:
        if m.unit == "%":
            if not asked.percent:
                return False
        elif not (frozenset(m.unit.split()) & DURATION_UNITS and asked.duration):
            return False  # "5 interviews" answers "how many interviews", not "how many women"
    return len(_about(asked, m)) >= (cfg.asked_unit_min_shared if named else cfg.asked_min_shared)


def _number(value: str) -> str:
    """The figure of a value ("4 hours per session" -> "4"; "1,350 words" -> "1350")."""
    m = _FIGURE.search(value)
    return m.group(0).replace(",", "") if m else value


def _given_other(asked: AskedValue, m: ValueMention) -> bool:
    """The question gives a count of ``m``'s unit ("… after completing 15 problems") other than ``m``'s."""
    return m.kind == "num" and any(unit == m.unit and fig != _number(m.text) for unit, fig in asked.given)


def _replaces(asked: AskedValue, new: ValueMention, old: ValueMention, cfg: CurrentConfig) -> bool:
    """``new`` is another value of what ``old`` states: same kind and unit, and enough of the
    question's words near both (two dates near the question's words may be of two things). What
    the question gives is the state it asks about: a count of it is never older, and no other count
    of its unit is newer."""
    if new.kind != old.kind or not same_unit(new.unit, old.unit) or _given_other(asked, new):
        return False
    if old.kind == "num" and (old.unit, _number(old.text)) in asked.given:
        return False
    if (new.text == old.text) if new.kind in _MOMENTS else (_number(new.text) == _number(old.text)):
        return False
    need = (cfg.asked_moment_pair_min_shared if new.kind in _MOMENTS else
            cfg.asked_unit_pair_min_shared if _unit_named(asked, new) else cfg.asked_pair_min_shared)
    return len(_about(asked, new) & _about(asked, old)) >= need


@dataclass(frozen=True)
class _Said:
    """A value stated on one line of a unit."""

    unit_index: int
    line: int
    mention: ValueMention
    at: UnitLine


def _as_counted(asked: AskedValue, text: str, m: ValueMention) -> ValueMention | None:
    """``m`` as a count of the thing the question counts, where that has words of its kind
    ("conditional probability problems"): a count whose words run on to the noun counted takes it as
    its unit ("12 conditional probability problems": "problem"), one of the bare noun counts it only
    with a word of its kind in its sentence ("… conditional probability problems improved …, after
    completing 8 problems", not "after practicing 15 problems" of permutations) and has those words
    near it, one of a kind word that never reaches the noun counts something else (None). Any other
    value is returned as it is."""
    if m.kind == "num" and m.unit in asked.counted_as:
        return replace(m, unit=asked.head)  # "7 mentees" for "how many women ... as mentees"
    if m.kind != "num" or not asked.qualifiers or m.unit not in asked.counted:
        return m
    flat = " ".join(text.lower().split())
    hit = re.search(rf"(?<![\w.,]){re.escape(m.text)}\b", flat)
    if hit is None:
        return m
    after = flat[hit.end():]
    unit, said = m.unit, [m.text]
    for word in after.split()[:len(asked.counted)]:
        if unit == asked.head:
            break
        terms = lexical_terms(word)
        if not terms or terms[0] not in asked.counted:
            break
        unit = terms[0]
        said.append(word.strip(",.;:!?"))
    if unit != asked.head:
        return None
    end = _SENTENCE_END.search(after)
    sentence = _SENTENCE_END.split(flat[:hit.start()])[-1] + " " + (after[:end.start()] if end else after)
    kind = asked.qualifiers & frozenset(lexical_terms(sentence))
    if m.unit == asked.head and not kind:
        return None
    # the words of its kind say what it is about
    return replace(m, unit=unit, text=" ".join(said), context=m.context | kind)


def _stated(view: ConversationView, line: UnitLine, asked: AskedValue, cfg: CurrentConfig) -> list[ValueMention]:
    """The values of ``line`` that answer the question: its values, bare counts of what the question
    counts, and dates and times a change word moves, with their whole sentence as context ("I'm
    worried about missing the Zoom meeting with Professor Danielle, so can you remind me that it's
    rescheduled to March 22 at 4:30 PM": what moved is named before the change)."""
    p = _parsed(view, line.text, cfg)
    moments = list(p.moved) if asked.kinds & _MOMENTS else []
    counts = [_as_counted(asked, line.text, m) for m in p.values]
    return [m for m in [*(c for c in counts if c is not None), *_bare_counts(p, asked), *moments] if _answers(asked, m, cfg)]


def _given_state(view: ConversationView, line: UnitLine, asked: AskedValue,
                 cfg: CurrentConfig) -> Literal["given", "other"] | None:
    """Which state ``line`` speaks of when the question gives a count ("… after completing 15
    problems"): "given" (it states that count), "other" (another count of its unit) or None."""
    if not asked.given:
        return None
    said = {(m.unit, _number(m.text)) for m in _parsed(view, line.text, cfg).values if m.kind == "num"}
    if said & asked.given:
        return "given"
    units = {unit for unit, _ in asked.given}
    return "other" if any(unit in units for unit, _ in said) else None


def _can_replace(view: ConversationView, line: UnitLine, m: ValueMention, asked: AskedValue, cfg: CurrentConfig) -> bool:
    """``m`` may be what holds now: not the start of a change ("gone from 70% to 90%"), not said of
    another state than the one the question gives, and a date or a time only where a change word
    governs it ("moving the call to April 22 at 11 AM", "the new deadline of April 5"); a date said
    near the question's words is as often another appointment as the same one moved."""
    if re.search(rf"\bfrom\s+{re.escape(m.text)}\s+to\b", " ".join(line.text.lower().split())):
        return False
    if _given_state(view, line, asked, cfg) == "other":
        return False
    return m.kind not in _MOMENTS or any(m.text == v.text for v in _parsed(view, line.text, cfg).moved)


def _newest_replacing(view: ConversationView, asked: AskedValue, cfg: CurrentConfig,
                      older: Sequence[tuple[UnitLine, ValueMention]]) -> tuple[ItemKey, UnitLine, ValueMention] | None:
    """The user's last statement in the conversation of a value the question asks for that replaces
    one of ``older`` (said after it): the turn (or the passage of a long turn) that says it."""
    cid = view.conversation_id
    for tp in range(len(view.turn_ids) - 1, -1, -1):
        if view.turn_role[tp] != USER_ROLE or not any(tp > line.order for line, _ in older):
            continue
        parts = view.turn_passages.get(tp)
        keys = ([ItemKey(cid, "passage", view.passages.ids[p]) for p in parts] if parts
                else [ItemKey(cid, "turn", view.turn_ids[tp])])
        for key in reversed(keys):
            for line in key_lines(view, key):
                for value in reversed(_stated(view, line, asked, cfg)):
                    if _can_replace(view, line, value, asked, cfg) and any(line.order > at.order and _replaces(asked, value, m, cfg)
                                                              for at, m in older):
                        return key, line, value
    return None


def bring_newest(pool: list[FusedItem], relevance: Sequence[float], views: dict[str, ConversationView],
                 asked: AskedValue, cfg: CurrentConfig) -> tuple[list[FusedItem], list[float]]:
    """The fused pool with the user's newest statement of the value asked for brought in, or raised,
    to the relevance of the best pooled item that states an older figure of it, so that the context
    holds what is current beside what it replaced; unchanged when no pooled item states an older figure."""
    score = {it.key: float(r) for it, r in zip(pool, relevance, strict=False)}
    added: list[FusedItem] = []
    raised = False
    for cid in dict.fromkeys(it.key.conversation_id for it in pool):
        view = views[cid]
        older = [(it, line, m) for it in pool[:cfg.asked_pool_depth] if it.key.conversation_id == cid
                 for line in key_lines(view, it.key) for m in _stated(view, line, asked, cfg)]
        found = _newest_replacing(view, asked, cfg, [(line, m) for _, line, m in older]) if older else None
        if found is None:
            continue
        key, newest, value = found
        best = max((it for it, line, m in older if line.order < newest.order and _replaces(asked, value, m, cfg)),
                   key=lambda it: score[it.key])
        if score.get(key, 0.0) >= score[best.key]:
            continue
        if key not in score:
            added.append(FusedItem(key=key, score=0.0, channels={ASKED_CHANNEL}, routes=set(best.routes),
                                   first_seen=len(pool) + len(added)))
        score[key] = score[best.key]
        raised = True
    if not raised:
        return pool, list(relevance)
    out = sorted([*pool, *added], key=lambda x: (-score[x.key], x.first_seen))
    return out, [score[x.key] for x in out]


def asked_value_marks(evidence: Sequence[Evidence], views: dict[str, ConversationView], asked: AskedValue,
                      cfg: CurrentConfig) -> list[list[str]]:
    """Per unit, one mark (or "") per line; sets the status of each unit marked. Units already
    marked by the scope's links keep their marks (this only adds to lines they left unmarked)."""
    said: list[_Said] = []
    valid_until: list[str | None] = [None] * len(evidence)
    lines_of: list[list[UnitLine]] = []
    for i, e in enumerate(evidence):
        view = views[e.conversation_id]
        lines = unit_lines(view, e.kind, e.id, e.turn_ids)
        lines_of.append(lines)
        for j, line in enumerate(lines):
            for m in _stated(view, line, asked, cfg):
                said.append(_Said(i, j, m, line))
    marks = [[""] * len(lines) for lines in lines_of]
    stale: dict[tuple[int, str, str], tuple[str, str | None]] = {}  # (source turn, kind, figure) -> mark, until
    by_user = {(o.mention.kind, _number(o.mention.text)) for o in said if o.at.by_user}
    for s in said:
        e = evidence[s.unit_index]
        if e.status != CURRENT_STATUS or marks[s.unit_index][s.line]:
            continue  # marked already (by the scope's links, or for another of its values)
        if not s.at.by_user and (s.mention.kind, _number(s.mention.text)) not in by_user:
            continue  # the assistant's own figure (an example, a range, a sum), not the user's value said again
        if _given_state(views[e.conversation_id], s.at, asked, cfg) == "given":
            continue  # it speaks of the state the question asks about
        # what holds now is what the user said last (an assistant's figure is advice, an example, a plan)
        newer = [o for o in said if o.at.by_user and o.at.order > s.at.order
                 and evidence[o.unit_index].conversation_id == e.conversation_id and _replaces(asked, o.mention, s.mention, cfg)
                 and _can_replace(views[e.conversation_id], o.at, o.mention, asked, cfg)]
        if not newer:
            continue
        newest = max(newer, key=lambda o: o.at.order)
        if says_value(s.at.text, newest.mention.text):
            continue  # the line says the newer value too: it is the change itself
        when = day(newest.at.day)
        marks[s.unit_index][s.line] = f"[older value; later{f' ({when})' if when else ''}: {newest.mention.text}]"
        valid_until[s.unit_index] = newest.at.day
        for tp in s.at.turns:
            stale.setdefault((tp, s.mention.kind, _number(s.mention.text)), (marks[s.unit_index][s.line], newest.at.day))
    # a line made from the same turn that says the same figure says the same thing, whatever words
    # it kept ("User has currently reached 65% after …" beside "… 65% test coverage on the module")
    for i, lines in enumerate(lines_of):
        if evidence[i].status != CURRENT_STATUS:
            continue
        view = views[evidence[i].conversation_id]
        for j, line in enumerate(lines):
            if marks[i][j]:
                continue
            for m in _parsed(view, line.text, cfg).values:
                got = next((stale[k] for tp in line.turns if (k := (tp, m.kind, _number(m.text))) in stale), None)
                if got is not None:
                    marks[i][j], valid_until[i] = got
                    break
    for e, unit_marks, until in zip(evidence, marks, valid_until, strict=True):
        if any(unit_marks):
            e.status, e.valid_until = SUPERSEDED_STATUS, until
    return marks


__all__ = ["ASKED_CHANNEL", "AskedValue", "asked_value", "asked_value_marks", "bring_newest"]
