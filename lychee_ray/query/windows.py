"""What both selections share: raw-turn windows, what is already shown, and the record/turn
redundancy rules ("never both unless the later adds something").

Content terms are the stemmed, stop-worded words and numbers of
:func:`~lychee_ray.text.lexical.lexical_terms`:

- a turn with shown records made from it is shown only if it has at least ``min_novel_terms``
  content terms those records lack;
- a record whose source turns are all shown is shown only if it has at least ``min_novel_terms``
  content terms those turns lack (e.g. an absolute date resolved from "yesterday", or a name
  resolved from a pronoun).

A passage of a long turn (query/view_passages.py) is part of its turn: shown once, never beside its
turn shown whole, and its evidence item names the turn as its source.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Callable, Sequence

import numpy as np

from lychee_ray.config import SelectConfig
from lychee_ray.query.evidence import (
    Dropped,
    Evidence,
    Selection,
    group_header,
    header_line_tokens,
    passage_block,
    passage_line_tokens,
    record_block,
    record_line_tokens,
    render,
    rendered_tokens,
    turn_line_tokens,
    turns_block,
)
from lychee_ray.query.fuse import FusedItem
from lychee_ray.query.view import ConversationView

# ------------------------------------------------------------------------------------------------
# raw-turn windows
# ------------------------------------------------------------------------------------------------


def _same_unit(view: ConversationView, a: int, b: int, within_segment: bool) -> bool:
    """Whether turns ``a`` and ``b`` may share a window: same session, and same segment if asked."""
    if view.turn_session[a] != view.turn_session[b]:
        return False
    return not within_segment or view.turn_segment[a] == view.turn_segment[b]


def full_window(view: ConversationView, center: int, width: int, within_segment: bool = False) -> list[int]:
    """The centre turn and up to ``width`` neighbours per side in its session (and segment when
    ``within_segment``), nothing trimmed."""
    lo, hi = center, center
    while lo > 0 and center - lo < width and _same_unit(view, lo - 1, center, within_segment):
        lo -= 1
    while hi < view.num_turns - 1 and hi - center < width and _same_unit(view, hi + 1, center, within_segment):
        hi += 1
    return list(range(lo, hi + 1))


def turn_unit_text(view: ConversationView, positions: Sequence[int]) -> str:
    """A window's turns as ``Speaker: content`` lines (the unit's text)."""
    return "\n".join(f"{view.turn_speaker[p]}: {view.turn_text[p]}" for p in positions)


# ------------------------------------------------------------------------------------------------
# selection
# ------------------------------------------------------------------------------------------------


@dataclass
class Shown:
    """What one conversation's selection shows so far (turn and record positions, record texts)."""

    turns: set[int] = field(default_factory=set)
    records: set[int] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)
    passages: set[int] = field(default_factory=set)


def passage_is_shown(view: ConversationView, shown: Shown, pp: int) -> bool:
    """The passage, or its whole turn, is already shown."""
    return pp in shown.passages or view.passage_turn(pp) in shown.turns


def _novel(terms: frozenset[str], against: list[frozenset[str]]) -> int:
    if not against:
        return len(terms)
    covered = frozenset().union(*against)
    return len(terms - covered)


def turn_is_redundant(view: ConversationView, shown: Shown, tp: int, min_novel: int) -> bool:
    """A turn whose shown records already say all but < ``min_novel`` of its content terms."""
    recs = [r for r in view.turn_records[tp] if r in shown.records]
    if not recs:
        return False
    return _novel(view.turn_terms[tp], [view.record_terms[r] for r in recs]) < min_novel


def record_is_redundant(view: ConversationView, shown: Shown, rp: int, min_novel: int) -> bool:
    """A record whose source turns are all shown and which adds < ``min_novel`` content terms."""
    src = view.record_turns[rp]
    if not src or not all(t in shown.turns for t in src):
        return False
    return _novel(view.record_terms[rp], [view.turn_terms[t] for t in src]) < min_novel


def through_records(view: ConversationView, tp: int, cfg: SelectConfig) -> bool:
    """A turn shown through its records, not as a line: a system prompt (its rules are what memory
    keeps of it; in a user's scope each distinct rule shows once), and tool traffic with
    ``select.tool_turns_as_records``."""
    if not view.turn_records[tp]:
        return False
    return view.is_context_turn(tp) or (cfg.tool_turns_as_records and view.is_tool_traffic(tp))


def turn_window(view: ConversationView, shown: Shown, center: int, width: int, min_novel: int,
                within_segment: bool = False, stop: Callable[[int], bool] | None = None) -> list[int]:
    """The centre turn plus up to ``width`` neighbours per side in its session (and segment when
    ``within_segment``) that are not yet shown and not redundant with shown records (nor ``stop``
    turns); only the contiguous run around the centre is kept."""
    out = [center]
    for step in (-1, 1):
        p = center
        for _ in range(width):
            p += step
            if p < 0 or p >= view.num_turns or not _same_unit(view, p, center, within_segment) or p in shown.turns:
                break
            if stop is not None and stop(p):
                break
            if turn_is_redundant(view, shown, p, min_novel):
                break
            out.append(p)
    return sorted(out)


def norm_text(view: ConversationView, p: int) -> str:
    """A record's text lower-cased with whitespace collapsed (cached): equal texts are duplicates."""
    key = ("norm", p)
    t = view.memo.get(key)
    if t is None:
        t = view.memo[key] = " ".join(view.record_text[p].lower().split())
    return t


def build_unit(it: FusedItem, p: int, window: list[int], tokens: int, group: tuple[str, str | None], rel: float,
                view: ConversationView, cfg: SelectConfig) -> Evidence:
    """The :class:`Evidence` of a pool item shown as a record, as the raw-turn ``window``, or as a
    passage (``p``: its position) within ``window`` (its turn and the neighbours shown with it)."""
    cid = it.key.conversation_id
    if it.key.kind == "passage":
        pc = view.passages
        tp = pc.turn[p]
        start, end = pc.span[p]
        before, after = [q for q in window if q < tp], [q for q in window if q > tp]
        line = f"{view.turn_speaker[tp]}: {pc.text[p]}"
        text = "\n".join(x for x in (turn_unit_text(view, before), line, turn_unit_text(view, after)) if x)
        block = "\n".join(x for x in (turns_block(view, before, cfg.show_source_ids), passage_block(view, p, cfg.show_source_ids),
                                      turns_block(view, after, cfg.show_source_ids)) if x)
        return Evidence(
            key=it.key, kind="passage", conversation_id=cid, id=it.key.id, text=text,
            type="passage", time=None, session_date=view.turn_session_date[tp],
            turn_ids=[view.turn_ids[q] for q in [*before, tp, *after]],
            score=rel, channels=sorted(it.channels), routes=sorted(it.routes),
            block=block, tokens=tokens, order=(min([tp, *before]), 1, pc.part[p]), group=group,
            passage=(pc.part[p] + 1, pc.count[p], start, end),
        )
    if it.key.kind == "record":
        src = view.record_turns[p]
        return Evidence(
            key=it.key, kind="record", conversation_id=cid, id=it.key.id, text=view.record_text[p],
            type=view.record_type[p], time=view.record_time[p], session_date=view.record_session_date[p],
            turn_ids=list(view.record_sources[p]), score=rel, channels=sorted(it.channels), routes=sorted(it.routes),
            block=record_block(view, p, cfg.show_source_ids, cfg.show_record_tags), tokens=tokens, order=(min(src) if src else 1 << 30, 0),
            group=group,
        )
    return Evidence(
        key=it.key, kind="turns", conversation_id=cid, id=it.key.id, text=turn_unit_text(view, window),
        type="turns", time=None, session_date=view.turn_session_date[p], turn_ids=[view.turn_ids[q] for q in window],
        score=rel, channels=sorted(it.channels), routes=sorted(it.routes),
        block=turns_block(view, window, cfg.show_source_ids), tokens=tokens, order=(window[0], 1), group=group,
    )


def mark_shown(unit: Evidence, view: ConversationView, shown: Shown, p: int) -> None:
    """Record that ``unit`` (record position, window around ``p``, or passage position) is shown."""
    if unit.kind == "record":
        shown.records.add(p)
        shown.texts.add(norm_text(view, p))
    elif unit.kind == "passage":
        shown.passages.add(p)
        tp = view.passage_turn(p)  # (the neighbours shown with it are shown whole)
        shown.turns.update(q for q in (view.turn_pos[t] for t in unit.turn_ids) if q != tp)
    else:
        shown.turns.update(view.turn_pos[t] for t in unit.turn_ids)

# ------------------------------------------------------------------------------------------------
# gain and cost (both selections' greedy MMR)
# ------------------------------------------------------------------------------------------------


def scaled(x: Sequence[float] | np.ndarray) -> np.ndarray:
    """``x`` divided by its maximum (all ones when nothing is positive)."""
    a = np.asarray(x, dtype=np.float64)
    top = a.max() if len(a) else 0.0
    return a / top if top > 0 else np.ones(len(a))


def cost_aware_gain(rel: np.ndarray, cost: np.ndarray, exponent: float) -> np.ndarray:
    """Relevance times ``(median cost / cost) ** exponent``, rescaled to [0, 1] (``exponent`` 0: ``rel``)."""
    if exponent <= 0:
        return rel
    return scaled(rel * (np.median(cost) / np.maximum(cost, 1.0)) ** exponent)


def record_tokens(view: ConversationView, rp: int, cfg: SelectConfig, encoding: str) -> int:
    """Tokens of record ``rp``'s line as the context shows it."""
    return record_line_tokens(view, rp, cfg.show_source_ids, encoding, cfg.show_record_tags)


def passage_tokens(view: ConversationView, pp: int, cfg: SelectConfig, encoding: str) -> int:
    """Tokens of a passage's line as the context shows it."""
    return passage_line_tokens(view, pp, cfg.show_source_ids, encoding)


def window_tokens(view: ConversationView, window: Sequence[int], cfg: SelectConfig, encoding: str) -> int:
    """Tokens of a window's turn lines as the context shows them."""
    return sum(turn_line_tokens(view, q, cfg.show_source_ids, encoding) for q in window)


def added_tokens(tokens: int, group: tuple[str, str | None], groups: set[tuple[str, str | None]], show_conv: bool,
                 encoding: str) -> int:
    """Tokens a unit adds to the context: its lines, plus its session header when ``group`` is new."""
    if group in groups:
        return tokens
    return tokens + header_line_tokens(group_header(group[0], group[1], show_conv), encoding)


def finish(chosen: list[Evidence], budget_tokens: int, show_conv: bool, encoding: str, pool: int,
           skipped: dict[str, int], dropped: list[Dropped] | None = None) -> Selection:
    """The chosen units in conversation order, rendered and counted exactly; a header repeated by
    the chronological order could overshoot the budget, then the least relevant units go (added to
    ``dropped``, the candidates the budget refused)."""
    dropped = [] if dropped is None else dropped
    chosen.sort(key=lambda e: (e.conversation_id, e.order))
    tokens = rendered_tokens(chosen, show_conv, encoding)
    while tokens > budget_tokens and chosen:
        worst = min(range(len(chosen)), key=lambda j: chosen[j].score)
        gone = chosen.pop(worst)
        dropped.append(Dropped(gone.key, gone.tokens, gone.score))
        tokens = rendered_tokens(chosen, show_conv, encoding)
    return Selection(chosen, render(chosen, show_conv), tokens, budget_tokens, pool, skipped, dropped)


__all__ = [
    "Shown", "added_tokens", "build_unit", "cost_aware_gain", "finish", "full_window", "mark_shown", "norm_text",
    "passage_is_shown", "passage_tokens", "record_is_redundant", "record_tokens", "scaled", "turn_is_redundant",
    "turn_unit_text", "turn_window", "window_tokens",
]
