"""Time expressions: detection, resolution against a session date, rewriting, drafts and queries."""

from __future__ import annotations

from datetime import datetime

import pytest

from lychee_ray.ingest.encode.base import EncodeOutput, EncodeRequest, RecordDraft, SegmentTurn, TimeDraft, finalise_records
from lychee_ray.core.records import TimeSpan
from lychee_ray.text.time.detect import find_time_expressions
from lychee_ray.text.time.normalise import make_resolver, normalise_time, resolve_record_time
from lychee_ray.text.time.query import parse_query_time
from lychee_ray.text.time.rewrite import rewrite_relative

REF = datetime(2023, 5, 8, 13, 56)  # a Monday (LoCoMo conv-26 session 1)


def one(text: str, ref=REF) -> TimeSpan:
    found = find_time_expressions(text, ref)
    assert len(found) == 1, found
    return found[0].time


@pytest.mark.parametrize(
    "text, start, end, gran",
    [
        ("I went there yesterday.", "2023-05-07", "2023-05-07", "day"),
        ("We talked about it today.", "2023-05-08", "2023-05-08", "day"),
        ("I'm going out tonight.", "2023-05-08", "2023-05-08", "day"),
        ("See you tomorrow!", "2023-05-09", "2023-05-09", "day"),
        ("It was the day before yesterday.", "2023-05-06", "2023-05-06", "day"),
        ("I ran a race last Saturday.", "2023-05-06", "2023-05-06", "day"),
        ("I ran a race on Saturday.", "2023-05-06", "2023-05-06", "day"),
        ("I'm going to a concert on Saturday.", "2023-05-13", "2023-05-13", "day"),
        ("The party is next Friday.", "2023-05-12", "2023-05-12", "day"),
        ("It happened last week.", "2023-05-01", "2023-05-07", "week"),
        ("We went camping last weekend.", "2023-05-06", "2023-05-07", "range"),
        ("I'm moving next month.", "2023-06-01", "2023-06-30", "month"),
        ("I started last month.", "2023-04-01", "2023-04-30", "month"),
        ("I painted it last year.", "2022-01-01", "2022-12-31", "year"),
        ("I moved two years ago.", "2021-01-01", "2021-12-31", "year"),
        ("I met her 3 days ago.", "2023-05-05", "2023-05-05", "day"),
        ("We met a couple of weeks ago.", "2023-04-24", "2023-04-30", "week"),
        ("We met a month ago.", "2023-04-01", "2023-04-30", "month"),
        ("I saw it a few days ago.", "2023-05-03", "2023-05-06", "range"),
        ("It was in May 2023.", "2023-05-01", "2023-05-31", "month"),
        ("We went there in 2022.", "2022-01-01", "2022-12-31", "year"),
        ("I've painted since 2019.", "2019-01-01", "2023-05-08", "range"),
        ("Born on 8 May 2023.", "2023-05-08", "2023-05-08", "day"),
        ("Born on May 8, 2023.", "2023-05-08", "2023-05-08", "day"),
        ("Born on the 8th of May, 2023.", "2023-05-08", "2023-05-08", "day"),
        ("Born on 2023-05-08.", "2023-05-08", "2023-05-08", "day"),
        ("Born on 05/08/2023.", "2023-05-08", "2023-05-08", "day"),
        ("Born on 13/05/2023.", "2023-05-13", "2023-05-13", "day"),
        ("My birthday is May 8th.", "2023-05-08", "2023-05-08", "day"),
        ("We went there last summer.", "2022-06-01", "2022-08-31", "range"),
        ("We went there in the summer of 2021.", "2021-06-01", "2021-08-31", "range"),
        ("I've been busy the past three weeks.", "2023-04-17", "2023-05-08", "range"),
        ("It started earlier this year.", "2023-01-01", "2023-05-08", "range"),
    ],
)
def test_resolution(text, start, end, gran):
    t = one(text)
    assert (t.start, t.end, t.granularity) == (start, end, gran)
    assert t.expression


def test_bare_month_uses_tense():
    assert one("We went there in June.").start == "2022-06-01"  # past: the most recent June
    assert one("We will go there in June.").start == "2023-06-01"  # future cue: the next June
    assert one("It was in May.").start == "2023-05-01"  # the current month counts as the most recent
    assert one("I left last May.").start == "2022-05-01"


def test_last_summer_after_summer_means_that_summer():
    assert one("We swam last summer.", datetime(2023, 10, 2)).start == "2023-06-01"


def test_words_that_are_not_times():
    for text in ("I may go.", "We march on.", "Saturdays are fun.", "The fall hurt.", "I ran 8 Marathons.", "I'll be away for two weeks."):
        assert find_time_expressions(text, REF) == [], text


def test_day_first_option():
    t = find_time_expressions("on 05/08/2023", REF, day_first=True)[0].time
    assert t.start == "2023-08-05"


def test_no_ref_resolves_only_absolute():
    assert find_time_expressions("I went there yesterday.", None) == []
    assert find_time_expressions("My birthday is May 8th.", None) == []
    # a bare month/day takes a year named elsewhere in the same text
    t = find_time_expressions("Between March and May 2023", None)
    assert [m.time.start for m in t] == ["2023-03-01", "2023-05-01"]


def test_mention_offsets_cover_text():
    text = "I went to a support group yesterday and it was great."
    m = find_time_expressions(text, REF)[0]
    assert text[m.start : m.end] == m.text == "yesterday"
    assert m.relative and m.absolute == "on 7 May 2023"


@pytest.mark.parametrize(
    "text, expected",
    [
        ("I went to a support group yesterday.", "I went to a support group on 7 May 2023."),
        ("Yesterday I went out.", "On 7 May 2023 I went out."),
        ("It happened last week.", "It happened in the week of 1 May 2023."),
        ("I'm moving next month.", "I'm moving in June 2023."),
        ("I moved two years ago.", "I moved in 2021."),
        ("I ran a race last Saturday.", "I ran a race on 6 May 2023."),
        ("I ran a race on Saturday.", "I ran a race on 6 May 2023."),
        ("I saw it a few days ago.", "I saw it a few days before 8 May 2023."),
        ("I've been here since last May.", "I've been here since May 2022."),
        ("I'm so glad this week went well.", "I'm so glad the week of 8 May 2023 went well."),
        ("We went there last summer.", "We went there in summer 2022."),
        ("I went out last night.", "I went out on the night of 7 May 2023."),
        ("It all started August last year.", "It all started in August 2022."),
        ("I met my team on the 5th after my trip.", "I met my team on 5 May 2023 after my trip."),
        ("I've had them for 3 years now.", "I've had them for 3 years now (since 2020)."),
        ("I've been painting for two months.", "I've been painting for two months (since March 2023)."),
    ],
)
def test_rewrite_relative(text, expected):
    out, mentions = rewrite_relative(text, REF)
    assert out == expected
    assert mentions


def test_rewrite_leaves_absolute_and_unresolvable_alone():
    for text in ("It was in May 2023.", "We went there in 2022.", "Born on 8 May 2023.", "I did it recently.", "I'll be away for two weeks."):
        assert rewrite_relative(text, REF)[0] == text
    assert rewrite_relative("I went yesterday.", None)[0] == "I went yesterday."


@pytest.mark.parametrize(
    "question, qdate, start, end",
    [
        ("What did Caroline do in May 2023?", None, "2023-05-01", "2023-05-31"),
        ("What did Melanie paint in 2022?", None, "2022-01-01", "2022-12-31"),
        ("What did Melanie do last week?", REF, "2023-05-01", "2023-05-07"),
        ("What did I buy yesterday?", REF, "2023-05-07", "2023-05-07"),
        ("What happened between March and May 2023?", None, "2023-03-01", "2023-05-31"),
        ("What did he do from 2019 to 2021?", None, "2019-01-01", "2021-12-31"),
        ("What did she read before 2023?", None, None, "2022-12-31"),
        ("What did she read after May 2023?", None, "2023-06-01", None),
        ("What has she painted since 2019?", None, "2019-01-01", None),
        ("What has she painted since 2019?", REF, "2019-01-01", "2023-05-08"),
    ],
)
def test_parse_query_time(question, qdate, start, end):
    t = parse_query_time(question, qdate)
    assert t is not None
    assert (t.start, t.end) == (start, end)


def test_parse_query_time_none():
    assert parse_query_time("When did Caroline go to the LGBTQ support group?", REF) is None
    assert parse_query_time("What did Melanie do last week?", None) is None  # relative, no date to resolve it


@pytest.mark.parametrize(
    "start, end, exp",
    [
        ("2023", None, ("2023-01-01", "2023-12-31", "year")),
        ("2023-05", None, ("2023-05-01", "2023-05-31", "month")),
        ("2023-05-07", None, ("2023-05-07", "2023-05-07", "day")),
        ("2023-05-07T10:30:00", None, ("2023-05-07", "2023-05-07", "datetime")),
        (None, "2023-05-07", ("2023-05-07", "2023-05-07", "day")),
        ("2023-05-01", "2023-05-07", ("2023-05-01", "2023-05-07", "week")),
        ("2023-04", "2023-06", ("2023-04-01", "2023-06-30", "range")),
        ("2023-05-01", "2023-05-31", ("2023-05-01", "2023-05-31", "month")),
        ("2023-05-09", "2023-05-07", ("2023-05-07", "2023-05-09", "range")),  # swapped bounds are fixed
        ("8 May 2023", None, ("2023-05-08", "2023-05-08", "day")),
        ("May 2023", None, ("2023-05-01", "2023-05-31", "month")),
    ],
)
def test_normalise_time_draft(start, end, exp):
    t = normalise_time(TimeDraft(start=start, end=end, expression="x"), ["yesterday"], REF)
    assert (t.start, t.end, t.granularity) == exp
    assert t.expression == "x"


def test_normalise_time_falls_back_to_texts():
    t = normalise_time(TimeDraft(start="sometime", end=None), ["Caroline went to a group.", "I went there yesterday."], REF)
    assert (t.start, t.granularity, t.expression) == ("2023-05-07", "day", "yesterday")
    t = normalise_time(None, ["I moved two years ago."], REF)
    assert (t.start, t.end) == ("2021-01-01", "2021-12-31")
    # the draft's own expression comes before the texts
    t = normalise_time(TimeDraft(expression="last week"), ["yesterday"], REF)
    assert t.start == "2023-05-01"
    assert normalise_time(None, ["nothing here"], REF) == TimeSpan()
    assert normalise_time(TimeDraft(), [], None) == TimeSpan()


def _turn(i: int, content: str, date: str | None = "2023-05-08T13:56:00") -> SegmentTurn:
    return SegmentTurn(index=i, turn_id=f"D1:{i + 1}", session_id="s1", session_date=date, speaker="Caroline", role="user", content=content)


def test_resolver_with_finalise_records():
    turns = [_turn(0, "I went to a support group yesterday."), _turn(1, "It was great.")]
    req = EncodeRequest(conversation_id="c", user_id="u", segment_id="c#s00000", segment_index=0, turns=turns)
    out = EncodeOutput(
        records=[
            RecordDraft(type="event", text="Caroline went to a support group.", source_turns=[0]),
            RecordDraft(type="event", text="Caroline went out on 1 May 2023.", source_turns=[1]),
            RecordDraft(type="fact", text="Caroline liked it.", time=TimeDraft(start="2023-05"), source_turns=[1]),
            RecordDraft(type="fact", text="Caroline is nice.", source_turns=[1]),
        ]
    )
    for resolve in (resolve_record_time, make_resolver()):
        recs, problems = finalise_records(out, req, "rules", "rules-v1", resolve_time=resolve)
        assert not problems
        assert [r.time.start for r in recs] == ["2023-05-07", "2023-05-01", "2023-05-01", None]
        assert recs[2].time.granularity == "month"
    recs, _ = finalise_records(out, req, "rules", "rules-v1", resolve_time=make_resolver(search_turns=False))
    assert recs[0].time.start is None


def test_resolver_without_session_date():
    d = RecordDraft(type="event", text="Caroline went there yesterday.", source_turns=[0])
    assert resolve_record_time(d, [_turn(0, "x", date=None)]) == TimeSpan()


def test_recurring_weekday_is_not_a_date():
    ref = datetime(2023, 5, 8, 13, 56)
    assert rewrite_relative("We hike every Sunday morning.", ref)[0] == "We hike every Sunday morning."
    assert rewrite_relative("Each Monday I paint.", ref)[0] == "Each Monday I paint."
    assert rewrite_relative("I went on Sunday.", ref)[0] == "I went on 7 May 2023."
