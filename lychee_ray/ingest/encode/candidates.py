"""A segment's slot candidates as the ``openai`` encoder's reference context shows them (the current
records ingest/supersede.py picked; the reply names their labels in ``replaces`` / ``contradicts``)."""

from __future__ import annotations

from collections.abc import Sequence

from lychee_ray.config import CurrencyConfig
from lychee_ray.ingest.encode.base import SlotCandidate
from lychee_ray.text.tokens import count_tokens


def candidates_block(candidates: Sequence[SlotCandidate], cfg: CurrencyConfig, encoding: str) -> str:
    """The candidates as the reference context shows them, within ``candidate_tokens``: one line
    each, ``[c1] slot = value (since day): record text``; empty when there are none."""
    if not candidates or cfg.candidate_tokens <= 0:
        return ""
    head = "Current records these turns may change (put a label in replaces or contradicts when a record of yours does):"
    lines = [head]
    used = count_tokens(head, encoding)
    for c in candidates:
        text = c.text if len(c.text) <= cfg.candidate_chars else c.text[: cfg.candidate_chars].rsplit(" ", 1)[0] + " …"
        since = f" (since {c.valid_from[:10]})" if c.valid_from else ""
        value = f" = {c.value}" if c.value else ""
        line = f"[{c.label}] {c.slot}{value}{since}: {text}"
        n = count_tokens(line, encoding) + 1
        if used + n > cfg.candidate_tokens:
            break
        lines.append(line)
        used += n
    return "\n".join(lines) if len(lines) > 1 else ""


__all__ = ["candidates_block"]
