"""The vocabulary of time expressions: month, weekday, season and count words, and future cues."""

from __future__ import annotations

import re
from datetime import date

from lychee_ray.text.dates import add_months, month_end

# Vague counts ("a few days ago") resolve to a range this many units back (inclusive bounds).
FEW_RANGE = (2, 5)

MONTHS = {
    "january": 1, "february": 2, "march": 3, "april": 4, "may": 5, "june": 6, "july": 7, "august": 8,
    "september": 9, "october": 10, "november": 11, "december": 12,
    "jan": 1, "feb": 2, "mar": 3, "apr": 4, "jun": 6, "jul": 7, "aug": 8, "sep": 9, "sept": 9,
    "oct": 10, "nov": 11, "dec": 12,
}  # fmt: skip
WEEKDAYS = {"monday": 0, "tuesday": 1, "wednesday": 2, "thursday": 3, "friday": 4, "saturday": 5, "sunday": 6}
SEASONS = {"spring": 3, "summer": 6, "fall": 9, "autumn": 9, "winter": 12}  # first month of each season
# Months a season lasts after its first month (meteorological seasons are three months long).
_SEASON_EXTRA_MONTHS = 2
COUNT_WORDS = {
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


def parse_count(raw: str) -> int | None:
    """A count written as digits or words ("3", "three", "a couple of"); None for anything else."""
    r = " ".join(raw.lower().split())
    if r.isdigit():
        return int(r)
    return COUNT_WORDS.get(r)


def is_vague(raw: str) -> bool:
    """Whether a count is vague ("a few", "several")."""
    return " ".join(raw.lower().split()) in VAGUE_COUNTS


def has_future_cue(sentence: str) -> bool:
    """Whether a sentence speaks about the future (see :data:`FUTURE_CUES`)."""
    return FUTURE_CUES.search(sentence) is not None


def season_span(name: str, year: int) -> tuple[date, date]:
    """A season instance; winter ``year`` runs from December ``year`` to February ``year + 1``."""
    m0 = SEASONS[name]
    y1, m1 = add_months(year, m0, _SEASON_EXTRA_MONTHS)
    return date(year, m0, 1), month_end(y1, m1)


def season_label(name: str, start: date) -> str:
    """'summer 2022', 'fall 2022' (for autumn too) or 'winter 2022/2023'."""
    name = "fall" if name == "autumn" else name
    return f"winter {start.year}/{start.year + 1}" if name == "winter" else f"{name} {start.year}"
