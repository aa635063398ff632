"""Time expressions: detect, resolve against a reference date, rewrite relative ones as absolute.

Modules, in dependency order:

- :mod:`~lychee_ray.text.time.words` — month, weekday, season and count words, future cues;
- :mod:`~lychee_ray.text.time.resolve` — one resolver per kind of expression (the rules below);
- :mod:`~lychee_ray.text.time.patterns` — the regex table pairing each pattern with its resolver;
- :mod:`~lychee_ray.text.time.detect` — :func:`find_time_expressions` over a text;
- :mod:`~lychee_ray.text.time.rewrite` — :func:`rewrite_relative` ("yesterday" → "on 7 May 2023");
- :mod:`~lychee_ray.text.time.normalise` — a record's time from its draft and texts, and the
  ``resolve_time`` callables the build uses;
- :mod:`~lychee_ray.text.time.query` — the time range a question names.

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
  Vague counts (``a few``, ``several``) give a range ``words.FEW_RANGE`` units back, e.g. ``a few days ago``
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
