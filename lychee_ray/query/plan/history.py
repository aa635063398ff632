"""Questions that ask for history: what a value was before, when or how it changed.

Both planners read the question with :func:`asks_history` (the ``openai`` planner also asks its
model, :class:`~lychee_ray.query.plan.prompt.PlanReply` ``history``); a history plan shows each
found slot's chain of values in time order with their dates instead of the current value first
(docs/current-memory.md). The cues are explicit, so an ordinary "before" ("before the trip")
does not switch it on.
"""

from __future__ import annotations

import re

_CUES = re.compile(
    r"\b(?:what|which|where|who|how\s+\w+)\s+(?:was|were|did)\b[^?]*\b(?:before|originally|at first|previously|initially)\s*"
    r"(?:(?:it|that|this|they)\s+)?(?:(?:was|were|got)\s+)?(?:changed?|updated?|moved|switched|cancell?ed|[?.!]|$)"
    r"|\bwhen\s+did\b[^?]*\b(?:change|changed|update|updated|switch|switched|move|moved|cancel|cancelled|canceled)\b"
    r"|\b(?:previous|former|old|original|prior|earlier)\s+(?:value|address|flights?|reservation|plan|date|time|"
    r"deadline|name|email|number|price|booking|order|preference|setting|status|version|one|ones)\b"
    r"|\bused?\s+to\s+(?:be|have|live|work|prefer|like)\b"
    r"|\bchanged?\s+(?:it\s+)?from\b|\bhistory\s+of\b|\bhow\s+(?:has|have|did)\b[^?]*\bchange"
    r"|\bbefore\s+(?:the|that|this|it|its|my|the\s+\w+)\s+(?:was\s+)?(?:change|update|switch|cancellation|move)\b",
    re.I,
)


def asks_history(question: str) -> bool:
    """True when the question asks what a value was before, or when/how it changed."""
    return bool(_CUES.search(question or ""))


__all__ = ["asks_history"]
