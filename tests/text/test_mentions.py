"""Mentions of a name cut out of a text at clause granularity: what forgetting an entity keeps of a
record (strip) and of a raw turn (redact). Sentences written for the test."""

from __future__ import annotations

from lychee_ray.text.mentions import mention_pattern, redact_mentions, strip_mentions

REDACTED = "[forgotten]"
MIXED = "My beagle Biscuit loves the park and I have a severe peanut allergy."


def test_mentions_cut_at_clauses():
    p = mention_pattern("biscuit")
    assert strip_mentions(MIXED, p) == "I have a severe peanut allergy."
    assert strip_mentions("Tom has a beagle called Biscuit and a peanut allergy.", p) == "Tom has a peanut allergy."
    assert strip_mentions("Tom has a peanut allergy and a beagle called Biscuit.", p) == "Tom has a peanut allergy."
    assert strip_mentions("Tom bought Biscuit a bowl and a leash.", p) is None  # the fragment's head names it
    assert strip_mentions("Lisbon is sunny. Biscuit naps.", p) == "Lisbon is sunny."
    assert strip_mentions("No pets here.", p) == "No pets here."
    assert strip_mentions("BiscuitBox ships on Monday.", p) == "BiscuitBox ships on Monday."  # whole words only
    assert redact_mentions(MIXED, p, REDACTED) == f"{REDACTED} and I have a severe peanut allergy."
    assert redact_mentions("Hi.\nBiscuit naps; biscuit snores.\nBye.", p, REDACTED) == f"Hi.\n{REDACTED}.\nBye."


def test_a_name_of_several_words_matches_across_whitespace():
    p = mention_pattern("Marguerite  Dupont")
    text = "Tom met marguerite\nDupont in Lisbon, so Tom now studies cello."
    assert p.search(text)
    assert strip_mentions("Tom met Marguerite Dupont in Lisbon, so Tom now studies cello.", p) == "Tom now studies cello."
