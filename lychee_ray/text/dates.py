"""Date helpers: reading ISO values, calendar arithmetic, and the readable forms used in rewritten text.

Reading ISO values comes in three strictnesses, each kept for its callers' contract:

- :func:`as_datetime` — a question date: None stays None, a bad string raises ``ValueError`` (an API
  caller must hear that its date was not understood).
- :func:`to_date` / :func:`iso_day` — a reference or record date: unreadable means "no date".
- :func:`parse_iso_datetime` — a session date already validated as ISO: read exactly as stored.

Dataset-specific date formats ("1:56 pm on 8 May, 2023") are the adapters' business
(:mod:`lychee_ray.io.adapters.dates`), not this module's.
"""

from __future__ import annotations

import calendar
from datetime import date, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the name only (core.records loads pyarrow and pydantic)
    from lychee_ray.core.records import TimeGranularity

# Not calendar.month_name: that follows the process locale, and rewritten texts must not.
MONTH_NAMES = ["", "January", "February", "March", "April", "May", "June", "July", "August", "September",
               "October", "November", "December"]  # fmt: skip
# Length of the "YYYY-MM-DD" prefix of an ISO date or datetime string.
_ISO_DAY_LEN = 10
_DAYS_PER_WEEK = 7
_MONTHS_PER_YEAR = 12

# ---------------------------------------------------------------- reading


def as_datetime(value: datetime | date | str | None) -> datetime | None:
    """A question date from an ISO string / date / datetime (None stays None; bad strings raise)."""
    if value is None or value == "":
        return None
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day)
    try:
        return datetime.fromisoformat(str(value).strip().replace("Z", "+00:00"))
    except ValueError as e:
        raise ValueError(f"question_date is not an ISO date/datetime: {value!r}") from e


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


def iso_day(value: str | None) -> date | None:
    """The calendar day of an ISO date or datetime string (its ``YYYY-MM-DD`` prefix); None if unreadable."""
    if not value:
        return None
    try:
        return date.fromisoformat(value[:_ISO_DAY_LEN])
    except ValueError:
        return None


def parse_iso_datetime(value: str | None) -> datetime | None:
    """An ISO datetime string read as is (no trimming); None when empty or not ISO."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value)
    except ValueError:
        return None


# ---------------------------------------------------------------- calendar arithmetic


def month_end(y: int, m: int) -> date:
    """The last day of month ``m`` of year ``y``."""
    return date(y, m, calendar.monthrange(y, m)[1])


def add_months(y: int, m: int, n: int) -> tuple[int, int]:
    """(year, month) ``n`` months after (or before, ``n`` < 0) month ``m`` of year ``y``."""
    k = y * _MONTHS_PER_YEAR + (m - 1) + n
    return k // _MONTHS_PER_YEAR, k % _MONTHS_PER_YEAR + 1


def shift_months(d: date, months: int) -> date:
    """The same day ``months`` months later (earlier when negative), clipped to the month's end."""
    y, mo = add_months(d.year, d.month, months)
    return date(y, mo, min(d.day, calendar.monthrange(y, mo)[1]))


def week_start(d: date) -> date:
    """The Monday of ``d``'s week (weeks run Monday to Sunday)."""
    return d - timedelta(days=d.weekday())


def granularity_for(start: date, end: date) -> TimeGranularity:
    """Name the granularity of an inclusive date span."""
    if start == end:
        return "day"
    if start.month == 1 and start.day == 1 and end == date(start.year, 12, 31):
        return "year"
    if start.day == 1 and end == month_end(start.year, start.month):
        return "month"
    if start.weekday() == 0 and end - start == timedelta(days=_DAYS_PER_WEEK - 1):
        return "week"
    return "range"


# ---------------------------------------------------------------- readable forms


def readable_day(d: date) -> str:
    """'7 May 2023' — the readable day form used in rewritten texts."""
    return f"{d.day} {MONTH_NAMES[d.month]} {d.year}"


def readable_month(y: int, m: int) -> str:
    """'May 2023' — the readable month form used in rewritten texts."""
    return f"{MONTH_NAMES[m]} {y}"


__all__ = [
    "MONTH_NAMES", "add_months", "as_datetime", "granularity_for", "iso_day", "month_end", "parse_iso_datetime",
    "readable_day", "readable_month", "shift_months", "to_date", "week_start",
]  # fmt: skip
