"""Time expressions: detect, resolve against a reference date, rewrite relative ones as absolute.

Detection is regex-based (``dateparser.search`` is slow and finds times in ordinary words); the
resolution of what a regex found is computed here, deterministically, from the reference datetime
(the session date for conversation text, the question date for queries). ``dateparser`` is only the
last resort for free-form date strings an LLM wrote into a draft's ``start``/``end`` field.

Rules (all relative to ``ref``; weeks run Monday–Sunday; seasons are northern-hemisphere
meteorological seasons: spring Mar–May, summer Jun–Aug, fall Sep–Nov, winter Dec–Feb):

- ``yesterday`` / ``today`` / ``tonight`` / ``tomorrow`` / ``the day before yesterday`` /
  ``last night`` / ``this morning`` … → that day.
- ``last <weekday>`` → the most recent such weekday strictly before ``ref``; ``next <weekday>`` → the
  first one strictly after; ``this <weekday>`` → the one in ``ref``'s week. A bare ``<weekday>`` or
  ``on <weekday>`` → the most recent one on or before ``ref`` (conversation is mostly about the past),
  unless the sentence has a future cue (``will``, ``going to``, ``next``, ``planning`` …), then the
  first one on or after ``ref``. Plural weekdays ("on Saturdays") are habits, not times: skipped.
- ``last/this/next week|month|year`` → that calendar week/month/year; ``last weekend`` → Saturday and
  Sunday of the previous week; ``this weekend`` → of ``ref``'s week; ``the weekend`` → the most recent
  one (or the coming one with a future cue).
- ``N days/weeks/months/years ago`` → that day / the week containing it / that month / that year.
  Vague counts (``a few``, ``several``) give a range ``FEW_RANGE`` units back, e.g. ``a few days ago``
  on 8 May 2023 → 3–6 May 2023, rewritten "a few days before 8 May 2023". ``a couple of`` = 2.
- ``the past/last N <unit>s`` → the range from N units before ``ref`` to ``ref``.
- ``earlier/later this week|month|year`` → the part of that period before/after ``ref``.
- ``recently``, ``lately``, ``these days``, ``soon``: not resolved (too vague to be a useful filter;
  a record's ``created_at`` already carries the session date).
- Explicit dates: ``8 May 2023``, ``8th of May, 2023``, ``May 8, 2023``, ``2023-05-08``,
  ``2023/05/08``; ``05/08/2023`` is read month-first (US, as in the datasets we use) unless the first
  number is over 12 or ``day_first`` is set. A date without a year (``May 8th``) takes ``ref``'s year.
- Months: ``May 2023`` → that month; ``in May`` → the most recent May on or before ``ref``'s month
  (the next one with a future cue); ``last/next May`` → strictly before/after. Month names must be
  capitalised (``may``/``march`` are words) and, without a year, need a preposition before them.
- ``August last year`` / ``March this year`` → that month; ``on the 15th`` → that day of ``ref``'s
  month (the previous month when the 15th is still ahead, the next one with a future cue).
- Years: ``in 2022`` / ``during 2022`` … → that year; ``since 2019`` → 1 Jan 2019 to ``ref``.
- Durations up to now: ``for 3 years now`` / "I've been painting for two months" (needs "now" or
  a perfect tense) → from ``ref`` minus the duration up to ``ref``; rewritten by appending the start,
  "for 3 years now (since 2020)". Other durations ("away for two weeks") are not times.
- ``the other day`` → the week before ``ref`` (range), rewritten "a few days before 8 May 2023".
- Seasons: ``last summer`` → the most recent summer that ended before ``ref``; ``this summer`` → the
  one of ``ref``'s year; ``next summer`` → the first one starting after ``ref``; ``summer 2022``.

Without ``ref``, relative expressions are not resolved (only explicit dates with a year, or a bare
month/day whose year is given elsewhere in the same text).
"""

from __future__ import annotations

import calendar
import re
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from functools import lru_cache
from typing import TYPE_CHECKING, Callable

from .records import TimeSpan

if TYPE_CHECKING:  # only for annotations; encode.py does not import this module either way
    from .encode import RecordDraft, SegmentTurn, TimeDraft

# Vague counts ("a few days ago") resolve to a range this many units back (inclusive bounds).
FEW_RANGE = (2, 5)

MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7, "august": 8,
    "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
    "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
# Not calendar.month_name: that follows the process locale, and rewritten texts must not.
MONTH_NAMES = ["", "January", "February", "March", "April", "May", "June", "July", "August", "September",
               "October", "November", "December"]  # fmt: skip
WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}  # first month of each season
NUMBER_WORDS = {
    "a": 1, "an": 1, "one": 1, "two": 2, "three": 3, "four": 4, "five": 5, "six": 6, "seven": 7,
    "eight": 8, "nine": 9, "ten": 10, "eleven": 11, "twelve": 12, "couple": 2, "a couple": 2,
    "a couple of": 2, "couple of": 2,
}  # fmt: skip
VAGUE_COUNTS = ("a few", "few", "several")

# A sentence containing one of these speaks about the future: bare weekdays/months/weekends resolve forward.
FUTURE_CUES = re.compile(
    r"\b(?:will|won't|going to|gonna|plan|plans|planning|planned to|next|upcoming|coming up|can't wait|"
    r"looking forward|hope to|hoping to|about to|scheduled|tomorrow|wanna|want to|would like to|intend)\b|'ll\b",
    re.I,
)
_MONTH_FULL = r"(?:January|February|March|April|May|June|July|August|September|October|November|December)"
_MONTH_ANY = (
    r"(?:(?:January|February|March|April|May|June|July|August|September|October|November|December)\b|"
    r"(?:Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|Oct|Nov|Dec)\b\.?)"
)
_WD = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
_NUM = r"(?:\d{1,3}|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|(?:a\s+)?couple(?:\s+of)?|(?:a\s+)?few|several)"
_UNIT = r"(?:day|week|weekend|month|year)s?"
# Prepositions a match may start with; "on/in/during/over/at" are replaced by the rewrite's own one,
# the others keep their meaning and are kept ("since 7 May 2023").
_PREP = r"(?:\b(?P<prep>(?i:on|in|during|over|at|since|until|till|by|from|before|after|around))\s+)?"
_REPLACED_PREPS = {"on", "in", "during", "over", "at"}
_TOD = r"(?:\s+(?P<tod>morning|afternoon|evening|night))?"
_DAY_NUM = r"(?P<d>[0-3]?\d)(?:st|nd|rd|th)?"


@dataclass(frozen=True)
class TimeMention:
    """A time expression found in a text.

    ``start``/``end`` are character offsets of the whole matched span (a leading preposition
    included, so a rewrite can replace it); ``time.expression`` holds the wording without it.
    ``absolute`` is the readable absolute form a relative mention is rewritten to (None for
    mentions that are already absolute).
    """

    start: int
    end: int
    text: str
    time: TimeSpan
    relative: bool
    absolute: str | None = None


@dataclass
class _Res:
    """What a pattern handler resolved: the span, its granularity and how to say it absolutely."""

    start: date
    end: date
    granularity: str
    bare: str  # absolute wording without preposition, e.g. "7 May 2023"
    prep: str  # preposition that goes with ``bare`` ("on", "in" or "" for adverbial forms)
    relative: bool


# ---------------------------------------------------------------- date helpers


def fmt_day(d: date) -> str:
    """'7 May 2023' — the readable day form used in rewritten texts."""
    return f"{d.day} {MONTH_NAMES[d.month]} {d.year}"


def fmt_month(y: int, m: int) -> str:
    return f"{MONTH_NAMES[m]} {y}"


def month_end(y: int, m: int) -> date:
    return date(y, m, calendar.monthrange(y, m)[1])


def add_months(y: int, m: int, n: int) -> tuple[int, int]:
    k = y * 12 + (m - 1) + n
    return k // 12, k % 12 + 1


def week_start(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _season_span(name: str, year: int) -> tuple[date, date]:
    """A season instance; winter ``year`` runs from December ``year`` to February ``year + 1``."""
    m0 = SEASONS[name]
    y1, m1 = add_months(year, m0, 2)
    return date(year, m0, 1), month_end(y1, m1)


def _season_label(name: str, start: date) -> str:
    name = "fall" if name == "autumn" else name
    return f"winter {start.year}/{start.year + 1}" if name == "winter" else f"{name} {start.year}"


def granularity_for(start: date, end: date) -> str:
    """Name the granularity of an inclusive date span."""
    if start == end:
        return "day"
    if start.month == 1 and start.day == 1 and end == date(start.year, 12, 31):
        return "year"
    if start.day == 1 and end == month_end(start.year, start.month):
        return "month"
    if start.weekday() == 0 and end - start == timedelta(days=6):
        return "week"
    return "range"


def to_date(value: str | date | datetime | None) -> date | None:
    """A date from an ISO string / date / datetime; None when not parseable."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return value.date()
    if isinstance(value, date):
        return value
    try:
        return datetime.fromisoformat(str(value).strip().replace("Z", "+00:00")).date()
    except ValueError:
        return None


def _num(raw: str) -> int | None:
    r = " ".join(raw.lower().split())
    if r.isdigit():
        return int(r)
    return NUMBER_WORDS.get(r)


def _is_vague(raw: str) -> bool:
    return " ".join(raw.lower().split()) in VAGUE_COUNTS


def _future(ctx: str) -> bool:
    return FUTURE_CUES.search(ctx) is not None


# ---------------------------------------------------------------- handlers
# Each handler gets (match, ref date or None, sentence context, fallback year) → _Res or None.

Handler = Callable[[re.Match, "date | None", str, "int | None"], "_Res | None"]

_DAY_WORDS = {
    "the day before yesterday": (-2, ""),
    "the day after tomorrow": (2, ""),
    "yesterday": (-1, ""),
    "today": (0, ""),
    "earlier today": (0, ""),
    "later today": (0, ""),
    "tonight": (0, "night"),
    "tomorrow": (1, ""),
    "last night": (-1, "night"),
    "this morning": (0, "morning"),
    "this afternoon": (0, "afternoon"),
    "this evening": (0, "evening"),
}


def _h_dayword(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    if ref is None:
        return None
    word = " ".join(m.group("w").lower().split())
    offset, tod = _DAY_WORDS[word]
    tod = (m.group("tod") or "").lower() or tod
    d = ref + timedelta(days=offset)
    bare = f"the {tod} of {fmt_day(d)}" if tod else fmt_day(d)
    return _Res(d, d, "day", bare, "on", True)


def _h_other_day(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    if ref is None:
        return None
    return _Res(ref - timedelta(days=7), ref - timedelta(days=1), "range", f"a few days before {fmt_day(ref)}", "", True)


def _h_weekday(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    if ref is None:
        return None
    mod = " ".join((m.group("mod") or "").lower().split())
    wd = WEEKDAYS[m.group("wd").lower()]
    delta_back = (ref.weekday() - wd) % 7  # days back to the most recent one on or before ref
    if mod in ("last", "this past", "past", "previous"):
        d = ref - timedelta(days=delta_back or 7)
    elif mod in ("next", "this coming", "coming"):
        d = ref + timedelta(days=(wd - ref.weekday()) % 7 or 7)
    elif mod == "this":
        d = week_start(ref) + timedelta(days=wd)
    elif _future(ctx):
        d = ref + timedelta(days=(wd - ref.weekday()) % 7)
    else:
        d = ref - timedelta(days=delta_back)
    tod = (m.group("tod") or "").lower()
    bare = f"the {tod} of {fmt_day(d)}" if tod else fmt_day(d)
    return _Res(d, d, "day", bare, "on", True)


def _weekend_of_week(ws: date) -> tuple[date, date]:
    return ws + timedelta(days=5), ws + timedelta(days=6)


def _weekend_res(ws: date) -> _Res:
    s, e = _weekend_of_week(ws)
    label = f"{s.day}–{fmt_day(e)}" if s.month == e.month else f"{fmt_day(s)} – {fmt_day(e)}"
    return _Res(s, e, "range", f"the weekend of {label}", "on", True)


def _period(unit: str, ref: date, shift: int) -> _Res:
    """The calendar week/weekend/month/year ``shift`` periods from ``ref``'s."""
    if unit == "week":
        ws = week_start(ref) + timedelta(weeks=shift)
        return _Res(ws, ws + timedelta(days=6), "week", f"the week of {fmt_day(ws)}", "in", True)
    if unit == "weekend":
        return _weekend_res(week_start(ref) + timedelta(weeks=shift))
    if unit == "month":
        y, mo = add_months(ref.year, ref.month, shift)
        return _Res(date(y, mo, 1), month_end(y, mo), "month", fmt_month(y, mo), "in", True)
    y = ref.year + shift
    return _Res(date(y, 1, 1), date(y, 12, 31), "year", str(y), "in", True)


def _h_period(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    if ref is None:
        return None
    mod = " ".join(m.group("mod").lower().split())
    unit = m.group("unit").lower()
    if mod in ("the past", "past", "this past") and unit != "weekend":
        # "the past week/month/year" = the last 7 days / month / year up to ref
        start = {"week": ref - timedelta(days=7), "month": _shift_day(ref, months=-1), "year": _shift_day(ref, months=-12)}[unit]
        return _Res(start, ref, "range", f"between {fmt_day(start)} and {fmt_day(ref)}", "", True)
    if mod in ("this past", "past", "the past") and unit == "weekend":
        ws = week_start(ref)
        return _weekend_res(ws if ref.weekday() >= 5 else ws - timedelta(weeks=1))
    shift = {"last": -1, "the previous": -1, "previous": -1, "this": 0, "next": 1, "the coming": 1, "coming": 1,
             "this coming": 1, "the next": 1}[mod]  # fmt: skip
    return _period(unit, ref, shift)


def _h_the_weekend(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    if ref is None:
        return None
    ws = week_start(ref)
    if _future(ctx) or ref.weekday() >= 5:
        return _weekend_res(ws)
    return _weekend_res(ws - timedelta(weeks=1))


def _shift_day(d: date, months: int) -> date:
    y, mo = add_months(d.year, d.month, months)
    return date(y, mo, min(d.day, calendar.monthrange(y, mo)[1]))


def _h_ago(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    if ref is None:
        return None
    raw, unit = m.group("n"), m.group("unit").lower().rstrip("s")
    if _is_vague(raw):
        lo, hi = FEW_RANGE
        if unit == "day":
            s, e = ref - timedelta(days=hi), ref - timedelta(days=lo)
        elif unit in ("week", "weekend"):
            s, e = week_start(ref - timedelta(weeks=hi)), week_start(ref - timedelta(weeks=lo)) + timedelta(days=6)
        elif unit == "month":
            s, e = date(*add_months(ref.year, ref.month, -hi), 1), month_end(*add_months(ref.year, ref.month, -lo))
        else:
            s, e = date(ref.year - hi, 1, 1), date(ref.year - lo, 12, 31)
        words = " ".join(raw.lower().split())
        words = "a few" if words == "few" else words
        return _Res(s, e, "range", f"{words} {unit}s before {fmt_day(ref)}", "", True)
    n = _num(raw)
    if n is None or n > 400:
        return None
    if unit == "day":
        d = ref - timedelta(days=n)
        return _Res(d, d, "day", fmt_day(d), "on", True)
    if unit == "weekend":
        return _period("weekend", ref, -n)
    if unit == "week":
        ws = week_start(ref - timedelta(weeks=n))
        return _Res(ws, ws + timedelta(days=6), "week", f"the week of {fmt_day(ws)}", "in", True)
    if unit == "month":
        return _period("month", ref, -n)
    return _period("year", ref, -n)


def _h_in_future(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    """'in two weeks' / 'three days from now' — only with a future cue ('in 2 days' is often a duration)."""
    if ref is None or _is_vague(m.group("n")):
        return None
    if m.group("fromnow") is None and (m.group("in") is None or not _future(ctx)):
        return None
    n = _num(m.group("n"))
    unit = m.group("unit").lower().rstrip("s")
    if n is None or n > 400:
        return None
    if unit == "day":
        d = ref + timedelta(days=n)
        return _Res(d, d, "day", fmt_day(d), "on", True)
    if unit == "week":
        ws = week_start(ref + timedelta(weeks=n))
        return _Res(ws, ws + timedelta(days=6), "week", f"the week of {fmt_day(ws)}", "in", True)
    return _period(unit if unit in ("weekend", "month") else "year", ref, n)


def _h_past_n(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    """'the past three weeks' / 'the last few months' → from N units before ref up to ref."""
    if ref is None:
        return None
    raw = m.group("n") or "1"
    n = FEW_RANGE[1] if _is_vague(raw) else _num(raw)
    unit = m.group("unit").lower().rstrip("s")
    if n is None or n > 400 or unit == "weekend":
        return None
    if unit == "day":
        s = ref - timedelta(days=n)
    elif unit == "week":
        s = ref - timedelta(weeks=n)
    else:
        s = _shift_day(ref, months=-n * (12 if unit == "year" else 1))
    return _Res(s, ref, "range", f"between {fmt_day(s)} and {fmt_day(ref)}", "", True)


def _h_earlier_later(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    if ref is None:
        return None
    p = _period(m.group("unit").lower(), ref, 0)
    if m.group("el").lower() == "earlier":
        return _Res(p.start, ref, "range", f"between {fmt_day(p.start)} and {fmt_day(ref)}", "", True)
    return _Res(ref, p.end, "range", f"between {fmt_day(ref)} and {fmt_day(p.end)}", "", True)


def _safe_date(y: int, mo: int, d: int) -> date | None:
    try:
        return date(y, mo, d)
    except ValueError:
        return None


def _day_res(d: date | None, relative: bool = False) -> _Res | None:
    return None if d is None else _Res(d, d, "day", fmt_day(d), "on", relative)


def _year4(raw: str) -> int:
    y = int(raw)
    return y + 2000 if y < 100 else y


def _h_iso(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    return _day_res(_safe_date(int(m.group("y")), int(m.group("mo")), int(m.group("d"))))


def _make_h_slash(day_first: bool) -> Handler:
    def _h_slash(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
        a, b, y = int(m.group("a")), int(m.group("b")), _year4(m.group("y"))
        mo, d = (b, a) if (day_first or a > 12) else (a, b)
        return _day_res(_safe_date(y, mo, d))

    return _h_slash


def _year_or_ref(m: re.Match, ref: date | None, fy: int | None) -> int | None:
    if m.group("y"):
        return int(m.group("y"))
    return ref.year if ref is not None else fy


def _h_dmy(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    y = _year_or_ref(m, ref, fy)
    if y is None:
        return None
    return _day_res(_safe_date(y, MONTHS[m.group("mon").lower().rstrip(".")], int(m.group("d"))))


def _h_month_year(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    y, mo = int(m.group("y")), MONTHS[m.group("mon").lower().rstrip(".")]
    return _Res(date(y, mo, 1), month_end(y, mo), "month", fmt_month(y, mo), "in", False)


_REL_MODS = {"last", "this past", "past", "next", "this coming", "coming", "this"}


def _h_month(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    mo = MONTHS[m.group("mon").lower()]
    mod = " ".join((m.group("mod") or "").lower().split())
    if ref is None:
        if fy is None:
            return None
        y = fy
    elif mod in ("last", "this past", "past"):
        y = ref.year if mo < ref.month else ref.year - 1
    elif mod in ("next", "this coming", "coming"):
        y = ref.year if mo > ref.month else ref.year + 1
    elif mod == "this":
        y = ref.year
    elif _future(ctx):
        y = ref.year if mo >= ref.month else ref.year + 1
    else:
        y = ref.year if mo <= ref.month else ref.year - 1
    # "last/next/this May" is rewritten with its year; a bare "in May" is left as written
    return _Res(date(y, mo, 1), month_end(y, mo), "month", fmt_month(y, mo), "in", ref is not None and mod in _REL_MODS)


def _h_month_rel_year(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    """'August last year' / 'March this year' / 'June next year'."""
    if ref is None:
        return None
    y = ref.year + {"last": -1, "this": 0, "next": 1}[m.group("rel").lower()]
    mo = MONTHS[m.group("mon").lower()]
    return _Res(date(y, mo, 1), month_end(y, mo), "month", fmt_month(y, mo), "in", True)


def _h_day_of_month(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    """'on the 15th' → that day of ref's month (or the previous month when it would be after ref,
    the next when the sentence speaks about the future)."""
    if ref is None:
        return None
    d = int(m.group("d"))
    if not 1 <= d <= 31:
        return None
    if _future(ctx):
        y, mo = (ref.year, ref.month) if d >= ref.day else add_months(ref.year, ref.month, 1)
    else:
        y, mo = (ref.year, ref.month) if d <= ref.day else add_months(ref.year, ref.month, -1)
    day = _safe_date(y, mo, d)
    return None if day is None else _Res(day, day, "day", fmt_day(day), "on", True)


_PERFECT = re.compile(r"\b(?:been|have|has|had)\b|'ve\b", re.I)


def _h_duration_now(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    """'for 3 years now' / 'I've been painting for 7 years' → since (ref − duration), up to ref.

    The wording is kept and the start added: "for 3 years now (since 2020)". Needs "now" or a
    perfect tense in the sentence; vague counts are skipped."""
    if ref is None or _is_vague(m.group("n")):
        return None
    if m.group("now") is None and _PERFECT.search(ctx) is None:
        return None
    n = _num(m.group("n"))
    unit = m.group("unit").lower().rstrip("s")
    if n is None or n > 100 or unit == "weekend":
        return None
    if unit == "year":
        s, label = date(ref.year - n, 1, 1), str(ref.year - n)
    elif unit == "month":
        y, mo = add_months(ref.year, ref.month, -n)
        s, label = date(y, mo, 1), fmt_month(y, mo)
    elif unit == "week":
        s = week_start(ref - timedelta(weeks=n))
        label = f"the week of {fmt_day(s)}"
    else:
        s = ref - timedelta(days=n)
        label = fmt_day(s)
    return _Res(s, ref, "range", f"{m.group(0)} (since {label})", "", True)


def _h_year(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    y = int(m.group("y"))
    return _Res(date(y, 1, 1), date(y, 12, 31), "year", str(y), "in", False)


def _h_season(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> _Res | None:
    name = m.group("s").lower()
    mod = " ".join((m.groupdict().get("mod") or "").lower().split())
    if mod == "the" and (m.group("prep") or "").lower() not in ("in", "during", "over"):
        return None  # "the fall" alone is usually not the season
    if m.group("y"):
        s, e = _season_span(name, int(m.group("y")))
        return _Res(s, e, "range", _season_label(name, s), "in", False)
    if ref is None:
        return None
    # instances around ref: the one of the previous, current and next (season-)year
    inst = [_season_span(name, y) for y in (ref.year - 2, ref.year - 1, ref.year, ref.year + 1)]
    if mod in ("last", "this past", "past"):
        s, e = [x for x in inst if x[1] < ref][-1]
    elif mod in ("next", "this coming", "coming"):
        s, e = [x for x in inst if x[0] > ref][0]
    elif mod == "this":
        s, e = [x for x in inst if x[1] >= ref][0] if name == "winter" else _season_span(name, ref.year)
    elif _future(ctx):
        s, e = [x for x in inst if x[1] >= ref][0]
    else:
        s, e = [x for x in inst if x[0] <= ref][-1]
    return _Res(s, e, "range", _season_label(name, s), "in", mod in _REL_MODS)


# ---------------------------------------------------------------- patterns

# Prefilter keyword groups (lowercase substrings): running ~20 regexes on every sentence is the cost
# of this module, so each pattern first checks that its keywords occur at all. ``_DIGIT`` = any digit.
_DIGIT = "#digit"
_K_UNITS = ("day", "week", "month", "year")
_K_MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_K_DAYWORD = (("yesterday", "today", "tonight", "tomorrow", "night", "morning", "afternoon", "evening"),)


def _compile(day_first: bool) -> list[tuple[re.Pattern, Handler, tuple[tuple[str, ...], ...]]]:
    """(pattern, handler, prefilter) triples; a pattern only runs when each prefilter group has a hit."""
    I = re.I  # noqa: E741
    return [
        (re.compile(_PREP + r"\b(?P<w>the\s+day\s+before\s+yesterday|the\s+day\s+after\s+tomorrow|earlier\s+today|later\s+today|"
                    r"yesterday|today|tonight|tomorrow|last\s+night|this\s+morning|this\s+afternoon|this\s+evening)\b"
                    r"(?:\s+(?P<tod>morning|afternoon|evening|night)\b)?", I), _h_dayword, _K_DAYWORD),
        (re.compile(_PREP + r"\bthe\s+other\s+day\b", I), _h_other_day, (("other day",),)),
        (re.compile(_PREP + r"\b(?:(?P<mod>last|this\s+past|this\s+coming|this|next|coming|previous)\s+)?(?P<wd>" + _WD + r")(?!s\b)\b" + _TOD + r"\b", I), _h_weekday, (tuple(WEEKDAYS),)),
        (re.compile(_PREP + r"\b(?P<el>earlier|later)\s+this\s+(?P<unit>week|month|year)\b", I), _h_earlier_later, (("earlier this", "later this"),)),
        (re.compile(_PREP + r"\b(?:the\s+)?(?:past|last)\s+(?P<n>" + _NUM + r")\s+(?P<unit>" + _UNIT + r")\b", I), _h_past_n, (("past", "last"), _K_UNITS)),
        (re.compile(_PREP + r"\b(?P<mod>last|this\s+past|this\s+coming|this|next|the\s+previous|previous|the\s+coming|coming|the\s+past|past|the\s+next)\s+(?P<unit>week|weekend|month|year)\b", I), _h_period, (("last", "this", "next", "previous", "coming", "past"), _K_UNITS)),
        (re.compile(r"\b(?:(?P<prep>on|over|during|at|in)\s+)?the\s+weekend\b", I), _h_the_weekend, (("the weekend",),)),
        (re.compile(_PREP + r"\b(?:about\s+|around\s+|almost\s+|nearly\s+|over\s+|more\s+than\s+|just\s+|only\s+)?(?P<n>" + _NUM + r")\s+(?P<unit>" + _UNIT + r")\s+ago\b", I), _h_ago, (("ago",),)),
        (re.compile(r"\b(?P<in>in\s+)?(?P<n>" + _NUM + r")\s+(?P<unit>" + _UNIT + r")(?P<fromnow>\s+from\s+now)?\b", I), _h_in_future, (("in ", "from now"), _K_UNITS)),
        (re.compile(r"\b(?i:for)\s+(?:(?i:about|almost|nearly|just\s+under|just\s+over|over|more\s+than|around|roughly)\s+)?(?P<n>" + _NUM + r")\s+(?P<unit>" + _UNIT + r")(?P<now>\s+(?i:now))?\b", I), _h_duration_now, (("for ",), _K_UNITS)),
        (re.compile(_PREP + r"\b(?P<mon>" + _MONTH_FULL + r")\s+(?:of\s+)?(?P<rel>(?i:last|this|next))\s+(?i:year)\b"), _h_month_rel_year, (_K_MONTHS, ("year",))),
        (re.compile(r"\b(?P<prep>(?i:on|by|since|until|till|before|after))\s+the\s+(?P<d>[0-3]?\d)(?:st|nd|rd|th)\b"), _h_day_of_month, ((_DIGIT,), ("the ",))),
        (re.compile(_PREP + r"\b(?P<y>(?:19|20)\d{2})-(?P<mo>[01]?\d)-(?P<d>[0-3]?\d)\b"), _h_iso, ((_DIGIT,), ("-", "/"))),
        (re.compile(_PREP + r"\b(?P<y>(?:19|20)\d{2})/(?P<mo>[01]?\d)/(?P<d>[0-3]?\d)\b"), _h_iso, ((_DIGIT,), ("-", "/"))),
        (re.compile(_PREP + r"\b(?P<a>[0-3]?\d)/(?P<b>[0-3]?\d)/(?P<y>(?:19|20)\d{2}|\d{2})\b"), _make_h_slash(day_first), ((_DIGIT,), ("/",))),
        (re.compile(_PREP + r"\b(?:the\s+)?" + _DAY_NUM + r"\s+(?:of\s+)?(?P<mon>" + _MONTH_ANY + r"),?(?:\s+(?P<y>(?:19|20)\d{2})\b)?"), _h_dmy, ((_DIGIT,), _K_MONTHS)),
        (re.compile(_PREP + r"\b(?P<mon>" + _MONTH_ANY + r")\s+(?:the\s+)?" + _DAY_NUM + r"\b(?![:.]\d)(?:,?\s+(?P<y>(?:19|20)\d{2})\b)?"), _h_dmy, ((_DIGIT,), _K_MONTHS)),
        (re.compile(_PREP + r"\b(?:(?:early|mid|late)[\s-]+)?(?P<mon>" + _MONTH_ANY + r"),?\s+(?:of\s+)?(?P<y>(?:19|20)\d{2})\b"), _h_month_year, ((_DIGIT,), _K_MONTHS)),
        (re.compile(r"\b(?:(?P<prep>(?i:in|during|since|until|till|by|from|before|after|around|through|of|between))\s+(?:(?i:early|mid|late)[\s-]+)?|"
                    r"(?P<mod>(?i:last|this\s+past|this\s+coming|this|next|early|mid|late))\s+)(?P<mon>" + _MONTH_FULL + r")\b(?!\s*\d)"), _h_month, (_K_MONTHS,)),
        (re.compile(r"\b(?:(?P<prep>in|during|since|until|till|by|from|before|after|around|through|of|between|and|to)\s+(?:the\s+year\s+)?|the\s+year\s+)(?P<y>(?:19|20)\d{2})\b(?!\s*[-/]\d)", I), _h_year, (("19", "20"),)),
        (re.compile(_PREP + r"\b(?:(?P<mod>last|this\s+past|this\s+coming|this|next|the|coming)\s+)(?P<s>spring|summer|fall|autumn|winter)\b(?:\s+(?:of\s+)?(?P<y>(?:19|20)\d{2})\b)?", I), _h_season, (tuple(SEASONS),)),
        (re.compile(_PREP + r"\b(?P<s>spring|summer|fall|autumn|winter)\s+(?:of\s+)?(?P<y>(?:19|20)\d{2})\b", I), _h_season, (tuple(SEASONS),)),
    ]  # fmt: skip


@lru_cache(maxsize=2)
def _patterns(day_first: bool) -> list[tuple[re.Pattern, Handler, tuple[re.Pattern, ...]]]:
    """Compiled patterns with each prefilter group turned into one substring-alternation regex."""
    out = []
    for pat, handler, groups in _compile(day_first):
        pre = tuple(re.compile(r"\d") if g == (_DIGIT,) else re.compile("|".join(re.escape(k) for k in g)) for g in groups)
        out.append((pat, handler, pre))
    return out


_SENT_END = re.compile(r"[.!?\n]")
# A preposition right before a match that did not capture one ("since last May"), and a verb right
# after one used as a subject ("this week was busy"): the rewrite then uses the bare absolute form.
_PREP_BEFORE = re.compile(r"\b(?:on|in|during|over|at|since|until|till|by|from|before|after|around|of|between|to|and)\s+$", re.I)
_SUBJECT_AFTER = re.compile(r"\s+(?:was|is|has|had|went|will|seems|seemed|felt|feels|looks|looked|been)\b", re.I)
_YEAR_IN_TEXT = re.compile(r"\b((?:19|20)\d{2})\b")


_RECURRING_BEFORE = re.compile(r"\b(?:every|each)\s+$", re.I)


def _context(text: str, start: int, end: int) -> str:
    """The sentence around a match (for tense cues)."""
    s = max((m.end() for m in _SENT_END.finditer(text, 0, start)), default=0)
    e = _SENT_END.search(text, end)
    return text[s : e.start() if e else len(text)]


def _as_ref(ref: datetime | date | str | None) -> date | None:
    return to_date(ref) if ref is not None else None


def find_time_expressions(text: str, ref: datetime | date | str | None = None, *, day_first: bool = False) -> list[TimeMention]:
    """All time expressions in ``text`` in order, non-overlapping (longest match wins).

    Relative expressions are resolved against ``ref`` and skipped when it is None. See the module
    docstring for the rules.
    """
    if not text:
        return []
    rd = _as_ref(ref)
    fy_m = _YEAR_IN_TEXT.search(text) if rd is None else None
    fallback_year = int(fy_m.group(1)) if fy_m else None
    low = text.lower()
    hits: dict[re.Pattern, bool] = {}
    cands: list[tuple[int, int, int, re.Match, Handler]] = []
    for order, (pat, handler, groups) in enumerate(_patterns(day_first)):
        ok = True
        for g in groups:
            hit = hits.get(g)
            if hit is None:
                hit = hits[g] = g.search(low) is not None
            if not hit:
                ok = False
                break
        if not ok:
            continue
        for m in pat.finditer(text):
            cands.append((m.start(), -(m.end() - m.start()), order, m, handler))
    cands.sort(key=lambda c: (c[0], c[1], c[2]))
    out: list[TimeMention] = []
    taken_until = -1
    for start, _neg, _order, m, handler in cands:
        end = m.end()
        if start < taken_until:
            continue
        try:
            res = handler(m, rd, _context(text, start, end), fallback_year)
        except (OverflowError, ValueError):  # resolves outside the datetime range (e.g. "tomorrow" on 9999-12-31)
            continue
        if res is None:
            continue
        if res.relative and _RECURRING_BEFORE.search(text, max(0, start - 8), start):
            continue  # "every Sunday" recurs: it is no single date, so nothing to resolve or rewrite
        prep = (m.groupdict().get("prep") or "").lower()
        expr_start = m.end("prep") if prep else start
        while expr_start < end and text[expr_start].isspace():
            expr_start += 1
        expression = text[expr_start:end]
        s, e, gran = res.start, res.end, res.granularity
        if prep == "since" and rd is not None and rd > s:
            e, gran = rd, "range"
            expression = text[start:end]
        if prep in ("between", "and", "to"):
            # part of a range phrase: not a preposition we own, keep it and the rest of the phrase
            start = m.end("prep")
            while text[start].isspace():
                start += 1
            absolute = res.bare
        elif prep and prep not in _REPLACED_PREPS:
            absolute = f"{prep} {res.bare}"
        elif not prep and (_PREP_BEFORE.search(text, max(0, start - 12), start) or _SUBJECT_AFTER.match(text, end)):
            # "since last May" / "this week went well": the phrase already has its role in the sentence
            absolute = res.bare
        else:
            absolute = f"{res.prep} {res.bare}".strip()
        before = text[:start].rstrip()
        if not before or before[-1] in ".!?:\"\n":  # sentence-initial: keep the capital there
            absolute = absolute[0].upper() + absolute[1:]
        out.append(
            TimeMention(
                start=start,
                end=end,
                text=text[start:end],
                time=TimeSpan(start=s.isoformat(), end=e.isoformat(), granularity=gran, expression=expression),  # type: ignore[arg-type]
                relative=res.relative,
                absolute=absolute if res.relative else None,
            )
        )
        taken_until = end
    return out


def rewrite_relative(text: str, ref: datetime | date | str | None, *, day_first: bool = False) -> tuple[str, list[TimeMention]]:
    """Replace relative time expressions by absolute ones; returns (new text, all mentions found).

    "yesterday" → "on 7 May 2023", "last week" → "in the week of 1 May 2023", "next month" →
    "in June 2023", "two years ago" → "in 2021", "a few days ago" → "a few days before 8 May 2023".
    Absolute expressions (and everything when ``ref`` is None) are left as they are.
    """
    mentions = find_time_expressions(text, ref, day_first=day_first)
    if not any(m.relative for m in mentions):
        return text, mentions
    parts: list[str] = []
    pos = 0
    for m in mentions:
        if not m.relative or m.absolute is None:
            continue
        parts.append(text[pos : m.start])
        parts.append(m.absolute)
        pos = m.end
    parts.append(text[pos:])
    return "".join(parts), mentions


# ---------------------------------------------------------------- drafts and records

_ISO_POINT = re.compile(
    r"^(?P<y>\d{4})(?:-(?P<mo>\d{1,2})(?:-(?P<d>\d{1,2})(?P<t>[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?)?)?$"
)


def _parse_point(value: str | None, ref: date | None, day_first: bool) -> tuple[date, date, str] | None:
    """(start, end, granularity) of one drafted date value; None when it cannot be read."""
    if not value or not str(value).strip():
        return None
    s = " ".join(str(value).split())
    m = _ISO_POINT.match(s)
    if m:
        try:
            y = int(m.group("y"))
            if not m.group("mo"):
                return date(y, 1, 1), date(y, 12, 31), "year"
            mo = int(m.group("mo"))
            if not m.group("d"):
                return date(y, mo, 1), month_end(y, mo), "month"
            d = date(y, mo, int(m.group("d")))
            return d, d, "datetime" if m.group("t") else "day"
        except ValueError:
            return None
    found = find_time_expressions(s, ref, day_first=day_first)
    if found:
        t = found[0].time
        return date.fromisoformat(t.start), date.fromisoformat(t.end), t.granularity or "range"  # type: ignore[arg-type]
    return _dateparser_point(s, ref, day_first)


@lru_cache(maxsize=4096)
def _dateparser_point(s: str, ref: date | None, day_first: bool) -> tuple[date, date, str] | None:
    """Last resort for free-form draft dates; strict (all of day, month, year) to avoid guesses."""
    import dateparser  # lazy: importing it costs ~0.3 s

    settings = {
        "STRICT_PARSING": True,
        "RETURN_AS_TIMEZONE_AWARE": False,
        "DATE_ORDER": "DMY" if day_first else "MDY",
    }
    if ref is not None:
        settings["RELATIVE_BASE"] = datetime(ref.year, ref.month, ref.day)
    try:
        dt = dateparser.parse(s, languages=["en"], settings=settings)
    except Exception:  # dateparser raises assorted errors on odd strings; unreadable is the answer
        return None
    if dt is None:
        return None
    return dt.date(), dt.date(), "day"


def normalise_time(
    draft: TimeDraft | None, texts: list[str] | None = None, ref: datetime | date | str | None = None, *, day_first: bool = False
) -> TimeSpan:
    """A record's normalised time.

    Uses the draft's ``start``/``end`` when readable (``YYYY`` → the year, ``YYYY-MM`` → the month,
    ``YYYY-MM-DD`` → the day, an ISO datetime → its day with granularity ``datetime``, or a free-form
    date); otherwise the draft's ``expression``, then the first time expression in ``texts`` (the
    record text first, then its source turns), resolved against ``ref``. Empty TimeSpan if none.
    """
    rd = _as_ref(ref)
    expression = draft.expression if draft is not None else None
    if draft is not None:
        s = _parse_point(draft.start, rd, day_first)
        e = _parse_point(draft.end, rd, day_first)
        if s or e:
            s = s or e
            e = e or s
            assert s is not None and e is not None
            start, end = min(s[0], e[0]), max(s[1], e[1])
            if s == e:
                gran = s[2]
            elif s[2] == "datetime" and e[2] == "datetime" and start == end:
                gran = "datetime"
            else:
                gran = granularity_for(start, end)
            return TimeSpan(start=start.isoformat(), end=end.isoformat(), granularity=gran, expression=expression)  # type: ignore[arg-type]
        if expression:
            found = find_time_expressions(expression, rd, day_first=day_first)
            if found:
                return found[0].time.model_copy(update={"expression": expression})
    for text in texts or []:
        first = _first_time(text, rd, day_first)
        if first is not None:
            return first.model_copy()
    return TimeSpan()


@lru_cache(maxsize=8192)
def _first_time(text: str, ref: date | None, day_first: bool) -> TimeSpan | None:
    """First time in a text; cached because every record of a turn searches that turn's content."""
    found = find_time_expressions(text, ref, day_first=day_first)
    return found[0].time if found else None


def resolve_record_time(draft: RecordDraft, turns: list[SegmentTurn]) -> TimeSpan:
    """``finalise_records(..., resolve_time=resolve_record_time)``: ref = the first source turn's
    session date; texts = the draft's text, then its source turns' contents."""
    ref = next((t.session_date for t in turns if t.session_date), None)
    return normalise_time(draft.time, [draft.text] + [t.content for t in turns], ref)


def make_resolver(*, day_first: bool = False, search_turns: bool = True) -> Callable[[RecordDraft, list[SegmentTurn]], TimeSpan]:
    """A ``resolve_time`` callable for :func:`~lychee_ray.encode.finalise_records`.

    ``search_turns``: when the draft's own time and text carry no time, fall back to the source
    turns' contents (True, default) or leave the time empty (False).
    """

    def resolve(draft: RecordDraft, turns: list[SegmentTurn]) -> TimeSpan:
        ref = next((t.session_date for t in turns if t.session_date), None)
        texts = [draft.text] + ([t.content for t in turns] if search_turns else [])
        return normalise_time(draft.time, texts, ref, day_first=day_first)

    return resolve


# ---------------------------------------------------------------- queries

_BETWEEN = re.compile(r"\b(?:between|from)\b", re.I)
_OPEN_BEFORE = {"before", "until", "till", "by"}
_OPEN_AFTER = {"after"}


def parse_query_time(question: str, question_date: datetime | date | str | None = None, *, day_first: bool = False) -> TimeSpan | None:
    """The time range a question names, for the planner's time constraint; None when none.

    "… in May 2023?" → May 2023; "… last week?" → that week (needs ``question_date``);
    "between March and May 2023" / "from 2019 to 2021" → the covering range; "before 2023" →
    open start (``start`` None); "after May 2023" / "since 2019" → from then on (``end`` None
    for "after", ``question_date`` for "since" when known).
    """
    found = find_time_expressions(question, question_date, day_first=day_first)
    if not found:
        return None
    first = found[0]
    if len(found) >= 2 and _BETWEEN.search(question[: first.start + 12]):
        a, b = found[0].time, found[1].time
        start, end = min(a.start, b.start), max(a.end, b.end)  # type: ignore[type-var]
        return TimeSpan(start=start, end=end, granularity="range", expression=question[first.start : found[1].end].strip())
    prep = first.text.split(None, 1)[0].lower() if first.text.split() else ""
    t = first.time
    if prep in _OPEN_BEFORE and prep != first.text.lower():
        end = t.end if prep == "by" else (date.fromisoformat(t.start) - timedelta(days=1)).isoformat()  # type: ignore[arg-type]
        return TimeSpan(start=None, end=end, granularity="range", expression=first.text)
    if prep in _OPEN_AFTER:
        start = (date.fromisoformat(t.end) + timedelta(days=1)).isoformat()  # type: ignore[arg-type]
        return TimeSpan(start=start, end=None, granularity="range", expression=first.text)
    if prep == "since":
        return TimeSpan(start=t.start, end=t.end if question_date is not None else None, granularity="range", expression=first.text)
    return t
