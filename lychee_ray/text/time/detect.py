"""Finding the time expressions in a text, each resolved and paired with its absolute wording."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import date, datetime

from lychee_ray.core.records import TimeSpan
from lychee_ray.text.dates import to_date
from lychee_ray.text.sentences import sentence_around
from lychee_ray.text.time.patterns import REPLACED_PREPS, compiled_patterns
from lychee_ray.text.time.resolve import Handler

# A preposition right before a match that did not capture one ("since last May"), and a verb right
# after one used as a subject ("this week was busy"): the rewrite then uses the bare absolute form.
_PREP_BEFORE = re.compile(r"\b(?:on|in|during|over|at|since|until|till|by|from|before|after|around|of|between|to|and)\s+$", re.I)
_SUBJECT_AFTER = re.compile(r"\s+(?:was|is|has|had|went|will|seems|seemed|felt|feels|looks|looked|been)\b", re.I)
_YEAR_IN_TEXT = re.compile(r"\b((?:19|20)\d{2})\b")
_RECURRING_BEFORE = re.compile(r"\b(?:every|each)\s+$", re.I)
# How far before a match the checks above look (long enough for "between " / "every ").
_PREP_LOOKBACK = 12
_RECURRING_LOOKBACK = 8
# Prepositions that belong to a range phrase ("between X and Y"), not to the match.
_RANGE_PREPS = ("between", "and", "to")
# Characters after which a match starts a sentence (its rewrite is then capitalised).
_SENTENCE_STARTS = ".!?:\"\n"


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

    @property
    def bounds(self) -> tuple[str, str]:
        """(start, end) ISO days of ``time``: a found mention always has both."""
        if self.time.start is None or self.time.end is None:
            raise ValueError(f"time mention {self.text!r} without both ends")
        return self.time.start, self.time.end


def find_time_expressions(text: str, ref: datetime | date | str | None = None, *, day_first: bool = False) -> list[TimeMention]:
    """All time expressions in ``text`` in order, non-overlapping (longest match wins).

    Relative expressions are resolved against ``ref`` and skipped when it is None. See
    :mod:`lychee_ray.text.time` for the rules.
    """
    if not text:
        return []
    rd = to_date(ref)
    fy_m = _YEAR_IN_TEXT.search(text) if rd is None else None
    fallback_year = int(fy_m.group(1)) if fy_m else None
    low = text.lower()
    hits: dict[re.Pattern, bool] = {}
    cands: list[tuple[int, int, int, re.Match, Handler]] = []
    for order, (pat, handler, groups) in enumerate(compiled_patterns(day_first)):
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
            res = handler(m, rd, sentence_around(text, start, end), fallback_year)
        except (OverflowError, ValueError):  # resolves outside the datetime range (e.g. "tomorrow" on 9999-12-31)
            continue
        if res is None:
            continue
        if res.relative and _RECURRING_BEFORE.search(text, max(0, start - _RECURRING_LOOKBACK), start):
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
        if prep in _RANGE_PREPS:
            # part of a range phrase: not a preposition we own, keep it and the rest of the phrase
            start = m.end("prep")
            while text[start].isspace():
                start += 1
            absolute = res.bare
        elif prep and prep not in REPLACED_PREPS:
            absolute = f"{prep} {res.bare}"
        elif not prep and (_PREP_BEFORE.search(text, max(0, start - _PREP_LOOKBACK), start) or _SUBJECT_AFTER.match(text, end)):
            # "since last May" / "this week went well": the phrase already has its role in the sentence
            absolute = res.bare
        else:
            absolute = f"{res.prep} {res.bare}".strip()
        before = text[:start].rstrip()
        if not before or before[-1] in _SENTENCE_STARTS:  # sentence-initial: keep the capital there
            absolute = absolute[0].upper() + absolute[1:]
        out.append(
            TimeMention(
                start=start,
                end=end,
                text=text[start:end],
                time=TimeSpan(start=s.isoformat(), end=e.isoformat(), granularity=gran, expression=expression),
                relative=res.relative,
                absolute=absolute if res.relative else None,
            )
        )
        taken_until = end
    return out
