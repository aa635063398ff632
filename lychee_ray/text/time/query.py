"""The time range a question names (the planner's time constraint)."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta

from lychee_ray.core.records import TimeSpan
from lychee_ray.text.time.detect import find_time_expressions

_BETWEEN = re.compile(r"\b(?:between|from)\b", re.I)
# "between"/"from" makes a range when it comes before the first mention or within this many characters
# of its start (the mention may begin with its own "from": "from 2019 to 2021").
_BETWEEN_LOOKAHEAD = 12
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
    if len(found) >= 2 and _BETWEEN.search(question[: first.start + _BETWEEN_LOOKAHEAD]):
        (a_start, a_end), (b_start, b_end) = found[0].bounds, found[1].bounds
        return TimeSpan(start=min(a_start, b_start), end=max(a_end, b_end), granularity="range",
                        expression=question[first.start : found[1].end].strip())
    prep = first.text.split(None, 1)[0].lower() if first.text.split() else ""
    t = first.time
    if prep in _OPEN_BEFORE and prep != first.text.lower():
        end = t.end if prep == "by" else (date.fromisoformat(first.bounds[0]) - timedelta(days=1)).isoformat()
        return TimeSpan(start=None, end=end, granularity="range", expression=first.text)
    if prep in _OPEN_AFTER:
        start = (date.fromisoformat(first.bounds[1]) + timedelta(days=1)).isoformat()
        return TimeSpan(start=start, end=None, granularity="range", expression=first.text)
    if prep == "since":
        return TimeSpan(start=t.start, end=t.end if question_date is not None else None, granularity="range", expression=first.text)
    return t
