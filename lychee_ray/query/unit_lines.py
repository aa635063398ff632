"""The lines of a context unit as the marks read them: a record's one line, a window's turns, a
passage's part of its turn (the turns shown around it whole), each with where it was said and by whom."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from lychee_ray.core.conversation import USER_ROLE
from lychee_ray.query.fuse import ItemKey
from lychee_ray.query.view import ConversationView


@dataclass(frozen=True)
class UnitLine:
    """A line of a unit: its text, its place in the conversation (its latest source turn), its date,
    its source turns, whether the user said it (all its source turns are the user's) and the speaker
    of its first source turn ("" for a record that cites none)."""

    text: str
    order: int
    day: str | None
    by_user: bool
    turns: frozenset[int]
    speaker: str


def unit_lines(view: ConversationView, kind: str, item_id: str, turn_ids: Sequence[str]) -> list[UnitLine]:
    """The lines of the unit of ``kind`` (record, turns, passage) and id ``item_id`` covering ``turn_ids``."""
    if kind == "record":
        pos = view.record_pos[item_id]
        src = view.record_turns[pos]
        return [UnitLine(view.record_text[pos], max(src) if src else -1, view.record_session_date[pos],
                         bool(src) and all(view.turn_role[tp] == USER_ROLE for tp in src), frozenset(src),
                         view.turn_speaker[src[0]] if src else "")]
    got = view.passage_pos.get(item_id) if kind == "passage" else None
    out = []
    for tid in turn_ids:
        tp = view.turn_pos[tid]
        part = view.passages.text[got] if got is not None and view.passage_turn(got) == tp else None
        out.append(UnitLine(view.turn_text[tp] if part is None else part, tp, view.turn_session_date[tp],
                            view.turn_role[tp] == USER_ROLE, frozenset([tp]), view.turn_speaker[tp]))
    return out


def key_lines(view: ConversationView, key: ItemKey) -> list[UnitLine]:
    """A pool item's lines (a turn or a passage alone, without the window the selection may add)."""
    if key.kind == "record":
        return unit_lines(view, "record", key.id, [])
    if key.kind == "passage":
        pos = view.passage_pos.get(key.id)
        return [] if pos is None else unit_lines(view, "passage", key.id, [view.turn_ids[view.passage_turn(pos)]])
    return unit_lines(view, "turn", key.id, [key.id])


__all__ = ["UnitLine", "key_lines", "unit_lines"]
