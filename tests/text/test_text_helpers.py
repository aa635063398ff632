"""The shared text helpers: stop-word lists, sentence splitting, date reading and calendar arithmetic."""

from __future__ import annotations

from datetime import date, datetime, timezone

import pytest

from lychee_ray.text.dates import (
    add_months,
    as_datetime,
    granularity_for,
    iso_day,
    month_end,
    parse_iso_datetime,
    readable_day,
    readable_month,
    shift_months,
    to_date,
    week_start,
)
from lychee_ray.text.sentences import rough_sentences, sentence_around, split_sentences
from lychee_ray.text.stopwords import (
    BASE_STOPWORDS,
    COMMON_STOPWORDS,
    ENCODER_STOPWORDS,
    LEXICAL_STOPWORDS,
    MATCH_STOPWORDS,
)

# ---------------------------------------------------------------- stop words


def test_stopword_lists_extend_one_base():
    assert BASE_STOPWORDS < COMMON_STOPWORDS < ENCODER_STOPWORDS
    assert COMMON_STOPWORDS < LEXICAL_STOPWORDS
    assert BASE_STOPWORDS < MATCH_STOPWORDS
    assert BASE_STOPWORDS == ENCODER_STOPWORDS & LEXICAL_STOPWORDS & MATCH_STOPWORDS


def test_stopword_lists_differ_where_their_tokenizers_do():
    # the encoder keeps apostrophes, BM25's tokenizer splits at them
    assert {"didn't", "i'm"} <= ENCODER_STOPWORDS and not {"didn", "t"} & ENCODER_STOPWORDS
    assert {"didn", "t", "ll"} <= LEXICAL_STOPWORDS and "didn't" not in LEXICAL_STOPWORDS
    # time words are no key match on their own, but they are ordinary BM25 terms
    assert {"week", "last", "first"} <= MATCH_STOPWORDS and not {"week", "last", "first"} & LEXICAL_STOPWORDS
    assert len(ENCODER_STOPWORDS) == 275 and len(LEXICAL_STOPWORDS) == 173 and len(MATCH_STOPWORDS) == 100


# ---------------------------------------------------------------- sentences


def test_split_sentences_keeps_abbreviations_and_quotes():
    text = 'I met Dr. Smith at 3.5 p.m. today. He said "hi!" Then J. Doe came.\nNew line'
    assert split_sentences(text) == ["I met Dr. Smith at 3.5 p.m. today.", 'He said "hi!"', "Then J. Doe came.", "New line"]
    assert split_sentences("  ") == []


def test_rough_sentences_splits_at_every_terminator():
    assert rough_sentences("Dr. Smith came. Yes!\n\nOk") == ["Dr.", "Smith came.", "Yes!", "Ok"]
    assert rough_sentences("") == [""]


def test_sentence_around():
    text = "We met. I will go on Friday! Then home"
    i = text.index("Friday")
    assert sentence_around(text, i, i + 6) == " I will go on Friday"
    assert sentence_around(text, 0, 2) == "We met"
    assert sentence_around(text, len(text) - 4, len(text)) == " Then home"


# ---------------------------------------------------------------- reading dates


def test_as_datetime_is_strict():
    assert as_datetime(None) is None and as_datetime("") is None
    assert as_datetime(date(2023, 5, 8)) == datetime(2023, 5, 8)
    assert as_datetime(" 2023-05-08T10:00Z ") == datetime(2023, 5, 8, 10, tzinfo=timezone.utc)
    with pytest.raises(ValueError, match="question_date"):
        as_datetime("last Tuesday")


def test_lenient_readers():
    assert to_date(datetime(2023, 5, 8, 13, 56)) == date(2023, 5, 8)
    assert to_date(" 2023-05-08Z") == date(2023, 5, 8)
    assert to_date("soon") is None and to_date(None) is None
    assert iso_day("2023-05-08T13:56:00") == date(2023, 5, 8)
    assert iso_day("2023-13-01") is None and iso_day(None) is None and iso_day("") is None


def test_parse_iso_datetime_reads_exactly():
    assert parse_iso_datetime("2023-05-08T13:56:00") == datetime(2023, 5, 8, 13, 56)
    assert parse_iso_datetime(" 2023-05-08") is None  # no trimming: session dates are stored exactly
    assert parse_iso_datetime(None) is None and parse_iso_datetime("x") is None


# ---------------------------------------------------------------- calendar


def test_calendar_arithmetic():
    assert month_end(2024, 2) == date(2024, 2, 29)
    assert add_months(2023, 11, 3) == (2024, 2) and add_months(2023, 1, -1) == (2022, 12)
    assert shift_months(date(2023, 3, 31), -1) == date(2023, 2, 28)
    assert week_start(date(2023, 5, 7)) == date(2023, 5, 1)  # a Sunday → its Monday


@pytest.mark.parametrize(
    "start, end, gran",
    [
        (date(2023, 5, 8), date(2023, 5, 8), "day"),
        (date(2023, 1, 1), date(2023, 12, 31), "year"),
        (date(2023, 2, 1), date(2023, 2, 28), "month"),
        (date(2023, 5, 1), date(2023, 5, 7), "week"),
        (date(2023, 5, 2), date(2023, 5, 8), "range"),
    ],
)
def test_granularity_for(start, end, gran):
    assert granularity_for(start, end) == gran


def test_readable_forms_do_not_follow_the_locale():
    assert readable_day(date(2023, 5, 7)) == "7 May 2023"
    assert readable_month(2023, 12) == "December 2023"
