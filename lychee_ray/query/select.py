"""Budgeted diversity selection over the wide fused pool (DESIGN §1 step 6).

:func:`select_evidence` runs the configured kind of units (``query.select.units``):

- ``turns`` (default, :mod:`~lychee_ray.query.select_turns`): turn-centred units — a record's
  relevance lifts the turns it came from, a turn is shown whole when it fits, records are shown as
  notes under their turn when they add something (a resolved date or name) or stand in for a turn
  too long to show;
- ``items`` (:func:`select_items`, the earlier selection, kept as an ablation): records and raw-turn
  windows compete as units.

Both are greedy MMR: at each step the candidate with the best ``λ·gain − (1−λ)·max_sim(selected)``
whose serialised evidence still fits the token budget is taken (gain = fused or reranked
relevance scaled to [0, 1], times ``(median cost / cost) ** cost_exponent``; similarity = cosine of
the item vectors). Selection runs over the whole fused pool, not a top-k cut of it, and stops when
nothing more fits. The budget counts the serialised evidence (:mod:`~lychee_ray.query.evidence`)
with the offline tokenizer and is never exceeded.

A raw turn is shown as a window of ``turn_window`` neighbouring turns on each side within its
session and (``window_within_segment``) its segment. No duplicate evidence: a record is shown once
(and a record whose text equals a shown record's is skipped); a turn is shown at most once (a
window is trimmed to the turns not yet shown, keeping the contiguous run around its centre). The
record/turn redundancy rules are in :mod:`~lychee_ray.query.windows`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lychee_ray.config import SelectConfig
from lychee_ray.query.evidence import Dropped, Evidence, Selection, fmt_day, turn_line_tokens
from lychee_ray.query.fuse import FusedItem
from lychee_ray.query.mmr import Placed, greedy_mmr
from lychee_ray.query.view import ConversationView
from lychee_ray.query.select_turns import select_turn_units
from lychee_ray.query.windows import (
    Shown,
    added_tokens,
    build_unit,
    cost_aware_gain,
    finish,
    full_window,
    mark_shown,
    norm_text,
    passage_is_shown,
    passage_tokens,
    record_is_redundant,
    record_tokens,
    scaled,
    turn_is_redundant,
    turn_window,
    window_tokens,
)
from lychee_ray.text.tokens import DEFAULT_ENCODING


def select_evidence(
    pool: Sequence[FusedItem],
    relevance: Sequence[float] | np.ndarray,
    views: dict[str, ConversationView],
    budget_tokens: int,
    cfg: SelectConfig,
    encoding: str = DEFAULT_ENCODING,
) -> Selection:
    """Budgeted MMR selection of the configured units (``cfg.units``) over ``pool``."""
    select = select_turn_units if cfg.units == "turns" else select_items
    return select(pool, relevance, views, budget_tokens, cfg, encoding)


def select_items(
    pool: Sequence[FusedItem],
    relevance: Sequence[float] | np.ndarray,
    views: dict[str, ConversationView],
    budget_tokens: int,
    cfg: SelectConfig,
    encoding: str = DEFAULT_ENCODING,
) -> Selection:
    """``units = items``: greedy budgeted MMR over the pool's records and raw-turn windows."""
    n = len(pool)
    skipped = {"duplicate": 0, "redundant": 0, "budget": 0}
    if n == 0 or budget_tokens <= 0:
        return Selection([], "", 0, budget_tokens, n, skipped)
    show_conv = len({it.key.conversation_id for it in pool}) > 1
    pos = np.empty(n, dtype=np.int64)
    vecs = np.zeros((n, next(iter(views.values())).dim), dtype=np.float32)
    for i, it in enumerate(pool):
        v = views[it.key.conversation_id]
        p = (v.record_pos[it.key.id] if it.key.kind == "record" else v.passage_pos[it.key.id]
             if it.key.kind == "passage" else v.turn_pos[it.key.id])
        pos[i] = p
        vecs[i] = v.vector(it.key.kind, p)
    rel = scaled(relevance)
    # what each item would cover and cost if picked now (windows untrimmed): for the cost-aware
    # gain and the source-overlap penalty
    item_turns: list[tuple[str, list[int]]] = []
    cost0 = np.empty(n, dtype=np.float64)
    # the least an item can ever cost (a record's line; a window's centre turn): once it exceeds the
    # remaining budget the item can never be picked, so it leaves the pool without being examined
    min_cost = np.empty(n, dtype=np.float64)
    for i, it in enumerate(pool):
        v = views[it.key.conversation_id]
        p = int(pos[i])
        if it.key.kind == "record":
            item_turns.append((it.key.conversation_id, v.record_turns[p]))
            cost0[i] = min_cost[i] = record_tokens(v, p, cfg, encoding)
        elif it.key.kind == "passage":
            item_turns.append((it.key.conversation_id, [v.passage_turn(p)]))
            cost0[i] = min_cost[i] = passage_tokens(v, p, cfg, encoding)
        else:
            win = full_window(v, p, cfg.turn_window, cfg.window_within_segment)
            item_turns.append((it.key.conversation_id, win))
            cost0[i] = window_tokens(v, win, cfg, encoding)
            min_cost[i] = turn_line_tokens(v, p, cfg.show_source_ids, encoding)
    gain = cost_aware_gain(rel, cost0, cfg.cost_exponent)
    by_turn: dict[tuple[str, int], list[int]] = {}
    for i, (cid, tps) in enumerate(item_turns):
        for tp in tps:
            by_turn.setdefault((cid, tp), []).append(i)
    covered: set[tuple[str, int]] = set()
    overlap = np.zeros(n, dtype=np.float64)  # share of an item's turns already covered by the selection
    texts: set[str] = set()  # shown record texts across conversations (a user's scope shows one copy)
    shown: dict[str, Shown] = {cid: Shown(texts=texts) for cid in views}
    chosen: list[Evidence] = []
    dropped: list[Dropped] = []
    groups: set[tuple[str, str | None]] = set()
    remaining = budget_tokens

    def prune(alive: np.ndarray) -> None:
        hopeless = alive & (min_cost > remaining)
        if hopeless.any():
            skipped["budget"] += int(hopeless.sum())
            dropped.extend(Dropped(pool[int(j)].key, int(min_cost[j]), float(rel[j])) for j in np.flatnonzero(hopeless))
            alive &= ~hopeless

    def redundancy(max_sim: np.ndarray) -> np.ndarray:
        return np.maximum(max_sim, cfg.source_overlap_weight * overlap) if cfg.source_overlap_weight > 0 else max_sim

    def place(i: int) -> Placed:
        nonlocal remaining
        it = pool[i]
        cid = it.key.conversation_id
        view = views[cid]
        p = int(pos[i])
        cand = _candidate(it.key.kind, p, view, shown[cid], cfg, encoding, skipped)
        if cand is None:
            return False, False
        positions, tokens, group = cand
        cost = added_tokens(tokens, group, groups, show_conv, encoding)
        if cost > remaining:
            skipped["budget"] += 1
            dropped.append(Dropped(it.key, tokens, float(rel[i])))
            return False, False
        remaining -= cost
        groups.add(group)
        unit = build_unit(it, p, positions, tokens, group, float(rel[i]), view, cfg)
        unit.rank = len(chosen)
        chosen.append(unit)
        mark_shown(unit, view, shown[cid], p)
        new_turns = [(cid, tp) for tp in (positions if unit.kind == "turns" else [view.passage_turn(p)]
                                          if unit.kind == "passage" else view.record_turns[p])]
        touched = {j for key in new_turns if key not in covered for j in by_turn.get(key, ())}
        covered.update(new_turns)
        for j in touched:
            c, tps = item_turns[j]
            overlap[j] = sum((c, tp) in covered for tp in tps) / len(tps) if tps else 0.0
        return True, False

    greedy_mmr(gain, vecs, cfg.mmr_lambda, place, redundancy=redundancy, prune=prune)
    return finish(chosen, budget_tokens, show_conv, encoding, n, skipped, dropped)


def _candidate(kind: str, p: int, view: ConversationView, shown: Shown, cfg: SelectConfig, encoding: str,
               skipped: dict[str, int]) -> tuple[list[int], int, tuple[str, str | None]] | None:
    """(window turn positions or [], tokens, group) of a pool item as it would be shown now, or
    None when it is a duplicate or redundant (counted in ``skipped``). No strings are built here."""
    cid = view.conversation_id
    if kind == "passage":
        if passage_is_shown(view, shown, p):
            skipped["duplicate"] += 1
            return None
        return [], passage_tokens(view, p, cfg, encoding), (cid, fmt_day(view.turn_session_date[view.passage_turn(p)]))
    if kind == "record":
        if p in shown.records or norm_text(view, p) in shown.texts:
            skipped["duplicate"] += 1
            return None
        if record_is_redundant(view, shown, p, cfg.min_novel_terms):
            skipped["redundant"] += 1
            return None
        return [], record_tokens(view, p, cfg, encoding), (cid, fmt_day(view.record_session_date[p]))
    if p in shown.turns:
        skipped["duplicate"] += 1
        return None
    if turn_is_redundant(view, shown, p, cfg.min_novel_terms):
        skipped["redundant"] += 1
        return None
    window = turn_window(view, shown, p, cfg.turn_window, cfg.min_novel_terms, cfg.window_within_segment)
    return window, window_tokens(view, window, cfg, encoding), (cid, fmt_day(view.turn_session_date[p]))


__all__ = ["select_evidence", "select_items"]
