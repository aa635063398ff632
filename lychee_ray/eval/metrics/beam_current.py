"""Scores of a context for BEAM's knowledge-update and contradiction questions (docs/current-memory.md).

BEAM gives these questions their gold messages in groups (``meta.gold_groups``, io/adapters/beam.py):
``original_info`` / ``updated_info`` for a knowledge update, ``first_statement`` / ``second_statement``
for a contradiction. A unit *shows* a message when it cites it (a turn window holding it, a record
made from it); a unit is *marked* when its status is not ``current`` (superseded, conflicting, history).

Knowledge update:

* ``updated_in_context`` — the latest updated message (in chat order) is cited by a unit;
* ``original_only`` — an original message is cited and no updated one is;
* ``stale_unmarked`` — a replaced value is shown by an unmarked unit that cites no updated message
  (a unit showing the new value beside the old one tells the change itself): measured only for a
  question given its replaced values (``meta.replaced_values``: the old value as the original
  message words it, and other ways of writing it; BEAM does not name it, so they are annotated by
  hand, ``eval-retrieval --replaced-values``); None without them, or when the list is empty (the
  original message states no value the update replaces);
* ``updated_marked`` — a unit that cites an updated message and no original one (it shows the value
  that holds) is marked superseded (or history): the current value said to be stale;
* ``stale_message_unmarked`` — an original message (one that is not also an updated one) is cited by an
  unmarked unit, whatever the unit shows (an upper bound of the above: a long message's other,
  still-valid statements count too); None when the groups leave no such message.

Contradiction resolution:

* ``contradiction_in_context`` — each statement (a message of each group) is cited by a unit;
* ``contradiction_marked`` — each statement is cited by a marked unit.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Callable, Sequence

from lychee_ray.core.status import CURRENT_STATUS, HISTORY_STATUS, SUPERSEDED_STATUS
from lychee_ray.text.values import says_value

KNOWLEDGE_UPDATE = "knowledge_update"
CONTRADICTION = "contradiction_resolution"
ORIGINAL, UPDATED = "original_info", "updated_info"
FIRST, SECOND = "first_statement", "second_statement"
ABILITIES = (KNOWLEDGE_UPDATE, CONTRADICTION)
REPLACED = (SUPERSEDED_STATUS, HISTORY_STATUS)  # statuses that say a unit's value no longer holds


def _cited(units: Sequence[tuple[Sequence[str], str]], ids: Sequence[str], marked: bool | None = None) -> bool:
    """Some unit cites one of ``ids`` (``marked``: True — a marked unit; False — an unmarked one)."""
    want = set(ids)
    return any(want & set(turns) and (marked is None or (status != CURRENT_STATUS) == marked) for turns, status in units)


def _shows(text: str, values: Sequence[str]) -> bool:
    """``text`` says one of ``values`` as a whole (:func:`~lychee_ray.text.values.says_value`:
    case and spacing aside, "3 PM" is not in "13 pm", "April 1" is not in "April 10")."""
    return any(says_value(text, " ".join(v.lower().split())) for v in values if v.strip())


def beam_current_scores(category: str, groups: dict[str, list[str]] | None, units: Sequence[tuple[Sequence[str], str]],
                        order: Callable[[str], int], texts: Sequence[str] | None = None,
                        replaced: Sequence[str] | None = None) -> dict[str, float | None]:
    """The scores above for one question (empty for other abilities or a question without groups);
    ``units``: (cited turn ids, status) of each unit; ``order``: a message id's position in the chat;
    ``texts``: each unit's text; ``replaced``: the question's replaced values (None: not annotated)."""
    if category not in ABILITIES or not groups:
        return {}
    if category == KNOWLEDGE_UPDATE:
        updated = list(groups.get(UPDATED) or [])
        original = [t for t in groups.get(ORIGINAL) or [] if t not in set(updated)]
        if not updated:
            return {}
        latest = max(updated, key=order)
        shown_original = _cited(units, groups.get(ORIGINAL) or [])
        stale: float | None = None
        if replaced and texts is not None:
            new = set(updated)
            stale = float(any(status == CURRENT_STATUS and not new & set(turns) and _shows(text, replaced)
                              for (turns, status), text in zip(units, texts, strict=True)))
        only_new = any(set(updated) & set(turns) and not set(original) & set(turns) and status in REPLACED
                       for turns, status in units)
        return {
            "updated_in_context": float(_cited(units, [latest])),
            "updated_marked": float(only_new),
            "original_only": float(shown_original and not _cited(units, updated)),
            "stale_unmarked": stale,
            "stale_message_unmarked": float(_cited(units, original, marked=False)) if original else None,
        }
    first, second = list(groups.get(FIRST) or []), list(groups.get(SECOND) or [])
    if not first or not second:
        return {}
    return {
        "contradiction_in_context": float(_cited(units, first) and _cited(units, second)),
        "contradiction_marked": float(_cited(units, first, marked=True) and _cited(units, second, marked=True)),
    }


def qualified_groups(meta: dict[str, Any], qualify: Callable[[str], str]) -> dict[str, Any]:
    """``meta`` with its gold groups' ids qualified (a user-scoped evaluation's turn ids)."""
    groups = meta.get("gold_groups")
    if not isinstance(groups, dict):
        return meta
    return {**meta, "gold_groups": {k: [qualify(t) for t in v] for k, v in groups.items()}}


__all__ = ["ABILITIES", "CONTRADICTION", "KNOWLEDGE_UPDATE", "beam_current_scores", "qualified_groups"]
