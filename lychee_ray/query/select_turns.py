"""Turn-centred evidence units (``query.select.units = turns``).

Records are the method's recall units: self-contained, typed, with names and absolute dates, found
by their own vectors, evidence nodes and time. But a sentence-sized record shown *instead of* a long
turn loses most of what the turn said. So the selection shows turns and uses records three ways:

1. **Records lift their turns.** A candidate turn's relevance is its own fused relevance plus
   ``record_lift`` times that of every pooled record made from it: RRF at the turn level, where
   the record, node and time channels vote for the turns they found through records.
2. **A turn is shown whole when it fits** (``max_turn_tokens`` and the remaining budget), with its
   window of neighbours (``turn_window``), which stops before a turn shown through its records or
   too long to show whole. When it does not fit, its best pooled record stands in for it: a record
   never hides the turn it came from when the budget allows the turn.
3. **Records as notes.** Under a shown turn, up to ``notes_per_turn`` of its records are shown when
   each adds at least ``min_novel_terms`` content terms the turn lacks — typically the absolute date
   of "yesterday" or the name behind "she".

Records with no source turn in the conversation, and records of turns longer than
``max_turn_tokens``, are candidates of their own.

A passage of a long turn (query/view_passages.py) is part of its turn: a passage hit lifts its turn
as the turn's own hit would when the turn is short enough to show (``max_turn_tokens``: shown whole,
or through its records as tool traffic is); of a longer turn the passage is a candidate of its own,
shown as one ``Speaker (part k of n): text`` line with the window of short turns around its turn
(the question a long answer replies to), never beside its turn shown whole. Greedy MMR (``mmr_lambda``) with the cost-aware
gain (``cost_exponent``) picks the candidates; see :mod:`~lychee_ray.query.select`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from collections.abc import Sequence

import numpy as np

from lychee_ray.config import SelectConfig
from lychee_ray.query.evidence import Dropped, Evidence, Selection, fmt_day, turn_line_tokens
from lychee_ray.query.fuse import FusedItem, ItemKey
from lychee_ray.query.hits import ItemKind
from lychee_ray.query.mmr import Placed, greedy_mmr
from lychee_ray.query.view import ConversationView
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
    through_records,
    turn_window,
    window_tokens,
)
from lychee_ray.text.tokens import DEFAULT_ENCODING

NOTE_ORDER = 2  # a note sorts after the window (order sub-key 1) that starts at or before its turn


@dataclass
class _Candidate:
    """A turn (shown whole, or through a stand-in record), a record shown on its own, or a passage of
    a long turn."""

    conversation_id: str
    kind: ItemKind
    pos: int
    score: float = 0.0
    channels: set[str] = field(default_factory=set)
    routes: set[int] = field(default_factory=set)
    first_seen: int = 0
    # record position -> the relevance it lifted this turn by (consumed once the record is shown)
    lifts: dict[int, float] = field(default_factory=dict)

    def absorb(self, it: FusedItem, score: float, record: int | None = None) -> None:
        self.score += score
        self.channels |= it.channels
        self.routes |= it.routes
        if record is not None:
            self.lifts[record] = self.lifts.get(record, 0.0) + score

    def item(self, view: ConversationView) -> FusedItem:
        """The candidate as a pool item (what :func:`build_unit` and the evidence report read)."""
        kid = (view.turn_ids[self.pos] if self.kind == "turn" else view.passages.ids[self.pos] if self.kind == "passage"
               else view.record_ids[self.pos])
        return FusedItem(key=ItemKey(self.conversation_id, self.kind, kid), score=self.score,
                         channels=set(self.channels), routes=set(self.routes), first_seen=self.first_seen)


def _long(view: ConversationView, tp: int, cfg: SelectConfig, encoding: str) -> bool:
    """A turn shown through its records rather than whole: too long, or tool traffic that has
    records (``tool_turns_as_records``)."""
    if through_records(view, tp, cfg):
        return True
    return turn_line_tokens(view, tp, cfg.show_source_ids, encoding) > cfg.max_turn_tokens


def _not_a_neighbour(view: ConversationView, tp: int, cfg: SelectConfig, encoding: str) -> bool:
    """Where a window stops: a turn shown through its records (``through_records``), or one too long
    to show whole (``max_turn_tokens``: its records or passages stand for it)."""
    return through_records(view, tp, cfg) or turn_line_tokens(view, tp, cfg.show_source_ids, encoding) > cfg.max_turn_tokens


def _candidates(pool: Sequence[FusedItem], rel: np.ndarray, views: dict[str, ConversationView], cfg: SelectConfig,
                encoding: str) -> tuple[list[_Candidate], dict[tuple[str, int], list[int]]]:
    """Turn and record candidates from the fused pool, and each turn's pooled records (best first)."""
    cands: dict[tuple[str, str, int], _Candidate] = {}
    pooled_records: dict[tuple[str, int], list[int]] = {}

    def add(cid: str, kind: ItemKind, p: int, it: FusedItem, score: float, record: int | None = None) -> None:
        c = cands.get((cid, kind, p))
        if c is None:
            c = cands[(cid, kind, p)] = _Candidate(cid, kind, p, first_seen=len(cands))
        c.absorb(it, score, record)

    for i, it in enumerate(pool):
        cid = it.key.conversation_id
        v = views[cid]
        if it.key.kind == "turn":
            add(cid, "turn", v.turn_pos[it.key.id], it, float(rel[i]))
            continue
        if it.key.kind == "passage":
            pp = v.passage_pos[it.key.id]
            tp = v.passage_turn(pp)
            if turn_line_tokens(v, tp, cfg.show_source_ids, encoding) <= cfg.max_turn_tokens:
                add(cid, "turn", tp, it, float(rel[i]))  # the turn fits: shown as its own hit would be
            else:
                add(cid, "passage", pp, it, float(rel[i]))
            continue
        rp = v.record_pos[it.key.id]
        src = v.record_turns[rp]
        # turns a record lifts: those that can be shown whole, and tool traffic / system prompts,
        # which are shown through their records (the turn then collects its records' relevance as
        # any turn does, and each pick shows its next best record)
        lifted = [tp for tp in src if not _long(v, tp, cfg, encoding) or through_records(v, tp, cfg)]
        for tp in src:
            pooled_records.setdefault((cid, tp), []).append(rp)
        if cfg.record_lift > 0:
            for tp in lifted:
                add(cid, "turn", tp, it, cfg.record_lift * float(rel[i]), rp)
        if len(lifted) < len(src) or not src or cfg.record_lift == 0:
            add(cid, "record", rp, it, float(rel[i]))
    return list(cands.values()), pooled_records


def select_turn_units(
    pool: Sequence[FusedItem],
    relevance: Sequence[float] | np.ndarray,
    views: dict[str, ConversationView],
    budget_tokens: int,
    cfg: SelectConfig,
    encoding: str = DEFAULT_ENCODING,
) -> Selection:
    """Turn-centred budgeted MMR over ``pool`` (see the module docstring)."""
    skipped = {"duplicate": 0, "redundant": 0, "budget": 0}
    if not pool or budget_tokens <= 0:
        return Selection([], "", 0, budget_tokens, len(pool), skipped)
    show_conv = len({it.key.conversation_id for it in pool}) > 1
    cands, pooled_records = _candidates(pool, scaled(relevance), views, cfg, encoding)
    n = len(cands)
    score = scaled([c.score for c in cands])
    vecs = np.zeros((n, next(iter(views.values())).dim), dtype=np.float32)
    cost0 = np.empty(n, dtype=np.float64)
    for i, c in enumerate(cands):
        v = views[c.conversation_id]
        vecs[i] = v.vector(c.kind, c.pos)
        if c.kind == "record":
            cost0[i] = record_tokens(v, c.pos, cfg, encoding)
        elif c.kind == "passage":
            cost0[i] = passage_tokens(v, c.pos, cfg, encoding)
        else:
            cost0[i] = window_tokens(v, full_window(v, c.pos, cfg.turn_window, cfg.window_within_segment), cfg, encoding)
    gain = cost_aware_gain(score, cost0, cfg.cost_exponent)
    turn_score = {(c.conversation_id, c.pos): float(score[i]) for i, c in enumerate(cands) if c.kind == "turn"}
    picker = _Picker(views, cfg, encoding, budget_tokens, show_conv, pooled_records, turn_score, skipped)
    # a turn shown through its records (tool traffic, a system prompt), picked again, ranks by the
    # records it has left: once shown, a record's lift is spent on every such turn it lifted
    lifted_by: dict[tuple[str, int], list[int]] = {}
    for j, c in enumerate(cands):
        if c.kind == "turn" and through_records(views[c.conversation_id], c.pos, cfg):
            for rp in c.lifts:
                lifted_by.setdefault((c.conversation_id, rp), []).append(j)
    raw = np.asarray([c.score for c in cands], dtype=np.float64)

    def place(i: int) -> Placed:
        shown_before = len(picker.chosen)
        placed, keep = picker.place(cands[i], float(score[i]))
        if placed:
            for unit in picker.chosen[shown_before:]:
                if unit.kind != "record":
                    continue
                rp = views[unit.conversation_id].record_pos[unit.id]
                for j in lifted_by.get((unit.conversation_id, rp), ()):
                    spent = cands[j].lifts.pop(rp, 0.0)
                    if spent and raw[j] > 0:
                        left = max(0.0, raw[j] - spent)
                        gain[j] *= left / raw[j]
                        score[j] *= left / raw[j]
                        raw[j] = left
        return placed, keep

    greedy_mmr(gain, vecs, cfg.mmr_lambda, place, stop=lambda: picker.remaining <= 0)
    return finish(picker.chosen, budget_tokens, show_conv, encoding, len(pool), skipped, picker.dropped)


class _Picker:
    """Places picked candidates as evidence units within the remaining budget."""

    def __init__(self, views: dict[str, ConversationView], cfg: SelectConfig, encoding: str, budget: int,
                 show_conv: bool, pooled_records: dict[tuple[str, int], list[int]],
                 turn_score: dict[tuple[str, int], float], skipped: dict[str, int]) -> None:
        self.views = views
        self.cfg = cfg
        self.encoding = encoding
        self.remaining = budget
        self.show_conv = show_conv
        self.pooled_records = pooled_records
        self.turn_score = turn_score  # normalised relevance of every candidate turn
        self.skipped = skipped
        # one set of shown record texts across conversations: in a user's scope the same record text
        # (a system prompt's rule kept by each conversation) is shown once
        texts: set[str] = set()
        self.shown: dict[str, Shown] = {cid: Shown(texts=texts) for cid in views}
        self.groups: set[tuple[str, str | None]] = set()
        self.chosen: list[Evidence] = []
        self.dropped: list[Dropped] = []  # candidates the budget refused (Selection.dropped)

    def _cost(self, tokens: int, group: tuple[str, str | None]) -> int:
        return added_tokens(tokens, group, self.groups, self.show_conv, self.encoding)

    def _add(self, c: _Candidate, p: int, window: list[int], tokens: int, group: tuple[str, str | None],
             score: float, kind: str) -> Evidence:
        view = self.views[c.conversation_id]
        it = c.item(view)
        if kind != c.kind:  # a stand-in record for a turn keeps the turn's provenance
            it = FusedItem(key=ItemKey(c.conversation_id, "record", view.record_ids[p]), score=it.score,
                           channels=it.channels, routes=it.routes, first_seen=it.first_seen)
        self.remaining -= self._cost(tokens, group)
        self.groups.add(group)
        unit = build_unit(it, p, window, tokens, group, score, view, self.cfg)
        unit.rank = len(self.chosen)
        self.chosen.append(unit)
        mark_shown(unit, view, self.shown[c.conversation_id], p)
        return unit

    def _record_fit(self, view: ConversationView, rp: int) -> tuple[int, tuple[str, str | None]] | str:
        """(tokens, group) of record ``rp`` when it may be shown now and fits, else why not
        ("duplicate", "redundant" or "budget": the ``skipped`` counters)."""
        shown = self.shown[view.conversation_id]
        if rp in shown.records or norm_text(view, rp) in shown.texts:
            return "duplicate"
        if record_is_redundant(view, shown, rp, self.cfg.min_novel_terms):
            return "redundant"
        tokens = record_tokens(view, rp, self.cfg, self.encoding)
        group = (view.conversation_id, fmt_day(view.record_session_date[rp]))
        return (tokens, group) if self._cost(tokens, group) <= self.remaining else "budget"

    def _records_of(self, view: ConversationView, tps: Sequence[int]) -> list[int]:
        """Records of turns ``tps``: the pooled ones first (fused order), then the others."""
        cid = view.conversation_id
        out = [rp for tp in tps for rp in self.pooled_records.get((cid, tp), [])]
        out += [rp for tp in tps for rp in view.turn_records[tp]]
        return list(dict.fromkeys(out))

    def place(self, c: _Candidate, score: float) -> tuple[bool, bool]:
        """Show candidate ``c`` if it can be shown now: (placed, stays a candidate)."""
        view = self.views[c.conversation_id]
        shown = self.shown[c.conversation_id]
        cfg = self.cfg
        if c.kind == "record":
            fit = self._record_fit(view, c.pos)
            if isinstance(fit, str):
                self.skipped[fit] += 1
                if fit == "budget":
                    self.dropped.append(Dropped(c.item(view).key, record_tokens(view, c.pos, cfg, self.encoding), score))
                return False, False
            unit = self._add(c, c.pos, [], fit[0], fit[1], score, "record")
            unit.order = (unit.order[0], NOTE_ORDER)
            return True, False
        if c.kind == "passage":
            return self._place_passage(c, score), False
        if c.pos in shown.turns:
            self.skipped["duplicate"] += 1
            return False, False
        group = (c.conversation_id, fmt_day(view.turn_session_date[c.pos]))
        if not _long(view, c.pos, cfg, self.encoding) or not view.turn_records[c.pos]:
            window = turn_window(view, shown, c.pos, cfg.turn_window, cfg.min_novel_terms, cfg.window_within_segment,
                                 stop=lambda p: _not_a_neighbour(view, p, cfg, self.encoding))
            for win in (window, [c.pos]):  # the window, else the turn alone
                tokens = window_tokens(view, win, cfg, self.encoding)
                if self._cost(tokens, group) <= self.remaining:
                    # a window is as relevant as the best candidate turn it shows
                    score = max([score, *(self.turn_score.get((c.conversation_id, q), 0.0) for q in win)])
                    unit = self._add(c, c.pos, win, tokens, group, score, "turn")
                    self._notes(view, unit, score)
                    return True, False
        # the turn cannot be shown whole: its best record that fits stands in for it (the turn may
        # be picked again for its next record)
        for rp in self._records_of(view, [c.pos]):
            fit = self._record_fit(view, rp)
            if not isinstance(fit, str):
                unit = self._add(c, rp, [], fit[0], fit[1], score, "record")
                unit.order = (unit.order[0], NOTE_ORDER)
                return True, True
        self.skipped["budget"] += 1
        self.dropped.append(Dropped(c.item(view).key, turn_line_tokens(view, c.pos, cfg.show_source_ids, self.encoding),
                                    score))
        return False, False

    def _place_passage(self, c: _Candidate, score: float) -> bool:
        """Show passage candidate ``c`` with the short turns around its turn (a window, as a turn's:
        the question a long answer replies to), else alone; unless it (or its turn) is shown or it
        does not fit."""
        view, cfg = self.views[c.conversation_id], self.cfg
        shown = self.shown[c.conversation_id]
        if passage_is_shown(view, shown, c.pos):
            self.skipped["duplicate"] += 1
            return False
        tp = view.passage_turn(c.pos)
        window = turn_window(view, shown, tp, cfg.turn_window, cfg.min_novel_terms, cfg.window_within_segment,
                             stop=lambda p: _not_a_neighbour(view, p, cfg, self.encoding))
        group = (c.conversation_id, fmt_day(view.turn_session_date[tp]))
        own = passage_tokens(view, c.pos, cfg, self.encoding)
        for win in (window, [tp]):  # with its neighbours, else alone
            tokens = own + window_tokens(view, [q for q in win if q != tp], cfg, self.encoding)
            if self._cost(tokens, group) <= self.remaining:
                self._add(c, c.pos, win, tokens, group, score, "passage")
                return True
        self.skipped["budget"] += 1
        return False

    def _notes(self, view: ConversationView, unit: Evidence, score: float) -> None:
        """Under each turn of a shown window, up to ``notes_per_turn`` of its records that add what
        the turns lack (pooled records first)."""
        if self.cfg.notes_per_turn <= 0:
            return
        for tp in (view.turn_pos[t] for t in unit.turn_ids):
            added = 0
            for rp in self._records_of(view, [tp]):
                if added >= self.cfg.notes_per_turn:
                    break
                fit = self._record_fit(view, rp)
                if isinstance(fit, str):
                    continue
                note = _Candidate(view.conversation_id, "record", rp)
                note.channels, note.routes = set(unit.channels), set(unit.routes)
                ev = self._add(note, rp, [], fit[0], fit[1], score, "record")
                ev.order = (ev.order[0], NOTE_ORDER)
                added += 1


__all__ = ["select_turn_units"]
