"""The lines an extractive answer chooses from: one per record, per turn of a raw-turn window, per passage.

Each line carries what the choice weighs besides its words: how close its stored vector is to the
question's (meaning, at no embedding cost: the build stored every record, turn and passage vector),
its unit's relevance and rank in the selection, who said it and on which day (the session date, or
a record's own time), and whether what it shows still holds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from lychee_ray.query.evidence import Evidence
from lychee_ray.query.hits import ItemKind
from lychee_ray.query.view import ConversationView


@dataclass(frozen=True)
class AnswerLine:
    """One line of the selected context, as the extractive answer reads it."""

    text: str  # a record's text, a turn's or a passage's content (without the speaker)
    unit: int  # position of its evidence unit in selection order (0 = picked first)
    relevance: float  # its unit's relevance in [0, 1]
    meaning: float  # cosine of its stored vector with the question's (0 when unknown)
    speaker: str | None = None  # who said it (a raw turn or passage); None for a record
    day: str | None = None  # ISO day it refers to: a record's time, else its session date
    session_day: str | None = None  # ISO day it was said: the reference for its relative times
    is_record: bool = False
    status: str = "current"  # the unit's currency status (superseded: a value that no longer holds)


def _cosine(view: ConversationView, kind: ItemKind, pos: int, qvec: np.ndarray | None) -> float:
    if qvec is None:
        return 0.0
    return float(np.dot(view.vector(kind, pos), qvec))


def _day(value: str | None) -> str | None:
    return value[:10] if value else None


def _record_line(unit: Evidence, meaning: float) -> AnswerLine:
    day = unit.time.start if unit.time is not None and unit.time.start else unit.session_date
    return AnswerLine(text=unit.text, unit=unit.rank, relevance=unit.score, meaning=meaning, day=_day(day),
                      session_day=_day(unit.session_date), is_record=True, status=unit.status)


def lines_of(unit: Evidence, view: ConversationView, qvec: np.ndarray | None) -> list[AnswerLine]:
    """The lines of one selected unit, in the order the context shows them."""
    if unit.kind == "record":
        pos = view.record_pos.get(unit.id)
        return [_record_line(unit, _cosine(view, "record", pos, qvec) if pos is not None else 0.0)]
    base = AnswerLine(text="", unit=unit.rank, relevance=unit.score, meaning=0.0, status=unit.status)
    passage = view.passage_pos.get(unit.id) if unit.kind == "passage" else None
    passage_turn = view.passage_turn(passage) if passage is not None else None
    out = []
    for tid in unit.turn_ids:
        tp = view.turn_pos.get(tid)
        if tp is None:
            continue
        if passage is not None and tp == passage_turn:
            text, meaning = view.passages.text[passage], _cosine(view, "passage", passage, qvec)
        else:
            text, meaning = view.turn_text[tp], _cosine(view, "turn", tp, qvec)
        day = _day(view.turn_session_date[tp])
        out.append(replace(base, text=text, meaning=meaning, speaker=view.turn_speaker[tp], day=day, session_day=day))
    return out


def answer_lines(evidence: Sequence[Evidence], views: Mapping[str, ConversationView],
                 qvec: np.ndarray | None) -> list[AnswerLine]:
    """Every line of the selected evidence, unit by unit in selection order."""
    out: list[AnswerLine] = []
    for unit in sorted(evidence, key=lambda e: e.rank):
        view = views.get(unit.conversation_id)
        if view is not None:
            out.extend(lines_of(unit, view, qvec))
    return out


def text_lines(evidence: Sequence[Evidence]) -> list[AnswerLine]:
    """The lines of the evidence read from its texts alone (no view: meaning unknown, 0): a record's
    text, and each ``Speaker: content`` line of a window or passage unit."""
    out: list[AnswerLine] = []
    for unit in sorted(evidence, key=lambda e: e.rank):
        if unit.kind == "record":
            out.append(_record_line(unit, 0.0))
            continue
        day = _day(unit.session_date)
        base = AnswerLine(text="", unit=unit.rank, relevance=unit.score, meaning=0.0, day=day, session_day=day,
                          status=unit.status)
        for row in unit.text.split("\n"):
            speaker, sep, content = row.partition(": ")
            out.append(replace(base, text=content if sep else row, speaker=speaker if sep else None))
    return out


__all__ = ["AnswerLine", "answer_lines", "lines_of", "text_lines"]
