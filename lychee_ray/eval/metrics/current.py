"""Scores of a context for a question about what holds now, or about what held before
(docs/current-memory.md; questions: eval/setup/current_questions.py).

Per question, from its ``meta`` (``current``, ``replaced``, ``replaced_turns``, ``old``, ``field``,
``change_day``) and the selected units (the turns each cites, its text, its status):

* ``current_in_context`` — every current token (the new value: ``HAT110``, ``cancelled``) is in the context;
* ``stale_unmarked`` — some unit shows the replaced value and is not marked (status ``current``): its
  text holds a replaced token (``HAT227``), or it cites a result that showed the old state and shows
  the changed scalar field with its old value (``total baggages: 0``), or — for a cancellation,
  whose old state is the whole object — one of the old state's identifiers that no call of the log
  names (``state_ids``: flight numbers);
* ``clean`` — current in context and nothing stale unmarked;
* ``history_answerable`` (history questions) — the old value's tokens and the day of the change are
  in the context.

Tokens match as whole words, case-insensitively, punctuation ignored.
"""

from __future__ import annotations

from lychee_ray.core.status import CURRENT_STATUS

import re
from typing import Any
from collections.abc import Sequence

_NON_WORD = re.compile(r"[^0-9a-z]+")
STATUS_FIELD = "status"


def _norm(text: str) -> str:
    return f" {_NON_WORD.sub(' ', text.lower()).strip()} "


def has(text_norm: str, token: str) -> bool:
    """``token`` occurs as whole words in an already :func:`_norm`-ed text."""
    t = _norm(token).strip()
    return bool(t) and f" {t} " in text_norm


def current_scores(meta: dict[str, Any], units: Sequence[tuple[Sequence[str], str, str]], context: str,
                   history: bool) -> dict[str, float | None]:
    """The scores above for one question; ``units``: (cited turn ids, text, status) of each unit."""
    ctx = _norm(context)
    current = [str(x) for x in meta.get("current") or []]
    replaced = [str(x) for x in meta.get("replaced") or []]
    replaced_turns = set(meta.get("replaced_turns") or [])
    field = str(meta.get("field") or "")
    state_ids = [str(x) for x in meta.get("state_ids") or []]
    old_values = [str(x) for x in meta.get("old") or [] if str(x) not in current]
    stale = False
    for turns, text, status in units:
        if status != CURRENT_STATUS:
            continue
        norm = _norm(text)
        if any(has(norm, t) for t in replaced):
            stale = True
            break
        if field == STATUS_FIELD:
            shows_old = any(has(norm, t) for t in state_ids)
        else:  # a scalar field's old value as "field: value" (a record) or '"field": value' (JSON)
            shows_old = not replaced and any(has(norm, f"{field} {v}") for v in old_values)
        if replaced_turns & set(turns) and shows_old:
            stale = True
            break
    in_ctx = bool(current) and all(has(ctx, t) for t in current)
    out: dict[str, float | None] = {
        "current_in_context": float(in_ctx), "stale_unmarked": float(stale), "clean": float(in_ctx and not stale),
        "history_answerable": None,
    }
    if history:
        old = replaced or [str(x) for x in meta.get("old") or [] if str(x) not in current]
        day = meta.get("change_day")
        out["history_answerable"] = float(all(has(ctx, t) for t in old) and (not day or str(day) in context))
    return out


__all__ = ["current_scores", "has"]
