"""Budgeted diversity selection over the wide fused pool (DESIGN §1 step 6).

Greedy MMR: at each step the pool item with the best ``λ·relevance − (1−λ)·max_sim(selected)``
whose serialised evidence still fits the token budget is taken (relevance = fused or reranked score
scaled to [0, 1]; similarity = cosine of the item vectors). Selection runs over the whole fused
pool, not a top-k cut of it, and stops when nothing more fits. The budget counts the serialised
evidence with the offline tokenizer and is never exceeded.

The units are serialised by :mod:`~lychee_ray.query.evidence` (what the answer prompt shows and the
budget counts); a raw turn is shown as a window of ``turn_window`` neighbouring turns on each
side within its session and (``window_within_segment``) its segment.

No duplicate evidence: a record is shown once (and a record whose text equals a shown record's is
skipped); a turn is shown at most once (a window is trimmed to the turns not yet shown, keeping the
contiguous run around its centre; a candidate whose centre is already shown is skipped).

Record vs raw-turn rule ("never both unless the turns add something"): content terms are the
stemmed, stop-worded words and numbers of :func:`~lychee_ray.query.lexical.lexical_terms`.

- A turn with shown records made from it is shown only if it has at least ``min_novel_terms``
  content terms those records lack (otherwise a window drops it; a candidate centred on it is
  skipped).
- A record whose source turns are all shown is selected only if it has at least
  ``min_novel_terms`` content terms those turns lack (e.g. an absolute date resolved from
  "yesterday", or a name resolved from a pronoun).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Sequence

import numpy as np

from lychee_ray.config import SelectConfig
from lychee_ray.query.evidence import (
    Evidence,
    Selection,
    fmt_day,
    group_header,
    header_line_tokens,
    record_block,
    record_line_tokens,
    render,
    rendered_tokens,
    turn_line_tokens,
    turns_block,
)
from lychee_ray.query.fuse import FusedItem
from lychee_ray.query.recall import ConversationView
from lychee_ray.text.tokens import DEFAULT_ENCODING

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
class _Shown:
    turns: set[int] = field(default_factory=set)
    records: set[int] = field(default_factory=set)
    texts: set[str] = field(default_factory=set)


def _novel(terms: frozenset[str], against: list[frozenset[str]]) -> int:
    if not against:
        return len(terms)
    covered = frozenset().union(*against)
    return len(terms - covered)


def turn_is_redundant(view: ConversationView, shown: _Shown, tp: int, min_novel: int) -> bool:
    """A turn whose shown records already say all but < ``min_novel`` of its content terms."""
    recs = [r for r in view.turn_records[tp] if r in shown.records]
    if not recs:
        return False
    return _novel(view.turn_terms[tp], [view.record_terms[r] for r in recs]) < min_novel


def record_is_redundant(view: ConversationView, shown: _Shown, rp: int, min_novel: int) -> bool:
    """A record whose source turns are all shown and which adds < ``min_novel`` content terms."""
    src = view.record_turns[rp]
    if not src or not all(t in shown.turns for t in src):
        return False
    return _novel(view.record_terms[rp], [view.turn_terms[t] for t in src]) < min_novel


def turn_window(view: ConversationView, shown: _Shown, center: int, width: int, min_novel: int,
                within_segment: bool = False) -> list[int]:
    """The centre turn plus up to ``width`` neighbours per side in its session (and segment when
    ``within_segment``) that are not yet shown and not redundant with shown records; only the
    contiguous run around the centre is kept."""
    out = [center]
    for step in (-1, 1):
        p = center
        for _ in range(width):
            p += step
            if p < 0 or p >= view.num_turns or not _same_unit(view, p, center, within_segment) or p in shown.turns:
                break
            if turn_is_redundant(view, shown, p, min_novel):
                break
            out.append(p)
    return sorted(out)


def select_evidence(
    pool: Sequence[FusedItem],
    relevance: Sequence[float] | np.ndarray,
    views: dict[str, ConversationView],
    budget_tokens: int,
    cfg: SelectConfig,
    encoding: str = DEFAULT_ENCODING,
) -> Selection:
    """Greedy budgeted MMR over ``pool`` (see the module docstring for the rules)."""
    n = len(pool)
    skipped = {"duplicate": 0, "redundant": 0, "budget": 0}
    if n == 0 or budget_tokens <= 0:
        return Selection([], "", 0, budget_tokens, n, skipped)
    show_conv = len({it.key.conversation_id for it in pool}) > 1
    pos = np.empty(n, dtype=np.int64)
    vecs = np.zeros((n, next(iter(views.values())).dim), dtype=np.float32)
    for i, it in enumerate(pool):
        v = views[it.key.conversation_id]
        p = v.record_pos[it.key.id] if it.key.kind == "record" else v.turn_pos[it.key.id]
        pos[i] = p
        vecs[i] = v.vector(it.key.kind, p)
    rel = np.asarray(relevance, dtype=np.float64)
    top = rel.max() if len(rel) else 0.0
    rel = rel / top if top > 0 else np.ones(n)
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
            cost0[i] = min_cost[i] = record_line_tokens(v, p, cfg.show_source_ids, encoding)
        else:
            win = full_window(v, p, cfg.turn_window, cfg.window_within_segment)
            item_turns.append((it.key.conversation_id, win))
            cost0[i] = sum(turn_line_tokens(v, q, cfg.show_source_ids, encoding) for q in win)
            min_cost[i] = turn_line_tokens(v, p, cfg.show_source_ids, encoding)
    gain = rel
    if cfg.cost_exponent > 0:
        gain = rel * (np.median(cost0) / np.maximum(cost0, 1.0)) ** cfg.cost_exponent
        gain = gain / gain.max()
    by_turn: dict[tuple[str, int], list[int]] = {}
    for i, (cid, tps) in enumerate(item_turns):
        for tp in tps:
            by_turn.setdefault((cid, tp), []).append(i)
    covered: set[tuple[str, int]] = set()
    overlap = np.zeros(n, dtype=np.float64)  # share of an item's turns already covered by the selection
    lam = cfg.mmr_lambda
    max_sim = np.zeros(n, dtype=np.float64)
    alive = np.ones(n, dtype=bool)
    shown: dict[str, _Shown] = {cid: _Shown() for cid in views}
    chosen: list[Evidence] = []
    groups: set[tuple[str, str | None]] = set()
    remaining = budget_tokens
    while True:
        hopeless = alive & (min_cost > remaining)
        if hopeless.any():
            skipped["budget"] += int(hopeless.sum())
            alive &= ~hopeless
        redundancy = np.maximum(max_sim, cfg.source_overlap_weight * overlap) if cfg.source_overlap_weight > 0 else max_sim
        mmr = lam * gain - (1 - lam) * redundancy
        mmr[~alive] = -np.inf
        picked = False
        while True:  # best candidate first; rejected ones leave the pool for good
            i = int(np.argmax(mmr))
            if mmr[i] == -np.inf:
                break
            alive[i] = False
            mmr[i] = -np.inf
            it = pool[i]
            cid = it.key.conversation_id
            view = views[cid]
            p = int(pos[i])
            cand = _candidate(it.key.kind, p, view, shown[cid], cfg, encoding, skipped)
            if cand is None:
                continue
            positions, tokens, group = cand
            # its lines (each with its newline), plus its session header when that group is new
            cost = tokens
            if group not in groups:
                cost += header_line_tokens(group_header(group[0], group[1], show_conv), encoding)
            if cost > remaining:
                skipped["budget"] += 1
                continue
            remaining -= cost
            groups.add(group)
            unit = _build_unit(it, p, positions, tokens, group, float(rel[i]), view, cfg)
            unit.rank = len(chosen)
            chosen.append(unit)
            _mark_shown(unit, view, shown[cid], p)
            max_sim = np.maximum(max_sim, vecs @ vecs[i])
            new_turns = [(cid, tp) for tp in (positions if unit.kind == "turns" else view.record_turns[p])]
            touched = {j for key in new_turns if key not in covered for j in by_turn.get(key, ())}
            covered.update(new_turns)
            for j in touched:
                c, tps = item_turns[j]
                overlap[j] = sum((c, tp) in covered for tp in tps) / len(tps) if tps else 0.0
            picked = True
            break
        if not picked:
            break
    chosen.sort(key=lambda e: (e.conversation_id, e.order))
    tokens = rendered_tokens(chosen, show_conv, encoding)
    while tokens > budget_tokens and chosen:  # a header repeated by the chronological order could overshoot
        worst = min(range(len(chosen)), key=lambda j: chosen[j].score)
        chosen.pop(worst)
        tokens = rendered_tokens(chosen, show_conv, encoding)
    return Selection(chosen, render(chosen, show_conv), tokens, budget_tokens, n, skipped)


def _norm_text(view: ConversationView, p: int) -> str:
    key = ("norm", p)
    t = view.memo.get(key)
    if t is None:
        t = view.memo[key] = " ".join(view.record_text[p].lower().split())
    return t


def _candidate(kind: str, p: int, view: ConversationView, shown: _Shown, cfg: SelectConfig, encoding: str,
               skipped: dict[str, int]) -> tuple[list[int], int, tuple[str, str | None]] | None:
    """(window turn positions or [], tokens, group) of a pool item as it would be shown now, or
    None when it is a duplicate or redundant (counted in ``skipped``). No strings are built here."""
    cid = view.conversation_id
    if kind == "record":
        if p in shown.records or _norm_text(view, p) in shown.texts:
            skipped["duplicate"] += 1
            return None
        if record_is_redundant(view, shown, p, cfg.min_novel_terms):
            skipped["redundant"] += 1
            return None
        return [], record_line_tokens(view, p, cfg.show_source_ids, encoding), (cid, fmt_day(view.record_session_date[p]))
    if p in shown.turns:
        skipped["duplicate"] += 1
        return None
    if turn_is_redundant(view, shown, p, cfg.min_novel_terms):
        skipped["redundant"] += 1
        return None
    window = turn_window(view, shown, p, cfg.turn_window, cfg.min_novel_terms, cfg.window_within_segment)
    tokens = sum(turn_line_tokens(view, q, cfg.show_source_ids, encoding) for q in window)
    return window, tokens, (cid, fmt_day(view.turn_session_date[p]))


def _build_unit(it: FusedItem, p: int, window: list[int], tokens: int, group: tuple[str, str | None], rel: float,
                view: ConversationView, cfg: SelectConfig) -> Evidence:
    cid = it.key.conversation_id
    if it.key.kind == "record":
        src = view.record_turns[p]
        return Evidence(
            key=it.key, kind="record", conversation_id=cid, id=it.key.id, text=view.record_text[p],
            type=view.record_type[p], time=view.record_time[p], session_date=view.record_session_date[p],
            turn_ids=list(view.record_sources[p]), score=rel, channels=sorted(it.channels), routes=sorted(it.routes),
            block=record_block(view, p, cfg.show_source_ids), tokens=tokens, order=(min(src) if src else 1 << 30, 0),
            group=group,
        )
    return Evidence(
        key=it.key, kind="turns", conversation_id=cid, id=it.key.id, text=turn_unit_text(view, window),
        type="turns", time=None, session_date=view.turn_session_date[p], turn_ids=[view.turn_ids[q] for q in window],
        score=rel, channels=sorted(it.channels), routes=sorted(it.routes),
        block=turns_block(view, window, cfg.show_source_ids), tokens=tokens, order=(window[0], 1), group=group,
    )


def _mark_shown(unit: Evidence, view: ConversationView, shown: _Shown, p: int) -> None:
    if unit.kind == "record":
        shown.records.add(p)
        shown.texts.add(_norm_text(view, p))
    else:
        shown.turns.update(view.turn_pos[t] for t in unit.turn_ids)


__all__ = ["full_window", "record_is_redundant", "select_evidence", "turn_is_redundant", "turn_unit_text", "turn_window"]
