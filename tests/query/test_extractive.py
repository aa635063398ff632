"""The rules backend's extractive answer: which sentence of the context it quotes, and how."""

from __future__ import annotations

import pytest

from lychee_ray.config import load_config
from lychee_ray.query.answer import NO_ANSWER, RulesAnswerer
from lychee_ray.query.answer_lines import AnswerLine, text_lines
from lychee_ray.query.evidence import Evidence
from lychee_ray.query.extractive import expected_type, extract_answer
from lychee_ray.query.fuse import ItemKey


def cfg(**sets: object):
    return load_config(sets=[f"query.answer.{k}={v}" for k, v in sets.items()], env={}).query.answer


def line(text: str, unit: int = 0, speaker: str | None = "Nadia", day: str = "2024-04-10", meaning: float = 0.3,
         relevance: float = 0.5, **kw) -> AnswerLine:
    return AnswerLine(text=text, unit=unit, relevance=relevance, meaning=meaning, speaker=speaker, day=day,
                      session_day=day, **kw)


@pytest.mark.parametrize("question, kind", [
    ("When did Nadia repaint the greenhouse?", "date"),
    ("What year did the orchard open?", "date"),
    ("How many lanterns did Omar hang?", "count"),
    ("How much did the ferry ticket cost?", "count"),
    ("Who fixed the bicycle bell?", "person"),
    ("Where does Lena keep her telescope?", "place"),
    ("Which city did the choir tour first?", "place"),
    ("Why did Omar switch to night shifts?", "reason"),
    ("What flavour of jam did Lena bring?", "thing"),
    ("Did Omar finish the marathon?", "yesno"),
    ("Is the greenhouse heated in winter?", "yesno"),
])
def test_expected_type_from_the_question_word(question, kind):
    assert expected_type(question) == kind


def test_a_how_many_question_quotes_the_sentence_with_the_count_after_its_lead():
    lines = [line("Omar loves hanging lanterns in the courtyard every autumn, the lanterns glow beautifully."),
             line("This year he hung 14 lanterns along the fence.", meaning=0.3)]
    out = extract_answer("How many lanterns did Omar hang?", lines, cfg())
    assert out.endswith("This year he hung 14 lanterns along the fence.")


def test_a_when_question_starts_with_the_day_and_resolves_relative_times():
    lines = [line("I repainted the greenhouse yesterday, it looks brand new.", day="2024-04-10")]
    out = extract_answer("When did Nadia repaint the greenhouse?", lines, cfg())
    assert "9 April 2024" in out and "yesterday" not in out
    dated = [line("The greenhouse got its fresh coat of paint, finally done.", day="2024-04-10")]
    assert extract_answer("When did Nadia paint the greenhouse?", dated, cfg()).startswith("10 April 2024 — ")
    # a sentence saying when is quoted even where one without a time shares more of the question's words
    both = [line("Nadia loves her greenhouse and repainting the greenhouse was fun.", unit=0),
            line("Nadia repainted it on 2 March 2024.", unit=1, speaker="Omar")]
    assert extract_answer("When did Nadia repaint the greenhouse?", both, cfg()) == "Omar: Nadia repainted it on 2 March 2024."


def test_a_question_in_the_context_leads_to_its_reply_without_being_quoted():
    lines = [line("Which team do you cheer for on weekends?", speaker="Omar", unit=0),
             line("The Harbor Hawks, no doubt about it.", speaker="Lena", unit=0),
             line("The weekend market sells great team scarves.", speaker="Omar", unit=1, relevance=0.4)]
    out = extract_answer("Which team does Lena cheer for?", lines, cfg())
    assert out == "Lena: The Harbor Hawks, no doubt about it."


def test_a_remark_leads_to_the_sentence_naming_the_thing():
    lines = [line("I'm waiting for a new mystery podcast! It is called Fogbound Lighthouse.", speaker="Lena")]
    out = extract_answer("What new mystery podcast is Lena waiting for?", lines, cfg())
    assert out == "Lena: I'm waiting for a new mystery podcast! It is called Fogbound Lighthouse."


def test_a_sentence_repeating_the_question_is_no_answer():
    lines = [line("Did Omar finish the marathon?", speaker="Lena"), line("Omar finish the marathon.", speaker="Omar")]
    assert extract_answer("Omar finish the marathon", lines, cfg()) is None


def test_meaning_chooses_among_sentences_sharing_no_word():
    lines = [line("The weather was grey all week.", speaker=None, meaning=0.2),
             line("She took up pottery classes.", speaker=None, meaning=0.8)]
    assert extract_answer("Which hobby did Nadia start?", lines, cfg()) == "She took up pottery classes."
    # below the floor of meaning, a sentence sharing no word answers nothing
    assert extract_answer("Which hobby did Nadia start?", lines, cfg(rules_min_meaning=0.9)) is None


def test_a_superseded_value_loses_to_the_current_one():
    lines = [line("The studio rent is 900 euros per month.", speaker=None, is_record=True, status="superseded",
                  relevance=0.9),
             line("The studio rent is 1,050 euros per month now.", speaker=None, is_record=True, relevance=0.6)]
    assert "1,050" in extract_answer("How much is the studio rent per month?", lines, cfg())


def _evidence(text: str, kind: str, rank: int, session_date: str = "2024-04-10") -> Evidence:
    return Evidence(key=ItemKey("c", "record" if kind == "record" else "turn", f"u{rank}"), kind=kind,  # type: ignore[arg-type]
                    conversation_id="c", id=f"u{rank}", text=text, type="fact" if kind == "record" else "turns",
                    time=None, session_date=session_date, turn_ids=[f"t{rank}"], score=0.5, channels=[], routes=[],
                    rank=rank)


def test_without_a_view_the_evidence_texts_are_read_line_by_line():
    ev = [_evidence("Omar: Any plans for the long weekend?\nLena: We are driving to Lake Ostra to camp.", "turns", 0)]
    lines = text_lines(ev)
    assert [(ln.speaker, ln.text) for ln in lines] == [("Omar", "Any plans for the long weekend?"),
                                                      ("Lena", "We are driving to Lake Ostra to camp.")]
    out = RulesAnswerer(cfg()).answer("Where is Lena going for the long weekend?", None, ev, "")
    assert out.answer == "Lena: We are driving to Lake Ostra to camp."
    assert RulesAnswerer(cfg()).answer("Where is Lena going?", None, [], "").answer == NO_ANSWER


def test_a_time_the_question_already_says_is_not_the_answer():
    lines = [line("Last week Omar fixed the roof of the shed with new tiles.", unit=0, speaker="Lena"),
             line("Omar fixed the shed roof on 3 March 2024.", unit=1, speaker="Nadia")]
    out = extract_answer("When last week did Omar fix the shed roof?", lines, cfg())
    assert out == "Nadia: Omar fixed the shed roof on 3 March 2024."
