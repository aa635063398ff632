"""The one value parser (text/values.py): kinds, units, normalised values, subjects and modality of
values said in sentences written for this test (money, counts, measures, dates, times, states)."""

from __future__ import annotations

import pytest

from lychee_ray.text.values import parse_values, says_value


def _one(text: str):
    got = parse_values(text)
    assert len(got) == 1, [(v.kind, v.said, v.subject) for v in got]
    return got[0]


@pytest.mark.parametrize("text, kind, unit, value, subject", [
    ("My monthly gym membership costs $45.", "money", "usd", "45", "monthly gym membership"),
    ("The greenhouse heater bill came to 320 euros last winter.", "money", "eur", "320", "greenhouse heater bill"),
    ("Our grocery budget is $2.5k a month.", "money", "usd/month", "2500", "grocery budget"),
    ("The tomato seedlings reached 85% germination.", "percentage", "%", "85", "tomato seedlings"),
    ("I now swim 40 laps in the pool every Saturday.", "count", "lap", "40", "swim laps pool"),
    ("The ferry crossing takes 95 minutes.", "duration", "s", "5700", "ferry crossing"),
    ("The backup image is 730GB.", "count", "gb", "730", "backup image"),
    ("The pottery class starts at 6:15 pm.", "time", "", "18:15", "pottery class starts"),
    ("The lease ends on 2025-08-31.", "date", "", "2025-08-31", "lease ends"),
    ("Priya's locker code is K7Q2.", "state", "", "k7q2", "locker code"),
    ("My favourite trail is the Ridge Loop.", "state", "", "ridge loop", "favourite trail"),
])
def test_kinds_units_values_and_subjects(text, kind, unit, value, subject):
    v = _one(text)
    assert (v.kind, v.unit, v.value, v.subject) == (kind, unit, value, subject)
    assert v.said in text


@pytest.mark.parametrize("text, modality", [
    ("The van payment is $310 now.", "now"),
    ("I paid $310 for the van repair.", "done"),
    ("I plan to save $310 for the van.", "plan"),
    ("I want to run 12 miles of trail by spring.", "plan"),
    ("Keep each standup under 15 minutes.", "plan"),
    ("Is the van payment $310?", "question"),
    ("Dana asked: is the deposit $310?", "question"),
    ("The deposit was not $310.", "denial"),
])
def test_modality(text, modality):
    assert _one(text).modality == modality


def test_what_is_no_value():
    assert parse_values("I stopped by 3 Kings Bakery for bread.") == []  # a number before a name
    assert parse_values("She is reading quietly.") == []  # a person and a verb form, no state
    assert parse_values("") == []


def test_a_value_in_an_assistants_reply_and_its_frame():
    v = _one("Assistant said: Your storage plan is 2TB, which fits the photo archive.")
    assert (v.kind, v.unit, v.value, v.subject) == ("count", "tb", "2", "storage plan")


def test_says_value_as_a_whole():
    assert says_value("Meet at 7 P.M. by the pier", "7 pm") and not says_value("at 17 pm", "7 pm")
    assert not says_value("costs 1,200.50 now", "1,200") and says_value("It costs $1,200.", "$1,200")
    assert not says_value("due June 10", "june 1")
