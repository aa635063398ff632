"""Why a search selected what it did: each channel's rank, the fused score and what the budget dropped.

A search asked to explain itself (``QueryEngine.search(..., explain=True)``, ``"explain": true`` in a
``POST /v1/search`` body, the inspector's search playground) returns a :class:`SearchExplain` next to
its evidence: every item of the fused pool with its best rank in each recall channel, its RRF score
and what became of it (shown by which evidence unit, refused for the budget, or not selected), the
same figures per evidence unit, and the candidates the token budget refused with the tokens they
needed. Nothing here changes what is selected; a search without ``explain`` builds none of it.
"""

from __future__ import annotations

from typing import Literal
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field

from lychee_ray.query.evidence import Selection, one_line, passage_block
from lychee_ray.query.fuse import FusedItem, ItemKey
from lychee_ray.query.hits import ItemKind
from lychee_ray.query.view import ConversationView

PoolOutcome = Literal["selected", "budget", "not_selected"]


class PoolItem(BaseModel):
    """One item of the fused pool and what became of it."""

    model_config = ConfigDict(extra="forbid")

    position: int = Field(description="1 = first in the fused pool (reranked order when the reranker ran)")
    kind: ItemKind
    id: str
    conversation_id: str
    fused_score: float = Field(description="the item's RRF score over every channel and route")
    ranks: dict[str, int] = Field(description="channel -> the item's best (lowest) rank in it, from 1")
    routes: list[int]
    outcome: PoolOutcome = Field(description="selected: shown by an evidence unit (shown_by); budget: refused for "
                                             "the token budget; not_selected: left out (redundant, a duplicate, or "
                                             "not reached before the budget was spent)")
    shown_by: str | None = Field(default=None, description="the id of the evidence unit that shows it")
    tokens: int | None = Field(default=None, description="budget: the tokens it needed")
    text: str = Field(description="the record's text, or the turn as 'speaker: text'")


class EvidenceRanks(BaseModel):
    """The pool figures behind one selected evidence unit (same order as the result's evidence)."""

    model_config = ConfigDict(extra="forbid")

    id: str
    kind: str
    fused_score: float = Field(description="the best RRF score among the pool items the unit shows")
    ranks: dict[str, int] = Field(description="channel -> the best rank among the pool items the unit shows")
    pool_positions: list[int] = Field(description="positions of those pool items")


class DroppedItem(BaseModel):
    """A candidate the token budget refused."""

    model_config = ConfigDict(extra="forbid")

    kind: ItemKind
    id: str
    conversation_id: str
    tokens: int = Field(description="the tokens it needed (the turn alone, or the record's line)")
    score: float = Field(description="its relevance in the selection, in [0, 1]")
    text: str


class SearchExplain(BaseModel):
    """A search's pool, per-channel ranks and budget drops (opt-in: ``explain``)."""

    model_config = ConfigDict(extra="forbid")

    channels: list[str] = Field(description="the recall channels, in the order they run")
    pool: list[PoolItem]
    evidence: list[EvidenceRanks]
    dropped: list[DroppedItem] = Field(description="refused for the budget, most relevant first")
    skipped: dict[str, int] = Field(description="candidates left out, by reason (duplicate, redundant, budget)")
    remaining_tokens: int = Field(description="budget left after the selection")


def _text(view: ConversationView, key: ItemKey) -> str:
    if key.kind == "record":
        return one_line(view.record_text[view.record_pos[key.id]])
    if key.kind == "passage":
        return one_line(passage_block(view, view.passage_pos[key.id], False))
    p = view.turn_pos[key.id]
    return f"{one_line(view.turn_speaker[p])}: {one_line(view.turn_text[p])}"


def _shown_by(sel: Selection, views: dict[str, ConversationView]) -> dict[ItemKey, str]:
    """Which evidence unit shows each record and turn: its own unit, else the unit that shows it
    through a source turn (a record whose turn is shown) or a stand-in record (a turn shown by it)."""
    out: dict[ItemKey, str] = {}
    for e in sel.evidence:
        if e.kind == "record":
            out.setdefault(ItemKey(e.conversation_id, "record", e.id), e.id)
        elif e.kind == "passage":
            out.setdefault(ItemKey(e.conversation_id, "passage", e.id), e.id)
        else:
            for t in e.turn_ids:
                out.setdefault(ItemKey(e.conversation_id, "turn", t), e.id)
    for e in sel.evidence:  # second: shown through another item
        v = views[e.conversation_id]
        if e.kind in ("record", "passage"):  # a passage's window shows the short turns around it
            for t in e.turn_ids:
                out.setdefault(ItemKey(e.conversation_id, "turn", t), e.id)
        if e.kind != "record":
            for t in e.turn_ids:
                p = v.turn_pos.get(t)
                for rp in v.turn_records[p] if p is not None else ():
                    out.setdefault(ItemKey(e.conversation_id, "record", v.record_ids[rp]), e.id)
    return out


def explain_search(pool: Sequence[FusedItem], sel: Selection, views: dict[str, ConversationView],
                   channels: Sequence[str]) -> SearchExplain:
    """The explanation of one search from its fused ``pool`` (as selection saw it) and ``sel``."""
    shown = _shown_by(sel, views)
    dropped: dict[ItemKey, DroppedItem] = {}
    for d in sorted(sel.dropped, key=lambda d: -d.score):
        if d.key not in dropped and d.key not in shown:
            dropped[d.key] = DroppedItem(kind=d.key.kind, id=d.key.id, conversation_id=d.key.conversation_id,
                                         tokens=d.tokens, score=round(d.score, 6),
                                         text=_text(views[d.key.conversation_id], d.key))
    items: list[PoolItem] = []
    by_unit: dict[str, list[PoolItem]] = {}
    for i, it in enumerate(pool, start=1):
        unit = shown.get(it.key)
        drop = dropped.get(it.key)
        outcome: PoolOutcome = "selected" if unit is not None else "budget" if drop is not None else "not_selected"
        item = PoolItem(position=i, kind=it.key.kind, id=it.key.id, conversation_id=it.key.conversation_id,
                        fused_score=round(it.score, 6), ranks=dict(sorted(it.ranks.items())), routes=sorted(it.routes),
                        outcome=outcome, shown_by=unit, tokens=drop.tokens if drop is not None else None,
                        text=_text(views[it.key.conversation_id], it.key))
        items.append(item)
        if unit is not None:
            by_unit.setdefault(unit, []).append(item)
    ev = []
    for e in sel.evidence:
        mine = by_unit.get(e.id, [])
        ranks: dict[str, int] = {}
        for item in mine:
            for ch, r in item.ranks.items():
                ranks[ch] = min(r, ranks.get(ch, r))
        ev.append(EvidenceRanks(id=e.id, kind=e.kind, fused_score=max((m.fused_score for m in mine), default=0.0),
                                ranks=dict(sorted(ranks.items())), pool_positions=[m.position for m in mine]))
    return SearchExplain(channels=list(channels), pool=items, evidence=ev, dropped=list(dropped.values()),
                         skipped=dict(sel.skipped), remaining_tokens=max(0, sel.budget - sel.tokens))


__all__ = ["DroppedItem", "EvidenceRanks", "PoolItem", "PoolOutcome", "SearchExplain", "explain_search"]
