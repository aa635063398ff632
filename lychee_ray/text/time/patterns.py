"""The pattern table: which regex finds which kind of time expression, and which resolver reads it.

Patterns are tried in table order; :func:`~lychee_ray.text.time.detect.find_time_expressions` keeps
the longest match at each position (the earlier pattern on ties).
"""

from __future__ import annotations

import re
from functools import lru_cache

from lychee_ray.text.time.resolve import (
    Handler,
    make_slash_resolver,
    resolve_ago,
    resolve_day_month,
    resolve_day_of_month,
    resolve_day_word,
    resolve_duration_now,
    resolve_earlier_later,
    resolve_in_future,
    resolve_iso,
    resolve_month,
    resolve_month_rel_year,
    resolve_month_year,
    resolve_other_day,
    resolve_past_n,
    resolve_period,
    resolve_season,
    resolve_the_weekend,
    resolve_weekday,
    resolve_year,
)
from lychee_ray.text.time.words import SEASONS, WEEKDAYS

# Regex fragments the patterns share.
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
REPLACED_PREPS = {"on", "in", "during", "over", "at"}
_TOD = r"(?:\s+(?P<tod>morning|afternoon|evening|night))?"
_DAY_NUM = r"(?P<day>[0-3]?\d)(?:st|nd|rd|th)?"

# Prefilter keyword groups (lowercase substrings): running ~20 regexes on every sentence is the cost
# of time detection, so each pattern first checks that its keywords occur at all. ``_DIGIT`` = any digit.
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
                    r"(?:\s+(?P<tod>morning|afternoon|evening|night)\b)?", I),
         resolve_day_word, _K_DAYWORD),
        (re.compile(_PREP + r"\bthe\s+other\s+day\b", I), resolve_other_day, (("other day",),)),
        (re.compile(_PREP + r"\b(?:(?P<mod>last|this\s+past|this\s+coming|this|next|coming|previous)\s+)?"
                    r"(?P<wd>" + _WD + r")(?!s\b)\b" + _TOD + r"\b", I),
         resolve_weekday, (tuple(WEEKDAYS),)),
        (re.compile(_PREP + r"\b(?P<el>earlier|later)\s+this\s+(?P<unit>week|month|year)\b", I),
         resolve_earlier_later, (("earlier this", "later this"),)),
        (re.compile(_PREP + r"\b(?:the\s+)?(?:past|last)\s+(?P<n>" + _NUM + r")\s+(?P<unit>" + _UNIT + r")\b", I),
         resolve_past_n, (("past", "last"), _K_UNITS)),
        (re.compile(_PREP + r"\b(?P<mod>last|this\s+past|this\s+coming|this|next|the\s+previous|previous|the\s+coming|coming|"
                    r"the\s+past|past|the\s+next)\s+(?P<unit>week|weekend|month|year)\b", I),
         resolve_period, (("last", "this", "next", "previous", "coming", "past"), _K_UNITS)),
        (re.compile(r"\b(?:(?P<prep>on|over|during|at|in)\s+)?the\s+weekend\b", I), resolve_the_weekend, (("the weekend",),)),
        (re.compile(_PREP + r"\b(?:about\s+|around\s+|almost\s+|nearly\s+|over\s+|more\s+than\s+|just\s+|only\s+)?"
                    r"(?P<n>" + _NUM + r")\s+(?P<unit>" + _UNIT + r")\s+ago\b", I),
         resolve_ago, (("ago",),)),
        (re.compile(r"\b(?P<in>in\s+)?(?P<n>" + _NUM + r")\s+(?P<unit>" + _UNIT + r")(?P<fromnow>\s+from\s+now)?\b", I),
         resolve_in_future, (("in ", "from now"), _K_UNITS)),
        (re.compile(r"\b(?i:for)\s+(?:(?i:about|almost|nearly|just\s+under|just\s+over|over|more\s+than|around|roughly)\s+)?"
                    r"(?P<n>" + _NUM + r")\s+(?P<unit>" + _UNIT + r")(?P<now>\s+(?i:now))?\b", I),
         resolve_duration_now, (("for ",), _K_UNITS)),
        (re.compile(_PREP + r"\b(?P<mon>" + _MONTH_FULL + r")\s+(?:of\s+)?(?P<rel>(?i:last|this|next))\s+(?i:year)\b"),
         resolve_month_rel_year, (_K_MONTHS, ("year",))),
        (re.compile(r"\b(?P<prep>(?i:on|by|since|until|till|before|after))\s+the\s+(?P<day>[0-3]?\d)(?:st|nd|rd|th)\b"),
         resolve_day_of_month, ((_DIGIT,), ("the ",))),
        (re.compile(_PREP + r"\b(?P<y>(?:19|20)\d{2})-(?P<mo>[01]?\d)-(?P<day>[0-3]?\d)\b"), resolve_iso, ((_DIGIT,), ("-", "/"))),
        (re.compile(_PREP + r"\b(?P<y>(?:19|20)\d{2})/(?P<mo>[01]?\d)/(?P<day>[0-3]?\d)\b"), resolve_iso, ((_DIGIT,), ("-", "/"))),
        (re.compile(_PREP + r"\b(?P<first>[0-3]?\d)/(?P<second>[0-3]?\d)/(?P<y>(?:19|20)\d{2}|\d{2})\b"),
         make_slash_resolver(day_first), ((_DIGIT,), ("/",))),
        (re.compile(_PREP + r"\b(?:the\s+)?" + _DAY_NUM + r"\s+(?:of\s+)?(?P<mon>" + _MONTH_ANY + r"),?(?:\s+(?P<y>(?:19|20)\d{2})\b)?"),
         resolve_day_month, ((_DIGIT,), _K_MONTHS)),
        (re.compile(_PREP + r"\b(?P<mon>" + _MONTH_ANY + r")\s+(?:the\s+)?" + _DAY_NUM + r"\b(?![:.]\d)(?:,?\s+(?P<y>(?:19|20)\d{2})\b)?"),
         resolve_day_month, ((_DIGIT,), _K_MONTHS)),
        (re.compile(_PREP + r"\b(?:(?:early|mid|late)[\s-]+)?(?P<mon>" + _MONTH_ANY + r"),?\s+(?:of\s+)?(?P<y>(?:19|20)\d{2})\b"),
         resolve_month_year, ((_DIGIT,), _K_MONTHS)),
        (re.compile(r"\b(?:(?P<prep>(?i:in|during|since|until|till|by|from|before|after|around|through|of|between))\s+"
                    r"(?:(?i:early|mid|late)[\s-]+)?|"
                    r"(?P<mod>(?i:last|this\s+past|this\s+coming|this|next|early|mid|late))\s+)(?P<mon>" + _MONTH_FULL + r")\b(?!\s*\d)"),
         resolve_month, (_K_MONTHS,)),
        (re.compile(r"\b(?:(?P<prep>in|during|since|until|till|by|from|before|after|around|through|of|between|and|to)\s+"
                    r"(?:the\s+year\s+)?|the\s+year\s+)(?P<y>(?:19|20)\d{2})\b(?!\s*[-/]\d)", I),
         resolve_year, (("19", "20"),)),
        (re.compile(_PREP + r"\b(?:(?P<mod>last|this\s+past|this\s+coming|this|next|the|coming)\s+)"
                    r"(?P<s>spring|summer|fall|autumn|winter)\b(?:\s+(?:of\s+)?(?P<y>(?:19|20)\d{2})\b)?", I),
         resolve_season, (tuple(SEASONS),)),
        (re.compile(_PREP + r"\b(?P<s>spring|summer|fall|autumn|winter)\s+(?:of\s+)?(?P<y>(?:19|20)\d{2})\b", I),
         resolve_season, (tuple(SEASONS),)),
    ]  # fmt: skip


@lru_cache(maxsize=2)
def compiled_patterns(day_first: bool) -> list[tuple[re.Pattern, Handler, tuple[re.Pattern, ...]]]:
    """Compiled patterns with each prefilter group turned into one substring-alternation regex."""
    out = []
    for pat, handler, groups in _compile(day_first):
        pre = tuple(re.compile(r"\d") if g == (_DIGIT,) else re.compile("|".join(re.escape(k) for k in g)) for g in groups)
        out.append((pat, handler, pre))
    return out
