"""LLM-free retrieval metrics for ``lychee-ray eval`` (DESIGN §5).

Answer metrics (LoCoMo's official F1, the Mem0/LoCoMo BLEU-1) live in
:mod:`lychee_ray.eval.metrics.locomo`; what the context *text* contains (content coverage,
answer-in-context) in :mod:`lychee_ray.eval.metrics.context`. Here, by id:

- :func:`coverage` — (fraction of gold turns covered, any covered, all covered); what
  ``lychee-ray eval-retrieval`` (:mod:`lychee_ray.eval.runners.retrieval`) reports per question.
- :func:`evidence_recall` — share of the gold evidence turns covered by the selected context (a
  record covers its source turns, a raw-turn window every turn in it): :func:`coverage`'s fraction.
- :func:`session_recall` — LongMemEval: share of the gold answer sessions that at least one
  selected evidence turn comes from.
- :func:`is_abstention` — whether an answer declines ("I don't know", "not mentioned", "no
  information" …): LongMemEval ``_abs`` questions are correct exactly when the answer abstains.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping


def coverage(gold: Iterable[str], covered: Iterable[str]) -> tuple[float, bool, bool]:
    """(fraction of gold turns covered, any covered, all covered); no gold → (0.0, False, False)."""
    g = set(gold)
    if not g:
        return 0.0, False, False
    hit = len(g & set(covered))
    return hit / len(g), hit > 0, hit == len(g)


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


__all__ = ["coverage", "evidence_recall", "is_abstention", "mean", "session_recall"]
