"""LLM-free answer and retrieval metrics for ``lychee-ray eval`` (DESIGN §5).

Answer metrics compare the answer with the gold answer after **normalisation** (the SQuAD /
LoCoMo convention): lowercase; punctuation removed (every character in ``string.punctuation`` plus
typographic quotes and dashes becomes a space); the articles *a*, *an*, *the* removed; whitespace
collapsed. Tokens are the whitespace-separated words of that string.

- :func:`token_f1` — harmonic mean of token precision and recall over the multiset of tokens
  (SQuAD F1). Both empty → 1.0; exactly one empty → 0.0.
- :func:`bleu1` — BLEU with unigrams only: clipped unigram precision × brevity penalty
  ``exp(1 − r/c)`` when the candidate (``c`` tokens) is shorter than the reference (``r``).
  Both empty → 1.0; exactly one empty → 0.0.

Retrieval metrics need no LLM:

- :func:`evidence_recall` — share of the gold evidence turns covered by the selected context (a
  record covers its source turns, a raw-turn window every turn in it); the per-question value of
  :func:`lychee_ray.retrieval_eval.coverage`, reused here.
- :func:`session_recall` — LongMemEval: share of the gold answer sessions that at least one
  selected evidence turn comes from.
- :func:`is_abstention` — whether an answer declines ("I don't know", "not mentioned", "no
  information" …): LongMemEval ``_abs`` questions are correct exactly when the answer abstains.
"""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from typing import Iterable, Mapping

from .retrieval_eval import coverage

_PUNCT = set(string.punctuation) | set("‘’“”«»–—…")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str | None) -> str:
    """Lowercase, punctuation → space, articles removed, whitespace collapsed."""
    if not text:
        return ""
    s = "".join(" " if ch in _PUNCT else ch for ch in str(text).lower())
    s = _ARTICLES.sub(" ", s)
    return " ".join(s.split())


def answer_tokens(text: str | None) -> list[str]:
    """The normalised answer's tokens."""
    return normalize_answer(text).split()


def token_f1(prediction: str | None, gold: str | None) -> float:
    """SQuAD token F1 between normalised ``prediction`` and ``gold``."""
    p, g = answer_tokens(prediction), answer_tokens(gold)
    if not p and not g:
        return 1.0
    if not p or not g:
        return 0.0
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def bleu1(prediction: str | None, gold: str | None) -> float:
    """Sentence BLEU-1: clipped unigram precision × brevity penalty (normalised tokens)."""
    c, r = answer_tokens(prediction), answer_tokens(gold)
    if not c and not r:
        return 1.0
    if not c or not r:
        return 0.0
    clipped = sum((Counter(c) & Counter(r)).values())
    precision = clipped / len(c)
    bp = 1.0 if len(c) > len(r) else math.exp(1 - len(r) / len(c))
    return bp * precision


def evidence_recall(gold_turns: Iterable[str], covered_turns: Iterable[str]) -> float | None:
    """Share of gold evidence turns covered; None when the question has no gold evidence."""
    gold = list(gold_turns)
    if not gold:
        return None
    return coverage(gold, covered_turns)[0]


def session_recall(gold_sessions: Iterable[str], covered_turns: Iterable[str],
                   turn_session: Mapping[str, str]) -> float | None:
    """Share of gold answer sessions with at least one covered turn; None without gold sessions."""
    gold = set(gold_sessions)
    if not gold:
        return None
    hit = {turn_session[t] for t in covered_turns if t in turn_session}
    return len(gold & hit) / len(gold)


_ABSTAIN = re.compile(
    r"\b(?:i\s+(?:do\s*n[o']?t|don't|cannot|can't|can\s+not)\s+(?:know|tell|say|find|recall|determine|answer)"
    r"|(?:not|never)\s+(?:been\s+)?(?:mentioned|stated|specified|provided|discussed|available|known|given|said|recorded|shared)"
    r"|no\s+(?:information|mention|record|details?|data|memory|memories|evidence|indication)"
    r"|(?:does|did)\s*n[o']?t\s+(?:mention|say|specify|include|contain)"
    r"|(?:cannot|can't|can\s+not|unable\s+to)\s+(?:be\s+)?(?:answer|determine|determined|answered|find|found|tell|know)"
    r"|unknown|not\s+enough\s+information|insufficient\s+information|no\s+way\s+to\s+know)",
    re.I,
)


def is_abstention(answer: str | None) -> bool:
    """True when the answer says the information is not available (empty counts as abstaining)."""
    if not answer or not answer.strip():
        return True
    return bool(_ABSTAIN.search(answer.replace("’", "'")))


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the non-None values (None when there are none)."""
    vals = [float(v) for v in values if v is not None]
    return sum(vals) / len(vals) if vals else None


__all__ = ["answer_tokens", "bleu1", "evidence_recall", "is_abstention", "mean", "normalize_answer", "session_recall",
           "token_f1"]
