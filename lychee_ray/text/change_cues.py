"""Explicit change and contradiction cues in what a user says (``rules`` backend; docs/current-memory.md).

Conservative by design: a cue counts only where the words say so, so that a link the rules backend
writes between two chat statements is one a reader would write too (its precision is measured by
hand, docs/current-memory.md "The 100-link sample").

* **A changed value** (:func:`changed_values`): a value — a date, a time, an amount, a number with
  its unit (``250ms``, ``78%``, ``1,350 words``) — that a change word governs: "now at / now
  reached 165", "now I have a total of 10 cards", "improved to 78%", "moving the call with the
  director to April 22 at 11 AM" (up to ``gap`` words between the verb and "to"), "rescheduled to
  March 22 at 4:30 PM", "the new deadline of April 5, 2024", "the new April 25 deadline", "my draft
  reached 4,700 words". A bare number ("12, and") is no value: nothing says what it counts.
* **A counted value** (:func:`counted_values`): a number with a word for its unit ("5 interviews",
  "52 sources"): said again later with another number, and enough words in common, it is the newer
  count of the same thing even without a change word (text_links.py asks for more shared words).
* **Value mentions** (:func:`value_mentions`): every such value of a statement, with the content
  words around it (``window`` words each side): an earlier statement of the same kind of value,
  with another value and at least ``min_shared`` of those words in common, is what the change
  replaces.
* **A denial** (:func:`denial`): "I've never X" / "I have never X", or in the third person the
  rules backend writes a speaker's statements in ("User has never X") — the words of X; an earlier or
  later statement that says X happened (enough of X's words, no denial) contradicts it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from lychee_ray.text.lexical import lexical_terms

_MONTH = (r"(?:jan(?:uary)?|feb(?:ruary)?|march|apr(?:il)?|may|june|july|aug(?:ust)?|sept?(?:ember)?|oct(?:ober)?|"
          r"nov(?:ember)?|dec(?:ember)?)")
# (a number inside a word — "HTML5", "4C2" — is no value; a comma belongs to a figure only between
# digits: "1,350 words", but "increased to 7, how can I" is a bare 7)
_VALUE = (rf"(?:(?<!\w){_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?(?:,?\s*\d{{4}})?(?:\s+at\s+\d{{1,2}}(?::\d\d)?\s*[ap]\.?m\.?)?"
          rf"|(?<![\w.])\d{{1,2}}(?::\d\d)?\s*[ap]\.?m\.?"
          rf"|(?<![\w.])\$?\d(?:[\d,]*\d)?(?:\.\d+)?\s*(?:%|ms\b|[a-z]+\b(?:\s+per\s+[a-z]+\b)?)?)")
VALUE = re.compile(_VALUE, re.I)
_CHANGE_WORDS = (r"increased|improved|grown|grew|risen|rose|reached|dropped|decreased|reduced|adjusted|changed|moved|"
                 r"moving|rescheduled|updated|extended|pushed(?:\s+back)?|bumped|raised|upgraded|gone\s+(?:up|down)|"
                 r"jumped|climbed|fallen|fell|shifted|expanded|lowered|cut")
_TOTAL = r"(?:a\s+total\s+of\s+)?"
_GROUPS = "abcde"


@lru_cache(maxsize=8)
def change_pattern(gap: int) -> re.Pattern[str]:
    """The change cues, with at most ``gap`` words between a change verb and its "to"."""
    return re.compile(
        rf"\b(?:now|currently|recently)\s+(?:(?:I|we)\s+)?(?:at|is|are|has|have|stands\s+at|totals?|reached|up\s+to|"
        rf"down\s+to|hit|of)?\s*{_TOTAL}(?P<a>{_VALUE})"
        rf"|\b(?:{_CHANGE_WORDS})\s+(?:[\w-]+\s+){{0,{gap}}}?to\s+(?P<b>{_VALUE})"
        rf"|\bnew\s+(?:[\w-]+\s+){{0,4}}?(?:of|is|to|at|:)\s*(?P<c>{_VALUE})"
        rf"|\bnew\s+(?P<d>{_VALUE})"
        rf"|\b(?:reached|hit|totals?|total\s+of)\s+(?P<e>{_VALUE})", re.I)

_DENIED = r"(?:'ve|’ve|'s|’s| have| has| had|'d| would)?\s+never\s+(?:actually\s+|ever\s+|really\s+)?(?P<x>[^,.;!?]{8,})"
DENIAL = re.compile(rf"\bI{_DENIED}", re.I)
_MERIDIEM = re.compile(r"\b([ap])\.m\.?")
# words that make what follows a plan, a goal or a wish rather than what is
PLAN = re.compile(r"\b(?:want|wants|wanted|plan|planning|goal|goals|target|targeting|aim|aiming|going to|will|would|hope|"
                  r"hoping|considering|thinking of|invited|should|could|might|if|need to|needs to)\b", re.I)
_INFINITIVE = re.compile(r"\bto\s+[a-z]+\s*$", re.I)  # "to gather 15 articles": a goal
# words before a verb that say it did not happen (yet): a question, a plan, an attempt, "before ...ing"
_NOT_DONE = re.compile(r"^\s*(?:can|could|would|should|will|how|what|why|when|where|do|does|is|are)\b|\b(?:trying|try|tries|"
                       r"tried|attempting|gonna|about to|before|without|instead of|until|whether|never|not|no|"
                       r"suggest\w*|recommend\w*|advis\w*|"
                       r"asked|prefer\w*|like|love|enjoy\w*|looking\s+into|exploring)\b|n[’']t\b|[’']ll\b",
                       re.I)
_BOUND = re.compile(r"\b(?:under|below|over|above|less than|more than|at least|at most|fewer than|within|up to)\s*$", re.I)
_CLAUSE = re.compile(r"[.;:!?,]\s|\s[-–—]\s")
# irregular verb forms, so that a denial ("I've never felt ...") and what says it happened ("I
# felt ...", "I'm feeling ...") are compared by the verb they share
_IRREGULAR = {
    "felt": "feel", "met": "meet", "took": "take", "taken": "take", "got": "get", "gotten": "get", "went": "go",
    "gone": "go", "did": "do", "done": "do", "made": "make", "had": "have", "been": "be", "was": "be", "were": "be",
    "saw": "see", "seen": "see", "wrote": "write", "written": "write", "spoke": "speak", "spoken": "speak",
    "ran": "run", "bought": "buy", "thought": "think", "told": "tell", "sent": "send", "built": "build",
    "began": "begin", "begun": "begin", "won": "win", "lost": "lose", "left": "leave", "paid": "pay",
    "taught": "teach", "learnt": "learn", "brought": "bring", "kept": "keep", "found": "find", "held": "hold",
    "heard": "hear", "chose": "choose", "chosen": "choose", "drew": "draw", "drawn": "draw", "gave": "give",
    "given": "give", "ate": "eat", "eaten": "eat", "flew": "fly", "flown": "fly", "sold": "sell", "spent": "spend",
    "struck": "strike", "stood": "stand", "understood": "understand", "wore": "wear", "worn": "wear",
}
_WORD = re.compile(r"[A-Za-z][A-Za-z'’-]*")


def verb_terms(text: str) -> frozenset[str]:
    """The lexical terms of ``text`` with irregular verb forms as their base ("felt" -> "feel")."""
    return frozenset(lexical_terms(_WORD.sub(lambda m: _IRREGULAR.get(m.group(0).lower(), m.group(0)), text)))
_BARE_UNITS = frozenset({"", "and", "or", "of", "in", "on", "at", "to", "for", "with", "from", "by", "st", "nd", "rd", "th",
                         "is", "are", "was", "were", "a", "an", "the", "but", "so", "after", "before", "as", "without",
                         "than", "out", "more", "less", "each", "if", "when", "which", "that", "this", "i", "we", "you",
                         "it", "my", "up", "down", "over", "under", "into", "about", "since", "while", "not", "all",
                         "times", "x", "then", "because", "be", "has", "have", "had", "will", "would", "can"})
# words that say nothing of what a value is about (the statement frames of chat: "I'm trying to ...")
FRAME_TERMS = frozenset(lexical_terms(
    "i im ive trying want need help make sure can could would like know how what project also get got have has had my "
    "me total per about around only just now new recently currently increased improved to from reached by the this "
    "that it already still really kinda user users assistant which due said says"))


# units of time, as value_mentions writes them ("15 minutes": "minut"; "s" stays as it is)
DURATION_UNITS = frozenset(lexical_terms("ms seconds minutes hours days weeks months years")) | {"s"}


_CUE_TERMS = frozenset(lexical_terms(_CHANGE_WORDS.replace("|", " ").replace("\\s+", " ").replace("(?:", " ")
                                     .replace(")?", " ") + " now currently recently new total totals hit stands"))


@dataclass(frozen=True)
class ValueMention:
    """A value in a statement: its kind (date, time, money, num), unit, text and the words around it."""

    kind: str
    unit: str
    text: str
    context: frozenset[str]
    # how its clause says it, if not as what is: "plan" (a goal, a plan, a wish: "my goal of 10
    # problems") or "bound" ("under 200ms")
    hedge: str = ""


def _kind_unit(v: str) -> tuple[str, str] | None:
    v = v.lower().strip()
    if re.match(_MONTH, v):
        return "date", ""
    if re.search(r"\d\s*[ap]\.?m", v) or re.search(r"\d:\d\d", v):
        return "time", ""
    if v.startswith("$"):
        return "money", ""
    m = re.match(r"\d[\d,]*(?:\.\d+)?\s*(.*)$", v)
    unit = (m.group(1) if m else "").strip()
    if unit in _BARE_UNITS:
        return None
    return "num", " ".join(lexical_terms(unit)) or unit


def _context(text: str, start: int, end: int, window: int, frame: bool = False) -> frozenset[str]:
    words = text[:start].split()[-window:] + text[end:].split()[:window]
    terms = frozenset(lexical_terms(" ".join(words)))
    return terms if frame else terms - FRAME_TERMS


def _mention(text: str, start: int, end: int, window: int, frame: bool = False) -> ValueMention | None:
    raw = text[start:end].strip()
    ku = _kind_unit(raw)
    if ku is None:
        return None
    norm = _MERIDIEM.sub(r"\1m", " ".join(raw.lower().split())).rstrip(".,;:")  # "4:30 p.m." = "4:30 pm"
    clause = _CLAUSE.split(text[:start])[-1]
    hedge = "bound" if _BOUND.search(clause) else "plan" if PLAN.search(clause) or _INFINITIVE.search(clause) else ""
    return ValueMention(ku[0], ku[1], norm, _context(text, start, end, window, frame), hedge)


def value_mentions(text: str, window: int, frame: bool = False) -> list[ValueMention]:
    """Every value of ``text`` that says what it counts (see the module doc); ``frame``: keep the
    chat's frame words ("project", "help") in its context (a question that names them means them)."""
    out = []
    for m in VALUE.finditer(text):
        v = _mention(text, m.start(), m.end(), window, frame)
        if v is not None:
            out.append(v)
    return out


def changed_spans(text: str, gap: int) -> list[tuple[int, int]]:
    """Where in ``text`` the values a change word governs stand, bare numbers included ("has now
    reached 165": what it counts is said before it, if at all)."""
    out = []
    for m in change_pattern(gap).finditer(text):
        g = next(k for k in _GROUPS if m.group(k))
        out.append((m.start(g), m.end(g)))
    return out


def changed_values(text: str, window: int, gap: int) -> list[ValueMention]:
    """The values of ``text`` a change word governs ("improved to 78%"); ``gap``: words a change
    verb may stand from its "to"."""
    out = []
    for m in change_pattern(gap).finditer(text):
        g = next(k for k in _GROUPS if m.group(k))
        v = _mention(text, m.start(g), m.end(g), window)
        if v is not None:  # what it is about: the words around the whole change and its object, not its cue
            inside = frozenset(lexical_terms(text[m.start():m.start(g)])) - _CUE_TERMS - FRAME_TERMS
            out.append(ValueMention(v.kind, v.unit, v.text, _context(text, m.start(), m.end(), window) | inside, v.hedge))
    return out


def counted_values(text: str, window: int) -> list[ValueMention]:
    """The numbers of ``text`` with a word for their unit ("5 interviews", "52 sources"), not
    percentages, durations ("daily for 15 minutes" of breathing exercises, then of meditation), amounts
    or dates: those say too little of what they measure."""
    return [v for v in value_mentions(text, window)
            if v.kind == "num" and v.unit[:1].isalpha() and v.unit.split(" per ")[0] not in DURATION_UNITS]


def _value_at(text: str, value: str) -> tuple[str, re.Match[str] | None]:
    flat = _MERIDIEM.sub(r"\1m", " ".join(text.lower().split()))
    return flat, re.search(rf"(?<![\w.,]){re.escape(value)}(?![\w]|[.,]\d)", flat)


def says_value(text: str, value: str) -> bool:
    """``text`` says ``value`` (as :func:`value_mentions` writes it: "3 pm", "april 1, 2024") as a
    whole: "3 pm" is in "at 3 PM" and "3 p.m.", not in "13 pm"; "april 1" not in "April 10"."""
    return _value_at(text, value)[1] is not None


_DAY_YEAR = re.compile(rf"({_MONTH})\s+(\d{{1,2}}),\s*(\d{{4}})")


def says_day(text: str, value: str) -> bool:
    """:func:`says_value`, and a date with its year (``april 1, 2024``) also said without it ("the
    deadline of April 1, …", "April 1st"), unless another year follows it there."""
    if says_value(text, value):
        return True
    m = _DAY_YEAR.fullmatch(value)
    if m is None:
        return False
    flat = " ".join(text.lower().split())
    said = re.finditer(rf"(?<![\w.,]){m.group(1)}\s+{m.group(2)}(?:st|nd|rd|th)?(?![\w]|[.,]?\d)(?:,?\s*(\d{{4}}))?", flat)
    return any(hit.group(1) in (None, m.group(3)) for hit in said)


def words_from_value(text: str, value: str, terms: frozenset[str]) -> int | None:
    """How many words stand between ``value`` in ``text`` and the nearest word of ``terms`` (lexical
    terms): 0 next to it; None when the value or no such word is there. Of a sentence's values, the
    one nearest a slot's words is the one the slot is about ("spent 3 hours studying probability
    basics, including 2 hours on coin toss": 3 hours is the time spent studying)."""
    flat, m = _value_at(text, value)
    if m is None:
        return None
    before, after = flat[:m.start()].split(), flat[m.end():].split()
    near = [i for i, w in enumerate(reversed(before)) if terms & frozenset(lexical_terms(w))]
    near += [i for i, w in enumerate(after) if terms & frozenset(lexical_terms(w))]
    return min(near) if near else None


def same_day_other_time(a: ValueMention, b: ValueMention) -> bool:
    """Two dates with times on the same day at different times ("march 22 at 3 pm", "march 22 at
    4:30 pm"): the same appointment moved within its day, when a change word says so."""
    if a.kind != "date" or b.kind != "date":
        return False
    (day_a, at_a, time_a), (day_b, at_b, time_b) = a.text.partition(" at "), b.text.partition(" at ")
    return bool(at_a and at_b) and day_a == day_b and time_a != time_b


def same_unit(a: str, b: str) -> bool:
    """Units that name the same thing: equal, or one of them without the other's rate ("words" and
    "words per week")."""
    return a == b or a.split(" per ")[0] == b or b.split(" per ")[0] == a


def replaced_by(new: ValueMention, old: ValueMention, min_shared: int) -> frozenset[str]:
    """The words two mentions share when ``old`` states another value of what ``new`` changes (same
    kind and unit, another value, at least ``min_shared`` words in common besides the unit); else empty."""
    if new.kind != old.kind or not same_unit(new.unit, old.unit) or new.text == old.text:
        return frozenset()
    shared = (new.context & old.context) - frozenset(new.unit.split()) - frozenset(old.unit.split())
    return shared if len(shared) >= min_shared else frozenset()


@lru_cache(maxsize=256)
def _denial_of(subject: str) -> re.Pattern[str]:
    return re.compile(rf"(?:\bI|(?<![\w'’]){re.escape(subject)}){_DENIED}", re.I)


_ATTEMPT = re.compile(r"\b(?:trying|try|tries|tried|attempting)\b", re.I)


def says_done(text: str, verb: str, attempts: bool = False) -> bool:
    """``text`` says ``verb`` happened: its first word of that verb (as :func:`verb_terms` writes it)
    is not in a clause of a question, a plan, a wish or an attempt ("Can you help me submit ...",
    "I'm gonna submit ...", "before submitting ..."). False when the verb is not there.
    ``attempts``: an attempt counts as doing it ("I'm trying to set up a project using Bootstrap":
    the user works with Bootstrap)."""
    want = verb_terms(verb) or frozenset([verb])
    for m in _WORD.finditer(text):
        if want & verb_terms(m.group(0)):
            clause = _CLAUSE.split(text[:m.start()])[-1]
            if attempts:
                clause = _ATTEMPT.sub(" ", clause)
            return not (PLAN.search(clause) or _NOT_DONE.search(clause))
    return False


def denied_verb(text: str, subject: str | None = None) -> str | None:
    """The verb of what "I've never ..." denies, as :func:`verb_terms` writes it ("felt" -> "feel";
    None: no denial, or no word)."""
    m = (_denial_of(subject) if subject else DENIAL).search(text)
    if not m:
        return None
    first = _WORD.search(m.group("x"))
    terms = verb_terms(first.group(0)) if first else frozenset()
    return next(iter(terms)) if len(terms) == 1 else None


def denial(text: str, subject: str | None = None, frame: bool = False) -> frozenset[str]:
    """The content words of what "I've never ..." denies in ``text`` (empty: no denial). ``subject``:
    the speaker's name, so that the statement as the rules backend writes it, in the third person
    ("User has never ..."), reads as the denial it is; ``frame``: keep the chat's frame words
    ("never worked with Michael on any projects": a question that names them means them)."""
    m = (_denial_of(subject) if subject else DENIAL).search(text)
    if not m:
        return frozenset()
    words = frozenset(lexical_terms(m.group("x")))
    return words if frame else words - FRAME_TERMS


__all__ = [
    "DENIAL", "DURATION_UNITS", "FRAME_TERMS", "PLAN", "VALUE", "ValueMention", "change_pattern", "changed_spans",
    "changed_values", "counted_values", "denial", "denied_verb", "replaced_by", "same_day_other_time", "same_unit",
    "says_day", "says_value", "says_done", "value_mentions", "verb_terms", "words_from_value",
]
