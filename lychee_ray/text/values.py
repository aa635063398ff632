"""One general parser of the values a sentence states, with what each is about and how it is said.

:func:`parse_values` reads a text sentence by sentence and returns each value it states
(:class:`ParsedValue`): money ("$1,450", "1,200 dollars a month"), percentages ("78%"), durations
and measures ("3 hours", "250ms", "150MB"), dates and clock times (explicit ones, through
:func:`~lychee_ray.text.time.detect.find_time_expressions`), counts ("5 chapters"), identifiers
("W777", "HAT227") and a free-text state said with a copula ("my shipping address is now 48 Oak
Avenue"). For each:

* **subject** — what the value is about, from the sentence's structure: the noun phrase a copula or
  a linking word puts before it ("the rent went up to $1,450" → "rent", "a budget of $650" →
  "budget"), else the noun phrase right after it ("65% test coverage", "5 chapters of the thesis" →
  "chapters thesis"), else the content words before it in its clause. Possessives, articles and
  speaker names in front ("User's", "my") are not part of it;
* **context** — the sentence's other content words (what else it is about: "accuracy" of
  "conditional probability problems");
* **changed** — its clause says the value is new or holds now ("went up to", "moved to", "now");
* **modality** — ``question`` (a question, or an "X asked:" line), ``plan`` (a plan, goal, wish or
  a bound: "want", "going to", "by June", "under 200ms"), ``denial`` ("never", "not"), ``done`` (said
  in a past or perfect tense) or ``now``.

It is English only (its linking words, tense and modality cues); a sentence in another language
yields the values its digits, symbols and dates show, with the words around them as the subject.
No data set's sentences went into it: the words below are general English grammar words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lychee_ray.core.statements import (COUNT, DATE, DENIAL, DONE, DURATION, IDENTIFIER, MONEY, NOW, PERCENTAGE, PLAN,
                                        QUESTION, STATE, TIME, Modality, ValueKind)
from lychee_ray.text.sentences import split_sentences
from lychee_ray.text.stopwords import COMMON_STOPWORDS
from lychee_ray.text.time.detect import find_time_expressions

_NUM = r"(?:\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?)"
_SCALE = r"(?:\s?(?:k|K|m|M|bn|million|thousand|billion)\b)?"
_CURRENCY_WORDS = {"dollar": "usd", "dollars": "usd", "usd": "usd", "bucks": "usd", "euro": "eur", "euros": "eur",
                   "eur": "eur", "pound": "gbp", "pounds": "gbp", "gbp": "gbp"}
_SYMBOLS = {"$": "usd", "€": "eur", "£": "gbp"}
_RATE = r"(?:\s*(?:a|an|per|/|each)\s*(?P<rate>month|week|year|day|hour|night|person|pair)\b)?"
_MONEY = re.compile(
    rf"(?P<sym>[$€£])\s?(?P<n1>{_NUM}){_SCALE.replace('(?:', '(?P<s1>', 1)}{_RATE.replace('rate', 'r1')}"
    rf"|(?<![\w.])(?P<n2>{_NUM}){_SCALE.replace('(?:', '(?P<s2>', 1)}\s?(?P<cur>dollars?|usd|bucks|euros?|eur|pounds|gbp)\b"
    rf"{_RATE.replace('rate', 'r2')}", re.I)
_PERCENT = re.compile(rf"(?<![\w.])(?P<n>{_NUM})\s?(?:%|percent\b)", re.I)
_DURATION_SECONDS = {"ms": 0.001, "millisecond": 0.001, "second": 1, "sec": 1, "s": 1, "minute": 60, "min": 60,
                     "hour": 3600, "hr": 3600, "h": 3600, "day": 86400, "week": 604800, "month": 2629800, "year": 31557600}
_DURATION = re.compile(rf"(?<![\w.])(?P<n>{_NUM})\s?(?P<u>ms|milliseconds?|seconds?|secs?|minutes?|mins?|hours?|hrs?|"
                       r"days?|weeks?|months?|years?)\b", re.I)
_MEASURE = re.compile(rf"(?<![\w.])(?P<n>{_NUM})(?P<u>[a-zA-Z]{{1,4}}(?:/[a-zA-Z]{{1,6}})?)\b")  # "150MB", "60fps", "5k/day"
_CLOCK = re.compile(r"(?<![\w:])(?P<h>\d{1,2})(?::(?P<m>\d\d))?\s?(?P<ap>[ap])\.?m\.?(?![\w])", re.I)
_IDENT = re.compile(r"(?<![\w-])(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Z0-9][A-Za-z0-9-]{2,}(?![\w-])")
_NUMBER_WORDS = {"one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7, "eight": 8, "nine": 9,
                 "ten": 10, "eleven": 11, "twelve": 12, "fifteen": 15, "twenty": 20, "thirty": 30, "fifty": 50,
                 "hundred": 100, "dozen": 12}
_BARE = re.compile(rf"\b(?:reached|reaches|hit|hits|totals?|totaling|(?:up|down|increased|decreased|grown|grew|rose|"
                   rf"risen|dropped|fell|climbed|jumped)\s+to|at)\s+(?P<n>{_NUM})(?=\s*(?:[,.;!?)]|$|\s+(?:and|but|so|now|"
                   rf"today|this|last|after|before|by|in|on|as|which)\b))", re.I)
_COUNT = re.compile(rf"(?<![\w.$€£])(?P<n>{_NUM}|{'|'.join(_NUMBER_WORDS)})\s+(?P<rest>(?:[A-Za-z][\w'-]*\s*){{1,5}})",
                    re.I)
# a copula or a linking word between a subject and its value: "is", "went up to", "a budget of"
_LINK = re.compile(
    r"(?:\b(?:is|are|was|were|be|been|becomes?|became|remains?|stays?|stands?\s+at|sits?\s+at|totals?|totaling|"
    r"equals?|hit|hits|reached|reaches|(?:went|goes|gone|go)\s+(?:up|down)\s+to|(?:came|comes|come)\s+to|"
    r"costs?|takes?|took|lasts?|lasted|weighs?|weighed|measures?|measured|runs?|pays?|paid|earns?|earned|charges?|"
    r"charged|holds?|has|have|had|"
    r"(?:rose|risen|rises|fell|fallen|falls|dropped|drops|increased|increases|decreased|decreases|grew|grown|grows|"
    r"jumped|climbed|improved|reduced|cut|raised|lowered|changed|moved|bumped|adjusted|set|updated|"
    r"switched|shifted|extended|pushed|rescheduled)(?:\s+(?:it|that|this|them))?\s*(?:to|at|from)?|"
    r"to|at|of|for|about|around|roughly|approximately|nearly|almost|only|just|now|currently|still|already|a\s+total\s+of)"
    r"\s*|[=:]\s*)+$", re.I)
_COPULA = re.compile(r"\b(?P<subj>(?:[A-Za-z][\w'’-]*\s+){0,4}[A-Za-z][\w'’-]*)\s+(?:is|are|was|were|has\s+become|became|"
                     r"(?:has\s+|have\s+)?changed\s+to|moved\s+to|switched\s+to)\s+(?:now\s+|still\s+|currently\s+|"
                     r"officially\s+|actually\s+)?(?P<val>[^,.;!?]{1,60})", re.I)
_OWNED = re.compile(r"\b(?:(?i:my|our|your)|[A-Z][\w-]*['’]s)\s+(?:[\w'’-]+\s+){0,3}[\w'’-]+\s*$")
_DETERMINERS = frozenset("my your his her our their its the a an this that".split())
_PREPOSITIONS = frozenset("for of in on at with to from into about by".split())
_PRONOUN_SUBJECT = frozenset("i you he she it we they this that there here what which who everything something".split())
_PLAN = re.compile(r"\b(?:want|wants|wanted|plan|plans|planning|planned|goal|goals|target|targets|targeting|aim|aims|"
                   r"aiming|hope|hopes|hoping|intend|intends|going\s+to|gonna|will|'ll|would\s+like|'d\s+like|"
                   r"try|tries|trying|need\s+to|needs\s+to|should|could|might|expect|expects|expecting|by\s+the\s+end|"
                   r"budget\s+for)\b", re.I)
_BOUND = re.compile(r"\b(?:under|below|over|above|less\s+than|more\s+than|fewer\s+than|at\s+least|at\s+most|"
                    r"(?<!went\s)(?<!goes\s)(?<!gone\s)(?<!go\s)up\s+to|"
                    r"within|no\s+more\s+than|max(?:imum)?|min(?:imum)?)\s*$", re.I)
# a value a question takes as given: "how do I handle the 1,000 daily call limit" (not "is it $310?")
_PRESUPPOSED = re.compile(r"\b(?:the|my|our|your|this|its|their)\s+(?:[a-z][\w-]*\s+)?$", re.I)
_MEASURE_NOUNS = frozenset("unit degree percent point line inch foot feet meter metre mile gram pound ounce liter litre "
                           "byte pixel".split())
# a yes/no question asks its value ("Is the deposit $310?"); a wh-question takes the values it
# names as given ("How do I handle the 1,000 daily call limit?": it asks how)
_YES_NO = re.compile(r"\s*(?:is|are|was|were|do|does|did|should|shall|can|could|will|would|may|might|have|has)\b", re.I)
_WH = re.compile(r"\s*(?:how|what|why|which|where|who)\b(?!\s+(?:many|much|long)\b)", re.I)
_HOLDS = re.compile(r"\b(?:new|now|updated|currently|recently|already|has\s+(?:now\s+)?(?:reached|become|grown|risen|"
                    r"dropped|improved|increased|decreased))\b", re.I)
# words that say a value is new or holds now: "now", "new", "updated", and a change of its kind — an
# amount goes up or down ("went up to", "improved to"), a date or time moves ("moved to",
# "rescheduled to"), a state changes ("switched to"); a time verb does not move an amount, nor an
# amount verb a date ("dropped off the cakes on 24 July" is no change of a date)
_CHANGED = re.compile(r"\b(?:now|new|newly|updated?|currently|anymore|changed|changes|instead|replaced|revised)\b", re.I)
_CHANGED_BY_KIND = re.compile(
    r"\b(?P<amount>increased|increases|decreased|decreases|improved|improves|reduced|reduces|raised|raises|lowered|"
    r"lowers|rose|risen|dropped|drops|fell|fallen|grew|grown|jumped|climbed|bumped|upgraded|downgraded|cut|"
    r"(?:went|gone|go|goes)\s+(?:up|down))\b(?!\s+off)"
    r"|\b(?P<moment>moved|moves|rescheduled|postponed|pushed|extended|shortened|shifted|brought\s+forward)\b"
    r"|\b(?P<state>moved|switched|shifted)\b", re.I)
_MOMENTS = (DATE, TIME)
_STATES = (STATE, IDENTIFIER)


def _says_changed(kind: ValueKind, around: str) -> bool:
    """``around`` (a value's clause) says the value is new or holds now, by a word of its kind."""
    if _CHANGED.search(around):
        return True
    for m in _CHANGED_BY_KIND.finditer(around):
        group = "moment" if kind in _MOMENTS else "state" if kind in _STATES else "amount"
        if m.group(group):
            return True
    return False


_DENIAL = re.compile(r"\b(?:never|not|no\s+longer|n't|n’t)\b", re.I)
_PAST = re.compile(r"\b(?:have|has|had|'ve|’ve)\s+(?:\w+\s+)?\w+(?:ed|en|wn|ne|t)\b|\b\w{3,}ed\b|\b(?:did|was|were|got|"
                   r"made|spent|paid|bought|sold|won|lost|ran|took|gave|went|came|saw|wrote|read|began|built|met)\b", re.I)
_CLAUSE_BREAK = re.compile(r"[,;:()]|\s[-–—]\s|\b(?:and|but|so|because|while|although|though|which|who|when|if|"
                           r"since|after|before)\b", re.I)
_ATTRIBUTION = re.compile(r"^\s*[A-Z][\w .'-]{0,40}?\s+(?:said|asked|answered|replied|noted|added):\s*")
_WORD = re.compile(r"[A-Za-z][\w'’-]*")
_VERBISH = frozenset(
    "is are was were be been become became remain remains stay stays stand stands sit sits total totals totaling equal "
    "equals hit hits reach reached reaches went goes gone go rose risen rises fell fallen falls dropped drops increased "
    "increases decreased decreases grew grown grows jumped climbed improved reduced cut raised lowered changed moved "
    "bumped adjusted set updated switched shifted extended pushed rescheduled done finished completed made got get "
    "have has had keep kept planned want wants wanted need needs cost costs came come comes take takes took "
    "last lasts lasted weigh weighs weighed measure measures measured run runs pay pays paid earn earns earned charge "
    "charges charged hold holds every each per spent spend spends spending gone".split())
_CALENDAR = frozenset("january february march april may june july august september october november december jan feb mar "
                      "apr jun jul aug sep sept oct nov dec monday tuesday wednesday thursday friday saturday sunday "
                      "today tomorrow yesterday week weeks month months year years weekend morning evening night".split())
_SUBJECT_STOP = COMMON_STOPWORDS | _VERBISH | _CALENDAR | frozenset(
    "user assistant said asked told now currently still already new old current total amount number "
    "about around roughly approximately nearly almost only just up down also so far recently initially finally "
    "originally previously lately growth".split())


@dataclass(frozen=True)
class ParsedValue:
    """A value a sentence states (see the module doc); ``start``/``end``: where ``said`` is in the text."""

    subject: str
    kind: ValueKind
    unit: str
    value: str
    said: str
    modality: Modality
    start: int
    end: int
    context: str = ""  # the sentence's other content words (what else it is about)
    changed: bool = False  # its clause says it is a new value or what holds now ("improved to", "now")


def _number(s: str) -> float | None:
    s = s.strip().lower().replace(",", "")
    if s in _NUMBER_WORDS:
        return float(_NUMBER_WORDS[s])
    try:
        return float(s)
    except ValueError:
        return None


def _fmt(x: float) -> str:
    return str(int(x)) if x == int(x) else f"{x:.6g}"


def _scaled(n: float, scale: str | None) -> float:
    s = (scale or "").strip().lower()
    return n * {"k": 1e3, "thousand": 1e3, "m": 1e6, "million": 1e6, "bn": 1e9, "billion": 1e9}.get(s, 1)


def _singular(w: str) -> str:
    w = w.lower()
    if len(w) > 4 and w.endswith("ies"):
        return w[:-3] + "y"
    if len(w) > 3 and w.endswith("s") and not w.endswith("ss"):
        return w[:-1]
    return w


def _content_words(text: str) -> list[str]:
    return [w.lower().replace("’", "'") for w in _WORD.findall(text)
            if w.lower() not in _SUBJECT_STOP and w.lower().rstrip("s") not in _CALENDAR
            and not w.lower().endswith(("'s", "’s")) and len(w) > 1]


def _subject_before(clause: str, max_words: int) -> str:
    """The noun phrase a clause ends with, before a linking word: from its last article, possessive
    or speaker name that does not follow a preposition (so "the test coverage for User's API module"
    keeps its head); its last ``max_words`` content words."""
    head = _LINK.sub("", clause).rstrip()
    toks = list(_WORD.finditer(head))
    cut = 0
    for i, t in enumerate(toks):
        w = t.group(0)
        owner = w[:1].isupper() and w.endswith(("'s", "’s"))  # "User's", "Priya's"
        if (w.lower() in _DETERMINERS or owner) and not (i and toks[i - 1].group(0).lower() in _PREPOSITIONS):
            cut = t.end()
    words = _content_words(head[cut:])
    while words and words[-1] in _VERBISH:
        words.pop()
    return " ".join(words[-max_words:])


def _subject_after(text: str, max_words: int) -> str:
    """The noun phrase a value is followed by ("test coverage", "chapters of the thesis"): its
    content words up to a clause break or a verb-like word, at most ``max_words``."""
    m = _CLAUSE_BREAK.search(text)
    part = text[: m.start()] if m else text
    out: list[str] = []
    for w in _WORD.findall(part):
        lw = w.lower().replace("’", "'")
        if lw in ("of", "for", "in", "on", "the", "my", "a", "an", "your", "our", "their", "his", "her") or lw.endswith("'s"):
            continue
        if lw in _SUBJECT_STOP or lw.rstrip("s") in _CALENDAR or _PAST.fullmatch(lw) or lw.endswith("ing"):
            break
        out.append(lw)
        if len(out) == max_words:
            break
    return " ".join(out)


def _clause_before(sentence: str, start: int) -> str:
    """The sentence from the last clause break before ``start`` to ``start``."""
    before = sentence[:start]
    cut = 0
    for m in _CLAUSE_BREAK.finditer(before):
        cut = m.end()
    return before[cut:]


def _clause_after(sentence: str, end: int) -> str:
    """The sentence from ``end`` to the next clause break ("$1,450 now", "78% after the refactor")."""
    m = _CLAUSE_BREAK.search(sentence, end)
    return sentence[end:m.start()] if m else sentence[end:]


def is_question(sentence: str) -> bool:
    """``sentence`` asks: it ends with "?", is an "X asked:" line, or opens with a question word."""
    body = _ATTRIBUTION.sub("", sentence)
    return sentence.rstrip().endswith("?") or body is not sentence and " asked:" in sentence[:len(sentence) - len(body)] \
        or bool(_YES_NO.match(body) or _WH.match(body) or re.match(r"\s*(?:when|how\s+(?:many|much|long))\b", body, re.I))


def _antecedent(sentence: str, start: int) -> str:
    """The nearest clause before ``start``'s own that has content words (what "which" refers to)."""
    breaks = [m for m in _CLAUSE_BREAK.finditer(sentence[:start])]
    for i in range(len(breaks) - 1, 0, -1):
        part = sentence[breaks[i - 1].end():breaks[i].start()]
        if _content_words(part):
            return part
    return sentence[:breaks[0].start()] if breaks else ""


def _modality(sentence: str, start: int, question: bool) -> Modality:
    """The value's modality from its own clause: a word that says the value holds ("new", "now",
    "updated") outweighs a plan word around it ("trying to reflect the new quota of 1,200")."""
    if question and (_YES_NO.match(_ATTRIBUTION.sub("", sentence)) or not _PRESUPPOSED.search(sentence[:start])) \
            and not _WH.match(_ATTRIBUTION.sub("", sentence)):
        return QUESTION
    clause = _clause_before(sentence, start)
    if _BOUND.search(sentence[:start]):
        return PLAN
    # a plan word governs its clause and the verbs joined to it ("gonna explore more and volunteer in
    # August"), up to a comma or a stronger break
    phrase = re.split(r"[,;:()]", sentence[:start])[-1]
    if (_PLAN.search(clause) or _PLAN.search(phrase)) and not _HOLDS.search(clause):
        return PLAN
    if _DENIAL.search(clause):
        return DENIAL
    return DONE if _PAST.search(clause) else NOW


def _overlaps(spans: list[tuple[int, int]], a: int, b: int) -> bool:
    return any(a < e and s < b for s, e in spans)


def _sentence_values(sentence: str, offset: int, max_words: int, context_words: int) -> list[ParsedValue]:
    question = is_question(sentence)
    body_at = 0
    m = _ATTRIBUTION.match(sentence)
    if m:
        body_at = m.end()
    found: list[tuple[int, int, ValueKind, str, str, str]] = []  # start, end, kind, unit, value, subject hint
    taken: list[tuple[int, int]] = []

    def take(a: int, b: int, kind: ValueKind, unit: str, value: str, subject: str = "") -> None:
        if a >= body_at and not _overlaps(taken, a, b):
            taken.append((a, b))
            found.append((a, b, kind, unit, value, subject))

    for m in _MONEY.finditer(sentence):
        n = _number(m.group("n1") or m.group("n2") or "")
        if n is None:
            continue
        cur = _SYMBOLS.get(m.group("sym") or "") or _CURRENCY_WORDS.get((m.group("cur") or "").lower(), "usd")
        rate = m.group("r1") or m.group("r2")
        take(m.start(), m.end(), MONEY, cur + (f"/{rate.lower()}" if rate else ""),
             _fmt(_scaled(n, m.group("s1") or m.group("s2"))))
    for m in _PERCENT.finditer(sentence):
        n = _number(m.group("n"))
        if n is not None:
            take(m.start(), m.end(), PERCENTAGE, "%", _fmt(n))
    for tm in find_time_expressions(sentence):
        if not tm.relative and tm.time.start:
            take(tm.start, tm.end, DATE, "", tm.time.start if tm.time.start == tm.time.end else
                 f"{tm.time.start}..{tm.time.end}")
    for m in _CLOCK.finditer(sentence):
        h, mi = int(m.group("h")), int(m.group("m") or 0)
        if 1 <= h <= 12 and mi < 60:
            h = h % 12 + (12 if m.group("ap").lower() == "p" else 0)
            take(m.start(), m.end(), TIME, "", f"{h:02d}:{mi:02d}")
    for m in _DURATION.finditer(sentence):
        n = _number(m.group("n"))
        u = _singular(m.group("u"))
        u = {"millisecond": "ms", "sec": "second", "min": "minute", "hr": "hour"}.get(u, u)
        if n is not None and u in _DURATION_SECONDS:
            take(m.start(), m.end(), DURATION, "s", _fmt(n * _DURATION_SECONDS[u]))
    for m in _MEASURE.finditer(sentence):
        n = _number(m.group("n"))
        u = m.group("u").lower()
        if n is not None and u not in ("st", "nd", "rd", "th", "s", "am", "pm"):
            take(m.start(), m.end(), COUNT, u, _fmt(n))
    copula = [(m.start("val"), m.end("val"), m.group("subj"), m.group("val")) for m in _COPULA.finditer(sentence)]
    for a, b, subj, val in copula:
        # a state said with a copula, unless a measured value above already is its value
        cut = list(_CLAUSE_BREAK.finditer(subj))
        subj = subj[cut[-1].end():] if cut else subj
        subj_words = _subject_before(subj, max_words)
        first = _WORD.findall(subj)
        if not subj_words or not first or first[-1].lower() in _PRONOUN_SUBJECT or not first[-1].islower():
            continue
        if not _OWNED.search(subj):  # a state of someone's own thing ("my address"), not a description
            continue
        if any(a <= s < b for s, _ in taken):
            continue
        val = re.split(r"\s+(?:and|but|so|because|which|who|since|after|before|while|for|to|with)\s+", val.strip(), maxsplit=1)[0]
        words = val.split()
        if not words or len(words) > 6 or words[0].lower() in COMMON_STOPWORDS - {"a", "an", "the"} \
                or re.search(r"(?:ing|ed)$", words[0].lower()):
            continue
        if all(w.lower() in COMMON_STOPWORDS for w in words):
            continue
        b = a + len(val)
        norm = " ".join(w for w in re.sub(r"[^\w\s-]", " ", val.lower()).split() if w not in ("a", "an", "the"))
        if norm:
            take(a, b, STATE, "", norm, subj_words)
    for m in _IDENT.finditer(sentence):
        take(m.start(), m.end(), IDENTIFIER, "", m.group(0).upper())
    for m in _BARE.finditer(sentence):  # "which has now reached 165": a count of what the clause is about
        n = _number(m.group("n"))
        if n is not None:
            take(m.start("n"), m.end("n"), COUNT, "", _fmt(n))
    for m in _COUNT.finditer(sentence):
        n = _number(m.group("n"))
        noun = next((w for w in _WORD.findall(m.group("rest"))), "")
        if n is None or not noun or not noun.islower() or noun in _SUBJECT_STOP:
            continue
        end = m.start("rest") + len(noun)
        take(m.start(), end, COUNT, _singular(noun), _fmt(n))

    out: list[ParsedValue] = []
    for a, b, kind, unit, value, hint in sorted(found):
        subject = hint
        if not subject:
            clause = _clause_before(sentence, a)
            if not _content_words(_LINK.sub("", clause)):
                # ", which has improved to 78%": the clause's subject is the phrase before it
                clause = _antecedent(sentence, a) + " " + clause
            linked = bool(_LINK.search(clause)) and bool(_content_words(_LINK.sub("", clause)))
            before = _subject_before(clause, max_words) if linked else ""
            after = _subject_after(sentence[b:], max_words)
            if kind == COUNT and unit.isalpha() and " " in sentence[a:b].strip() and \
                    sentence[a:b].lower().rstrip("s").endswith(unit.rstrip("s")):
                # what is counted, after what the count is of ("a quota of 1,200 calls" -> "quota calls";
                # "the photo album with 40 prints" -> "photo album prints")
                noun = sentence[a:b].split()[-1].lower()
                counted = [noun, *after.split()]
                context = before.split() or [w for w in _content_words(_LINK.sub("", clause))
                                             if not w.endswith(("ed", "ing"))][-2:]
                subject = " ".join([*context[-(max_words - 1):], *counted][:max_words])
                if len(subject.split()) < 2 and (len(noun) <= 3 or _singular(noun) in _MEASURE_NOUNS):
                    continue  # "6 cm", "5 units": a measure of nothing named
            elif linked:
                subject = before
            elif after and kind in (PERCENTAGE, MONEY, DURATION, COUNT):
                subject = after
            else:
                subject = " ".join(_content_words(clause)[-max_words:])
        if not subject:
            continue
        if sentence[:a].rstrip().lower().endswith(" from") and re.match(r"\s*(?:to|->|→)\s", sentence[b:]):
            continue  # "from 70% to 90%": the earlier figure is history, the later one is the statement
        mine = set(subject.split())
        context = [w for w in dict.fromkeys(_content_words(sentence[:a] + " " + sentence[b:]))
                   if w not in mine and not w.endswith(("ed", "ing"))]
        out.append(ParsedValue(subject, kind, unit, value, sentence[a:b].strip(), _modality(sentence, a, question),
                               offset + a, offset + b, " ".join(context[:context_words]),
                               _says_changed(kind, _clause_before(sentence, a) + " " + _clause_after(sentence, b))))
    return out


def parse_values(text: str, max_subject_words: int = 4, about: re.Pattern[str] | None = None,
                 context_words: int = 8) -> list[ParsedValue]:
    """The values ``text`` states, in order (see the module doc); ``about``: only in sentences it
    finds (an assistant's statements to a person about that person: "your budget is ...");
    ``context_words``: the sentence's other content words kept as a value's context, at most."""
    out: list[ParsedValue] = []
    at = 0
    for s in split_sentences(text):
        i = text.find(s, at)
        i = at if i < 0 else i
        if about is None or about.search(s):
            out.extend(_sentence_values(s, i, max_subject_words, context_words))
        at = i + len(s)
    return out


_MERIDIEM = re.compile(r"\b([ap])\.m\.?")


def says_value(text: str, value: str) -> bool:
    """``text`` says ``value`` as a whole, case, spacing and "p.m." / "pm" aside ("3 pm" is in "at
    3 P.M.", not in "13 pm"; "april 1" is not in "April 10")."""
    v = _MERIDIEM.sub(r"\1m", " ".join(value.lower().split()))
    if not v:
        return False
    t = _MERIDIEM.sub(r"\1m", " ".join(text.lower().split()))
    return re.search(rf"(?<![\w.,]){re.escape(v)}(?![\w]|[.,]\d)", t) is not None


__all__ = ["ParsedValue", "is_question", "parse_values", "says_value"]
