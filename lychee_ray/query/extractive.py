"""The ``rules`` backend's answer: the sentence of the context that answers, quoted, never generated.

A sentence is chosen by four things (weights ``query.answer.rules_weights``, fit on the LoCoMo dev split):

- **words**: the share of the question's terms it shares (lexical terms, stemmed);
- **meaning**: the cosine of its line's stored vector with the question's (a record, a turn or a
  passage: vectors the build stored, so choosing costs no embedding);
- **the answer's type**: what the question asks for — *when* → a date or time, *how many / how
  much / how long* → a number, *who* → a name, *where* → a place, *why* → a reason, *what / which*
  → words the question does not already have, yes/no questions → anything — and whether the
  sentence holds one that the question does not already say;
- **relevance**: its unit's relevance in the selection.

A question in the context, or a sentence that only repeats the question (no word of its own), is
no answer; either can *lead* to one: a candidate is a pair of a sentence matching the question and
one up to ``rules_follow_sentences`` later in the same unit that answers (a remark and the sentence
naming the thing, quoted together; a question and its reply, quoted without the question), its words
counted together, less ``gap`` per sentence between them. A value that no longer holds (a superseded record)
keeps at most one word of overlap. A turn is quoted with its speaker; for a *when* question the quote
starts with the day it refers to, and relative times in it ("yesterday", "last week") are rewritten
against the day they were said.

The question words and value shapes are English: in other languages the choice falls back to
words, meaning and relevance.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from lychee_ray.config import AnswerConfig
from lychee_ray.core.status import SUPERSEDED_STATUS
from lychee_ray.query.answer_lines import AnswerLine
from lychee_ray.text.dates import iso_day, readable_day
from lychee_ray.text.lexical import lexical_terms
from lychee_ray.text.sentences import split_sentences
from lychee_ray.text.time.detect import find_time_expressions
from lychee_ray.text.time.rewrite import rewrite_relative
from lychee_ray.text.time.words import COUNT_WORDS, MONTHS, WEEKDAYS

AnswerType = Literal["date", "count", "person", "place", "reason", "yesno", "thing"]

_YESNO = re.compile(r"^(?:is|are|was|were|am|do|does|did|has|have|had|can|could|will|would|should|shall|may|might)\b")
# the first question word decides; "what/which <noun>" asks for that noun's kind
_WH = re.compile(
    r"\b(?:(when)|(how (?:many|much|long|often|old|far|big|tall|frequently))|(who|whom|whose)|(where)|(why|how come)"
    r"|(?:what|which) (?:(year|month|date|day|time|season|week|decade)|(city|cities|country|countries|place|places|"
    r"state|town|towns|location|restaurant|park|beach|island))\b|(what|which|how))\b")
_NUMBER = re.compile(r"(?<![\w.])(?:\$|€|£)?\d+(?:[.,]\d+)*%?(?![\w])")
_COUNT_WORDS = frozenset(w for w in COUNT_WORDS if " " not in w and w not in ("a", "an")) | frozenset(
    "eleven twelve thirteen fourteen fifteen twenty thirty forty fifty hundred thousand dozen million".split())
_WORD = re.compile(r"[A-Za-z][\w'’-]*")
_CALENDAR = frozenset(MONTHS) | frozenset(WEEKDAYS)
_REQUIRED: frozenset[AnswerType] = frozenset({"date"})
_REASON = re.compile(r"\b(?:because|since|so that|so|as|in order to|due to|thanks to|helps?|make[s]? me|reminds?)\b", re.I)
_PLACE_PREP = re.compile(r"\b(?:in|at|to|from|near|around|visit(?:ed|ing)?) (?:the )?[a-z]+", re.I)


def expected_type(question: str) -> AnswerType:
    """What kind of value ``question`` asks for (English question words; ``thing`` otherwise)."""
    q = " ".join(question.lower().split())
    m = _WH.search(q)
    if m is None:
        return "yesno" if _YESNO.match(q) else "thing"
    if m.group(1) or m.group(6):
        return "date"
    if m.group(2):
        return "count"
    if m.group(3):
        return "person"
    if m.group(4) or m.group(7):
        return "place"
    if m.group(5):
        return "reason"
    if _YESNO.match(q) and m.start() > 0:  # "Did she say what ...": a yes/no question first
        return "yesno"
    return "thing"


def _names(sentence: str, asked: frozenset[str]) -> list[str]:
    """Capitalised words that are not the sentence's first word, a calendar word or in the question."""
    words = _WORD.findall(sentence)
    return [w for i, w in enumerate(words) if i > 0 and w[0].isupper() and w.lower() not in _CALENDAR
            and w.lower() not in asked and w != "I"]


def holds_type(sentence: str, kind: AnswerType, asked_terms: frozenset[str], asked_words: frozenset[str],
               ref: str | None, asked_text: str) -> bool:
    """Whether ``sentence`` holds a value of ``kind`` that the question does not already say."""
    if kind == "yesno":
        return True
    if kind == "date":
        return any(m.text.lower() not in asked_text for m in find_time_expressions(sentence, ref))
    if kind == "count":
        words = {w.lower() for w in _WORD.findall(sentence)}
        return any(n not in asked_words for n in _NUMBER.findall(sentence)) or bool((words & _COUNT_WORDS) - asked_words)
    if kind == "person":
        return bool(_names(sentence, asked_words))
    if kind == "place":
        return bool(_names(sentence, asked_words)) or _PLACE_PREP.search(sentence) is not None
    if kind == "reason":
        return _REASON.search(sentence) is not None
    return bool(set(lexical_terms(sentence)) - asked_terms)


@dataclass(frozen=True)
class _Sentence:
    line: int  # index of its line
    unit: int  # its line's evidence unit
    text: str
    terms: frozenset[str]  # its lexical terms with its speaker's
    own: bool  # it has a term the question does not
    is_question: bool


def _sentences(lines: Sequence[AnswerLine], asked_terms: frozenset[str]) -> list[_Sentence]:
    out = []
    for i, ln in enumerate(lines):
        speaker = frozenset(lexical_terms(ln.speaker)) if ln.speaker else frozenset()
        for s in split_sentences(ln.text):
            s = s.strip()
            if len(s) >= 3:
                terms = frozenset(lexical_terms(s))
                out.append(_Sentence(i, ln.unit, s, terms | speaker, bool(terms - asked_terms),
                                     s.rstrip("\"')]").endswith("?")))
    return out


def _quote(parts: list[_Sentence], lines: Sequence[AnswerLine], kind: AnswerType) -> str:
    """The chosen sentence(s) as printed: a turn with its speaker; a *when* answer led by the day it
    refers to, its relative times rewritten against the day they were said."""
    out: list[str] = []
    for i, s in enumerate(parts):
        ln = lines[s.line]
        text = s.text
        if kind == "date" and ln.session_day:
            text, _ = rewrite_relative(text, ln.session_day)
        same_line = i > 0 and parts[i - 1].line == s.line
        out.append(text if ln.speaker is None or same_line else f"{ln.speaker}: {text}")
    quote = " ".join(out)
    if kind == "date":
        last = lines[parts[-1].line]
        day = iso_day(last.day)
        if day is not None and not find_time_expressions(parts[-1].text, last.session_day):
            quote = f"{readable_day(day)} — {quote}"
    return quote


def extract_answer(question: str, lines: Sequence[AnswerLine], cfg: AnswerConfig) -> str | None:
    """The quoted answer to ``question`` from ``lines`` (None when no sentence shares a word or meaning with it).

    A candidate is a pair (anchor, answer): the answer sentence itself, or a sentence up to
    ``rules_follow_sentences`` before it in the same unit that matches the question while the answer
    holds the asked value (a question and its reply; a remark and the sentence naming the thing)."""
    kind = expected_type(question)
    asked_terms = frozenset(lexical_terms(question))
    asked_words = frozenset(w.lower() for w in _WORD.findall(question)) | frozenset(_NUMBER.findall(question))
    sentences = _sentences(lines, asked_terms)
    w = cfg.rules_weights
    asked_text = " ".join(question.lower().split())
    bearing = [holds_type(s.text, kind, asked_terms, asked_words, lines[s.line].session_day, asked_text) for s in sentences]
    shared = []
    for s in sentences:
        n = len(asked_terms & s.terms)
        if lines[s.line].status == SUPERSEDED_STATUS:  # a value that no longer holds answers only a history question
            n = min(n, 1)
        shared.append(n)
    # a date or time is what *when* asks for: a sentence without one answers only when no sentence
    # of the context has one
    required = kind in _REQUIRED and any(bearing)
    scored: list[tuple[float, int, int]] = []
    for b, sb in enumerate(sentences):
        if sb.is_question or not sb.own or (required and not bearing[b]):
            continue  # a question, or a sentence saying nothing the question does not, answers nothing
        ln = lines[sb.line]
        for a in range(max(0, b - cfg.rules_follow_sentences), b + 1):
            if sentences[a].unit != sb.unit:
                continue
            common = len(asked_terms & (sentences[a].terms | sb.terms)) if a != b else shared[b]
            meaning = max(ln.meaning, lines[sentences[a].line].meaning)
            if common == 0 and meaning < cfg.rules_min_meaning:
                continue
            score = (w.words * common / max(1, len(asked_terms)) + w.meaning * meaning + w.type * bearing[b]
                     + w.relevance * ln.relevance + w.record * ln.is_record - w.gap * (b - a))
            scored.append((score, a, b))
    # a line marked superseded answers only when no line that holds does (a history question's lines
    # are marked "history", not superseded)
    holding = [x for x in scored if lines[sentences[x[2]].line].status != SUPERSEDED_STATUS]
    scored = holding or scored
    scored.sort(key=lambda x: (-x[0], x[2], x[1]))
    quotes: list[str] = []
    used: set[int] = set()
    for _, a, b in scored:
        if len(quotes) >= cfg.rules_max_sentences:
            break
        if a in used or b in used:
            continue
        used.update((a, b))
        lead = a != b and not sentences[a].is_question  # a question that led to its reply is not repeated
        quotes.append(_quote([sentences[a], sentences[b]] if lead else [sentences[b]], lines, kind))
    return " … ".join(quotes) if quotes else None


__all__ = ["AnswerType", "expected_type", "extract_answer", "holds_type"]
