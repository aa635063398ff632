"""Resolving a matched time expression against a reference date.

Each resolver gets ``(match, ref date or None, the sentence around the match, fallback year)`` — the
fallback year is one written elsewhere in the text, for month/day mentions without a year when
there is no ``ref`` — and returns a :class:`Resolution`, or None when the match is no time (or
cannot be resolved without ``ref``). The rules are listed in :mod:`lychee_ray.text.time`.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, timedelta
from collections.abc import Callable
from typing import TYPE_CHECKING

from lychee_ray.text.dates import add_months, month_end, readable_day, readable_month, shift_months, week_start
from lychee_ray.text.time.words import (
    FEW_RANGE,
    MONTHS,
    WEEKDAYS,
    has_future_cue,
    is_vague,
    parse_count,
    season_label,
    season_span,
)

if TYPE_CHECKING:  # the name only
    from lychee_ray.core.records import TimeGranularity

# Counts above these are not times ("500 days ago" is a number, not a date) …
_MAX_COUNT = 400
# … and durations up to now longer than this many units are not either.
_MAX_DURATION = 100
# Two-digit years ("05/08/23") are in this century.
_CENTURY = 2000
_CENTURY_YEARS = 100
_SATURDAY = 5


@dataclass
class Resolution:
    """What a resolver found: the span, its granularity and how to say it absolutely."""

    start: date
    end: date
    granularity: TimeGranularity
    bare: str  # absolute wording without preposition, e.g. "7 May 2023"
    prep: str  # preposition that goes with ``bare`` ("on", "in" or "" for adverbial forms)
    relative: bool


# (match, ref date or None, sentence context, fallback year) → Resolution or None.
Handler = Callable[[re.Match, "date | None", str, "int | None"], "Resolution | None"]

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


def resolve_day_word(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'yesterday', 'tonight', 'this morning' … → that day."""
    if ref is None:
        return None
    word = " ".join(m.group("w").lower().split())
    offset, tod = _DAY_WORDS[word]
    tod = (m.group("tod") or "").lower() or tod
    d = ref + timedelta(days=offset)
    bare = f"the {tod} of {readable_day(d)}" if tod else readable_day(d)
    return Resolution(d, d, "day", bare, "on", True)


def resolve_other_day(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'the other day' → the week before ``ref``."""
    if ref is None:
        return None
    return Resolution(ref - timedelta(days=7), ref - timedelta(days=1), "range", f"a few days before {readable_day(ref)}", "", True)


def resolve_weekday(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'last/next/this Friday', a bare 'Friday' → that day (see the package rules)."""
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
    elif has_future_cue(ctx):
        d = ref + timedelta(days=(wd - ref.weekday()) % 7)
    else:
        d = ref - timedelta(days=delta_back)
    tod = (m.group("tod") or "").lower()
    bare = f"the {tod} of {readable_day(d)}" if tod else readable_day(d)
    return Resolution(d, d, "day", bare, "on", True)


def _weekend_of_week(ws: date) -> tuple[date, date]:
    return ws + timedelta(days=5), ws + timedelta(days=6)


def _weekend_res(ws: date) -> Resolution:
    s, e = _weekend_of_week(ws)
    label = f"{s.day}–{readable_day(e)}" if s.month == e.month else f"{readable_day(s)} – {readable_day(e)}"
    return Resolution(s, e, "range", f"the weekend of {label}", "on", True)


def _period(unit: str, ref: date, shift: int) -> Resolution:
    """The calendar week/weekend/month/year ``shift`` periods from ``ref``'s."""
    if unit == "week":
        ws = week_start(ref) + timedelta(weeks=shift)
        return Resolution(ws, ws + timedelta(days=6), "week", f"the week of {readable_day(ws)}", "in", True)
    if unit == "weekend":
        return _weekend_res(week_start(ref) + timedelta(weeks=shift))
    if unit == "month":
        y, mo = add_months(ref.year, ref.month, shift)
        return Resolution(date(y, mo, 1), month_end(y, mo), "month", readable_month(y, mo), "in", True)
    y = ref.year + shift
    return Resolution(date(y, 1, 1), date(y, 12, 31), "year", str(y), "in", True)


def resolve_period(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'last/this/next week|weekend|month|year', 'the past month' → that period."""
    if ref is None:
        return None
    mod = " ".join(m.group("mod").lower().split())
    unit = m.group("unit").lower()
    if mod in ("the past", "past", "this past") and unit != "weekend":
        # "the past week/month/year" = the last 7 days / month / year up to ref
        start = {"week": ref - timedelta(days=7), "month": shift_months(ref, months=-1), "year": shift_months(ref, months=-12)}[unit]
        return Resolution(start, ref, "range", f"between {readable_day(start)} and {readable_day(ref)}", "", True)
    if mod in ("this past", "past", "the past") and unit == "weekend":
        ws = week_start(ref)
        return _weekend_res(ws if ref.weekday() >= _SATURDAY else ws - timedelta(weeks=1))
    shift = {"last": -1, "the previous": -1, "previous": -1, "this": 0, "next": 1, "the coming": 1, "coming": 1,
             "this coming": 1, "the next": 1}[mod]  # fmt: skip
    return _period(unit, ref, shift)


def resolve_the_weekend(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'the weekend' → the most recent weekend (the coming one with a future cue)."""
    if ref is None:
        return None
    ws = week_start(ref)
    if has_future_cue(ctx) or ref.weekday() >= _SATURDAY:
        return _weekend_res(ws)
    return _weekend_res(ws - timedelta(weeks=1))


def resolve_ago(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'N days/weeks/months/years ago' → that day/week/month/year; vague counts → a range."""
    if ref is None:
        return None
    raw, unit = m.group("n"), m.group("unit").lower().rstrip("s")
    if is_vague(raw):
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
        return Resolution(s, e, "range", f"{words} {unit}s before {readable_day(ref)}", "", True)
    n = parse_count(raw)
    if n is None or n > _MAX_COUNT:
        return None
    if unit == "day":
        d = ref - timedelta(days=n)
        return Resolution(d, d, "day", readable_day(d), "on", True)
    if unit == "weekend":
        return _period("weekend", ref, -n)
    if unit == "week":
        ws = week_start(ref - timedelta(weeks=n))
        return Resolution(ws, ws + timedelta(days=6), "week", f"the week of {readable_day(ws)}", "in", True)
    if unit == "month":
        return _period("month", ref, -n)
    return _period("year", ref, -n)


def resolve_in_future(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'in two weeks' / 'three days from now' — only with a future cue ('in 2 days' is often a duration)."""
    if ref is None or is_vague(m.group("n")):
        return None
    if m.group("fromnow") is None and (m.group("in") is None or not has_future_cue(ctx)):
        return None
    n = parse_count(m.group("n"))
    unit = m.group("unit").lower().rstrip("s")
    if n is None or n > _MAX_COUNT:
        return None
    if unit == "day":
        d = ref + timedelta(days=n)
        return Resolution(d, d, "day", readable_day(d), "on", True)
    if unit == "week":
        ws = week_start(ref + timedelta(weeks=n))
        return Resolution(ws, ws + timedelta(days=6), "week", f"the week of {readable_day(ws)}", "in", True)
    return _period(unit if unit in ("weekend", "month") else "year", ref, n)


def resolve_past_n(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'the past three weeks' / 'the last few months' → from N units before ref up to ref."""
    if ref is None:
        return None
    raw = m.group("n") or "1"
    n = FEW_RANGE[1] if is_vague(raw) else parse_count(raw)
    unit = m.group("unit").lower().rstrip("s")
    if n is None or n > _MAX_COUNT or unit == "weekend":
        return None
    if unit == "day":
        s = ref - timedelta(days=n)
    elif unit == "week":
        s = ref - timedelta(weeks=n)
    else:
        s = shift_months(ref, months=-n * (12 if unit == "year" else 1))
    return Resolution(s, ref, "range", f"between {readable_day(s)} and {readable_day(ref)}", "", True)


def resolve_earlier_later(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'earlier/later this week|month|year' → the part of the period before/after ``ref``."""
    if ref is None:
        return None
    p = _period(m.group("unit").lower(), ref, 0)
    if m.group("el").lower() == "earlier":
        return Resolution(p.start, ref, "range", f"between {readable_day(p.start)} and {readable_day(ref)}", "", True)
    return Resolution(ref, p.end, "range", f"between {readable_day(ref)} and {readable_day(p.end)}", "", True)


def _safe_date(y: int, mo: int, d: int) -> date | None:
    try:
        return date(y, mo, d)
    except ValueError:
        return None


def _day_res(d: date | None, relative: bool = False) -> Resolution | None:
    return None if d is None else Resolution(d, d, "day", readable_day(d), "on", relative)


def _year4(raw: str) -> int:
    y = int(raw)
    return y + _CENTURY if y < _CENTURY_YEARS else y


def resolve_iso(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'2023-05-08' / '2023/05/08' → that day."""
    return _day_res(_safe_date(int(m.group("y")), int(m.group("mo")), int(m.group("day"))))


def make_slash_resolver(day_first: bool) -> Handler:
    """A resolver for '05/08/2023': month first unless ``day_first`` or the first number is over 12."""

    def resolve_slash(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
        first, second, y = int(m.group("first")), int(m.group("second")), _year4(m.group("y"))
        mo, d = (second, first) if (day_first or first > 12) else (first, second)
        return _day_res(_safe_date(y, mo, d))

    return resolve_slash


def _year_or_ref(m: re.Match, ref: date | None, fy: int | None) -> int | None:
    if m.group("y"):
        return int(m.group("y"))
    return ref.year if ref is not None else fy


def resolve_day_month(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'8 May 2023', 'May 8th' (year from ``ref`` or the text) → that day."""
    y = _year_or_ref(m, ref, fy)
    if y is None:
        return None
    return _day_res(_safe_date(y, MONTHS[m.group("mon").lower().rstrip(".")], int(m.group("day"))))


def resolve_month_year(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'May 2023' → that month."""
    y, mo = int(m.group("y")), MONTHS[m.group("mon").lower().rstrip(".")]
    return Resolution(date(y, mo, 1), month_end(y, mo), "month", readable_month(y, mo), "in", False)


_REL_MODS = {"last", "this past", "past", "next", "this coming", "coming", "this"}


def resolve_month(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'in May', 'last May' → the most recent (or, with a cue, the next) such month."""
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
    elif has_future_cue(ctx):
        y = ref.year if mo >= ref.month else ref.year + 1
    else:
        y = ref.year if mo <= ref.month else ref.year - 1
    # "last/next/this May" is rewritten with its year; a bare "in May" is left as written
    return Resolution(date(y, mo, 1), month_end(y, mo), "month", readable_month(y, mo), "in", ref is not None and mod in _REL_MODS)


def resolve_month_rel_year(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'August last year' / 'March this year' / 'June next year'."""
    if ref is None:
        return None
    y = ref.year + {"last": -1, "this": 0, "next": 1}[m.group("rel").lower()]
    mo = MONTHS[m.group("mon").lower()]
    return Resolution(date(y, mo, 1), month_end(y, mo), "month", readable_month(y, mo), "in", True)


def resolve_day_of_month(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'on the 15th' → that day of ref's month (or the previous month when it would be after ref,
    the next when the sentence speaks about the future)."""
    if ref is None:
        return None
    d = int(m.group("day"))
    if not 1 <= d <= 31:
        return None
    if has_future_cue(ctx):
        y, mo = (ref.year, ref.month) if d >= ref.day else add_months(ref.year, ref.month, 1)
    else:
        y, mo = (ref.year, ref.month) if d <= ref.day else add_months(ref.year, ref.month, -1)
    day = _safe_date(y, mo, d)
    return None if day is None else Resolution(day, day, "day", readable_day(day), "on", True)


_PERFECT = re.compile(r"\b(?:been|have|has|had)\b|'ve\b", re.I)


def resolve_duration_now(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'for 3 years now' / 'I've been painting for 7 years' → since (ref − duration), up to ref.

    The wording is kept and the start added: "for 3 years now (since 2020)". Needs "now" or a
    perfect tense in the sentence; vague counts are skipped."""
    if ref is None or is_vague(m.group("n")):
        return None
    if m.group("now") is None and _PERFECT.search(ctx) is None:
        return None
    n = parse_count(m.group("n"))
    unit = m.group("unit").lower().rstrip("s")
    if n is None or n > _MAX_DURATION or unit == "weekend":
        return None
    if unit == "year":
        s, label = date(ref.year - n, 1, 1), str(ref.year - n)
    elif unit == "month":
        y, mo = add_months(ref.year, ref.month, -n)
        s, label = date(y, mo, 1), readable_month(y, mo)
    elif unit == "week":
        s = week_start(ref - timedelta(weeks=n))
        label = f"the week of {readable_day(s)}"
    else:
        s = ref - timedelta(days=n)
        label = readable_day(s)
    return Resolution(s, ref, "range", f"{m.group(0)} (since {label})", "", True)


def resolve_year(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'in 2022' / 'the year 2022' → that year."""
    y = int(m.group("y"))
    return Resolution(date(y, 1, 1), date(y, 12, 31), "year", str(y), "in", False)


def resolve_season(m: re.Match, ref: date | None, ctx: str, fy: int | None) -> Resolution | None:
    """'last summer', 'summer 2022', 'in the fall' → that season (northern meteorological)."""
    name = m.group("s").lower()
    mod = " ".join((m.groupdict().get("mod") or "").lower().split())
    if mod == "the" and (m.group("prep") or "").lower() not in ("in", "during", "over"):
        return None  # "the fall" alone is usually not the season
    if m.group("y"):
        s, e = season_span(name, int(m.group("y")))
        return Resolution(s, e, "range", season_label(name, s), "in", False)
    if ref is None:
        return None
    # instances around ref: the one of the previous, current and next (season-)year
    inst = [season_span(name, y) for y in (ref.year - 2, ref.year - 1, ref.year, ref.year + 1)]
    if mod in ("last", "this past", "past"):
        s, e = [x for x in inst if x[1] < ref][-1]
    elif mod in ("next", "this coming", "coming"):
        s, e = [x for x in inst if x[0] > ref][0]
    elif mod == "this":
        s, e = [x for x in inst if x[1] >= ref][0] if name == "winter" else season_span(name, ref.year)
    elif has_future_cue(ctx):
        s, e = [x for x in inst if x[1] >= ref][0]
    else:
        s, e = [x for x in inst if x[0] <= ref][-1]
    return Resolution(s, e, "range", season_label(name, s), "in", mod in _REL_MODS)
