"""A record's normalised time: from its drafted start/end, its time wording, or its texts.

The drafts this reads are described by the Protocols below (an LLM's or the rules encoder's
``TimeDraft``/``RecordDraft`` and the segment's turns fit them), so the text layer needs nothing
from the build layer.
"""

from __future__ import annotations

import re
from datetime import date, datetime
from functools import lru_cache
from typing import Any, Protocol
from collections.abc import Callable, Sequence

from lychee_ray.core.records import TimeGranularity, TimeSpan
from lychee_ray.text.dates import granularity_for, month_end, to_date
from lychee_ray.text.time.detect import find_time_expressions

_ISO_POINT = re.compile(
    r"^(?P<y>\d{4})(?:-(?P<mo>\d{1,2})(?:-(?P<d>\d{1,2})(?P<t>[T ]\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?)?)?$"
)
# Free-form draft dates dateparser already read (drafts repeat the same strings a lot).
_DATEPARSER_CACHE = 4096
# First times of texts already searched (every record of a turn searches that turn's content).
_FIRST_TIME_CACHE = 8192


class TimeFields(Protocol):
    """A drafted time: ``start``/``end`` as written (ISO or free-form) and the original wording."""

    @property
    def start(self) -> str | None: ...

    @property
    def end(self) -> str | None: ...

    @property
    def expression(self) -> str | None: ...


class DraftFields(Protocol):
    """A drafted record: its text and drafted time."""

    @property
    def text(self) -> str: ...

    @property
    def time(self) -> TimeFields | None: ...


class TurnFields(Protocol):
    """A source turn: its session date (the reference for relative times) and content."""

    @property
    def session_date(self) -> str | None: ...

    @property
    def content(self) -> str: ...


TimeResolver = Callable[[DraftFields, Sequence[TurnFields]], TimeSpan]


def _parse_point(value: str | None, ref: date | None, day_first: bool) -> tuple[date, date, TimeGranularity] | None:
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
        first, last = found[0].bounds
        return date.fromisoformat(first), date.fromisoformat(last), found[0].time.granularity or "range"
    return _dateparser_point(s, ref, day_first)


@lru_cache(maxsize=_DATEPARSER_CACHE)
def _dateparser_point(s: str, ref: date | None, day_first: bool) -> tuple[date, date, TimeGranularity] | None:
    """Last resort for free-form draft dates; strict (all of day, month, year) to avoid guesses."""
    import dateparser  # lazy: importing it costs ~0.3 s

    settings: dict[str, Any] = {
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
    draft: TimeFields | None, texts: list[str] | None = None, ref: datetime | date | str | None = None, *, day_first: bool = False
) -> TimeSpan:
    """A record's normalised time.

    Uses the draft's ``start``/``end`` when readable (``YYYY`` → the year, ``YYYY-MM`` → the month,
    ``YYYY-MM-DD`` → the day, an ISO datetime → its day with granularity ``datetime``, or a free-form
    date); otherwise the draft's ``expression``, then the first time expression in ``texts`` (the
    record text first, then its source turns), resolved against ``ref``. Empty TimeSpan if none.
    """
    rd = to_date(ref)
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
            return TimeSpan(start=start.isoformat(), end=end.isoformat(), granularity=gran, expression=expression)
        if expression:
            found = find_time_expressions(expression, rd, day_first=day_first)
            if found:
                return found[0].time.model_copy(update={"expression": expression})
    for text in texts or []:
        first = _first_time(text, rd, day_first)
        if first is not None:
            return first.model_copy()
    return TimeSpan()


@lru_cache(maxsize=_FIRST_TIME_CACHE)
def _first_time(text: str, ref: date | None, day_first: bool) -> TimeSpan | None:
    """First time in a text; cached because every record of a turn searches that turn's content."""
    found = find_time_expressions(text, ref, day_first=day_first)
    return found[0].time if found else None


def resolve_record_time(draft: DraftFields, turns: Sequence[TurnFields]) -> TimeSpan:
    """``finalise_records(..., resolve_time=resolve_record_time)``: ref = the first source turn's
    session date; texts = the draft's text, then its source turns' contents."""
    ref = next((t.session_date for t in turns if t.session_date), None)
    return normalise_time(draft.time, [draft.text] + [t.content for t in turns], ref)


def make_resolver(*, day_first: bool = False, search_turns: bool = True) -> TimeResolver:
    """A ``resolve_time`` callable for :func:`~lychee_ray.ingest.encode.base.finalise_records`.

    ``search_turns``: when the draft's own time and text carry no time, fall back to the source
    turns' contents (True, default) or leave the time empty (False).
    """

    def resolve(draft: DraftFields, turns: Sequence[TurnFields]) -> TimeSpan:
        ref = next((t.session_date for t in turns if t.session_date), None)
        texts = [draft.text] + ([t.content for t in turns] if search_turns else [])
        return normalise_time(draft.time, texts, ref, day_first=day_first)

    return resolve
