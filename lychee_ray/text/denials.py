"""Denials in what a person says, and whether a statement says the denied thing happened
(``rules`` backend; docs/current-memory.md).

* **A denial** (:func:`denial`): "I've never X" / "I have never X", or in the third person the
  rules backend writes a speaker's statements in ("User has never X") — the words of X;
* **a plan** (:data:`PLAN`): words that make what follows a plan, a goal or a wish.

English only: the cues are English grammar words.
"""

from __future__ import annotations

import re
from functools import lru_cache

from lychee_ray.text.lexical import lexical_terms

_DENIED = r"(?:'ve|’ve|'s|’s| have| has| had|'d| would)?\s+never\s+(?:actually\s+|ever\s+|really\s+)?(?P<x>[^,.;!?]{8,})"
DENIAL = re.compile(rf"\bI{_DENIED}", re.I)
# words that make what follows a plan, a goal or a wish rather than what is
PLAN = re.compile(r"\b(?:want|wants|wanted|plan|planning|goal|goals|target|targeting|aim|aiming|going to|will|would|hope|"
                  r"hoping|considering|thinking of|invited|should|could|might|if|need to|needs to)\b", re.I)
# words that say nothing of what a value is about (the statement frames of chat: "I'm trying to ...")
FRAME_TERMS = frozenset(lexical_terms(
    "i im ive trying want need help make sure can could would like know how what project also get got have has had my "
    "me total per about around only just now new recently currently increased improved to from reached by the this "
    "that it already still really kinda user users assistant which due said says"))


@lru_cache(maxsize=256)
def _denial_of(subject: str) -> re.Pattern[str]:
    return re.compile(rf"(?:\bI|(?<![\w'’]){re.escape(subject)}){_DENIED}", re.I)


def denied_text(text: str, subject: str | None = None) -> str:
    """The words of what "I've never ..." denies in ``text``, as said ("" when it denies nothing)."""
    m = (_denial_of(subject) if subject else DENIAL).search(text)
    return " ".join(m.group("x").split()) if m else ""


def denial(text: str, subject: str | None = None, frame: bool = False) -> frozenset[str]:
    """The content words of what "I've never ..." denies in ``text`` (empty: no denial). ``subject``:
    the speaker's name, so that the statement as the rules backend writes it, in the third person
    ("User has never ..."), reads as the denial it is; ``frame``: keep the chat's frame words
    ("never worked with Michael on any projects": a question that names them means them)."""
    m = (_denial_of(subject) if subject else DENIAL).search(text)
    if not m:
        return frozenset()
    words = frozenset(lexical_terms(m.group("x")))
    return words if frame else words - FRAME_TERMS


__all__ = ["DENIAL", "FRAME_TERMS", "PLAN", "denial", "denied_text"]
