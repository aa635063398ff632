"""Answer in context for questions graded by a rubric (BEAM): the short answers a context can hold.

A rubric question's gold answer is a sentence ("Your first sprint ends on March 29.") that no
context holds verbatim; its rubric statements say what a correct response states ("LLM response
should state: March 29"). A statement's **claim** is the text after ``should state / mention /
contain / include / say:`` (a statement without that prefix, e.g. an ordering item "Core
functionality", is its own claim). A question's **short answers** are its claims of at most
``eval.beam.short_answer_max_words`` words that occur in the conversation's text (normalised as
:func:`~lychee_ray.eval.metrics.context.answer_in_context` compares: LoCoMo normalisation, whole
words). The answer is in a context when every short answer is (:func:`answers_in_context`); a
question without short answers has no answer-in-context figure (None).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from lychee_ray.eval.metrics.locomo import locomo_normalize

_CLAIM = re.compile(r"^.{0,60}?\bshould\s+(?:state|mention|contain|include|say|note|list)\b\s*:?\s*", re.I | re.S)


_QUOTES = "\"'“”‘’"


def rubric_claim(statement: str) -> str:
    """The claim of one rubric statement (module docstring), without a final stop or quotes around it all."""
    s = _CLAIM.sub("", str(statement or "").strip(), count=1).strip().rstrip(".").strip()
    if len(s) >= 2 and s[0] in _QUOTES and s[-1] in _QUOTES and not any(q in s[1:-1] for q in _QUOTES):
        s = s[1:-1].strip()
    return s


def short_answers(rubric: Iterable[str], chat_normalized: str, max_words: int) -> list[str]:
    """The rubric's claims of at most ``max_words`` words whose normalised form occurs in the chat
    (``chat_normalized``: :func:`~lychee_ray.eval.metrics.context.normalized_context` of its text)."""
    out: list[str] = []
    for statement in rubric:
        claim = rubric_claim(statement)
        norm = locomo_normalize(claim)
        if norm and len(norm.split()) <= max_words and f" {norm} " in chat_normalized and claim not in out:
            out.append(claim)
    return out


def answers_in_context(answers: Sequence[str], context_normalized: str) -> bool | None:
    """Every short answer occurs (normalised, whole words) in the normalised context; None without any."""
    if not answers:
        return None
    return all(f" {locomo_normalize(a)} " in context_normalized for a in answers)


__all__ = ["answers_in_context", "rubric_claim", "short_answers"]
