"""Passages of long texts (lychee_ray/text/passages.py): token-bounded, contiguous, cut at the
coarsest boundary that fits, every word in some passage, a cap that says it applied."""

from __future__ import annotations

import random

import pytest

from lychee_ray.text.passages import split_passages
from lychee_ray.text.tokens import count_tokens

WORDS = "alpha beta gamma delta epsilon river stone cloud 42 ZQ81KX {\"k\": 3} code() naïve 東京".split()


def _text(seed: int, paragraphs: int) -> str:
    rnd = random.Random(seed)
    paras = []
    for _ in range(paragraphs):
        lines = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(1, 70))) + rnd.choice([".", "!", "", "?"])
                 for _ in range(rnd.randint(1, 5))]
        paras.append("\n".join(lines))
    return "\n\n".join(paras)


def _check(text: str, max_tokens: int) -> list[tuple[int, int]]:
    split = split_passages(text, max_tokens)
    spans = [(s.start, s.end) for s in split.spans]
    prev = 0
    for s in split.spans:
        piece = text[s.start:s.end]
        assert s.tokens == count_tokens(piece) <= max_tokens
        assert piece == piece.strip() and piece
        assert text[prev:s.start].strip() == "", "only whitespace between passages: every word is in one"
        prev = s.end
    assert text[prev:].strip() == ""
    assert not split.capped
    return spans


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_passages_are_bounded_contiguous_and_cover_every_word(seed):
    spans = _check(_text(seed, 60), 200)
    assert len(spans) > 5


def test_a_short_text_is_one_passage_and_blank_text_none():
    split = split_passages("Hello there, how are you?", 200)
    assert [(s.start, s.end) for s in split.spans] == [(0, 25)]
    assert split_passages("   \n\n  ", 200).spans == []


def test_cuts_prefer_paragraphs_then_lines():
    para = " ".join(["word"] * 60)  # ~60 tokens each
    text = "\n\n".join([para] * 6)
    split = split_passages(text, 150)
    # two paragraphs fit in a passage, three do not: every cut falls on a blank line
    assert all(text[s.end:s.end + 2] in ("\n\n", "") for s in split.spans)
    lines = "\n".join(f"line {i} " + "x " * 30 for i in range(40))
    for s in split_passages(lines, 100).spans:
        gap = lines[s.end:len(lines) - len(lines[s.end:].lstrip())]
        assert s.end == len(lines.rstrip()) or "\n" in gap, "cut at a line break"


def test_passages_are_about_equal_no_fragment_left_at_the_end():
    rnd = random.Random(7)
    for lines in (25, 43, 90, 200):
        text = "\n".join(" ".join(rnd.choice(WORDS[:8]) for _ in range(10)) for _ in range(lines))
        sizes = [s.tokens for s in split_passages(text, 200).spans]
        assert len(sizes) <= -(-count_tokens(text) // 200) + 1  # about as few as the bound allows
        assert min(sizes) >= 0.6 * max(sizes), sizes


def test_text_without_whitespace_is_cut_between_tokens():
    blob = "Zq9aX" * 4000  # a minified blob: no boundary to cut at
    spans = _check(blob, 200)
    assert "".join(blob[a:b] for a, b in spans) == blob


def test_a_cap_cuts_the_text_and_says_so():
    text = _text(5, 200)
    split = split_passages(text, 200, max_chars=5000)
    assert split.capped and split.covered == 5000 and split.length == len(text)
    assert max(s.end for s in split.spans) <= 5000
    with pytest.raises(ValueError):
        split_passages(text, 0)
