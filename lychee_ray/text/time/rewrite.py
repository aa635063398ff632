"""Rewriting relative time expressions as absolute ones."""

from __future__ import annotations

from datetime import date, datetime

from lychee_ray.text.time.detect import TimeMention, find_time_expressions


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
