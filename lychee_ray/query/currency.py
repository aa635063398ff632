"""What holds now, for the query path: record statuses of a scope, marks, and the pool adjustments.

Statuses come from the links stored on newer records (:mod:`lychee_ray.core.currency`): per
conversation once per loaded view (kept in its memo), and in a user's scope also across its
conversations (:func:`~lychee_ray.core.currency.links_across`). The query path uses them three ways:

* **current first** (:func:`adjust_pool`): a pooled superseded record brings the record that holds
  now into the pool with at least its relevance (a conflicting one the records it contradicts), and its own relevance is scaled by
  ``query.current.superseded_weight``; a history question (:attr:`QueryPlan.history`) instead brings
  each pooled record's whole slot chain, unweighted;
* **marks** (:mod:`lychee_ray.query.marks`): a shown item that holds a value no longer current says
  so on its line ("[superseded on 2024-05-15 by: …]"), raw-turn lines that show a replaced value too;
* **evidence fields**: ``status``, ``valid_until``, ``superseded_by`` of each evidence item.

Raw turns have no links; a turn line *shows* a replaced value when it was said before the change
and holds an identifier of a superseded record's text (a flight number, an order code) that the
records replacing it lack, or the value a chat statement's change replaced ("April 1, 2024" of a
sprint deadline moved to April 5) with a word of the slot it changed ("deadline", "sprint": an
unrelated "April 1" is not it) (:attr:`ViewCurrency.replaced`); and it *states* what a record made
from it states (:attr:`ViewCurrency.stated`): the turn a superseded or conflicting record comes from
takes that record's mark.
"""

from __future__ import annotations

from lychee_ray.core.status import CONFLICTING_STATUS, CURRENT_STATUS, SUPERSEDED_STATUS

from dataclasses import dataclass, field
from collections.abc import Sequence

from lychee_ray.core.currency import CURRENT, LinkRow, RecordStatus, SlotRow, derive_status, links_across
from lychee_ray.query.fuse import FusedItem, ItemKey
from lychee_ray.query.view import ConversationView
from lychee_ray.core.statements import statement_parts
from lychee_ray.text.lexical import identifier_terms, lexical_terms
from lychee_ray.text.values import says_value

_MEMO_KEY = "currency"
_FRAME = frozenset(lexical_terms("user assistant said asked now currently"))  # the rules records' own frame words
HISTORY_CHANNEL = "history"  # the channel name of pool items a history question's chains added


@dataclass
class Replaced:
    """A value a superseded record showed and its replacement lacks: a turn said before ``before``
    (turn position of the change) that holds ``token`` shows a replaced value. An identifier
    (``words`` empty) is shown by itself; a plain value ("3 pm", "65%") only with one of ``words``
    (its slot's words) on the same line."""

    token: str
    before: int
    record: int  # the superseded record's position
    words: frozenset[str] = frozenset()
    by: list[str] = field(default_factory=list)  # a replaced statement's: the records that replaced it
    until: str | None = None  # ... and when

    def shown_in(self, text: str, identifiers: set[str], terms: set[str]) -> bool:
        """``text`` (its ``identifier_terms`` and ``lexical_terms``) shows this value."""
        if not self.words:
            return self.token in identifiers
        return bool(self.words & terms) and says_value(text, self.token)


@dataclass
class ViewCurrency:
    """One conversation's statuses (by record position) and slot chains, derived once per view."""

    status: dict[int, RecordStatus] = field(default_factory=dict)
    slots: dict[str, list[int]] = field(default_factory=dict)  # slot -> record positions, stored order
    slot_of: list[str | None] = field(default_factory=list)
    value_of: list[str | None] = field(default_factory=list)
    valid_from: list[str | None] = field(default_factory=list)
    replaced: list[Replaced] = field(default_factory=list)
    statements: list[list[dict]] = field(default_factory=list)  # each record's statements of value, as stored
    # statement id -> positions of the records whose statements replaced it
    replaced_by: dict[str, list[int]] = field(default_factory=dict)
    # turn position -> the records made from it that no longer hold alone (superseded, conflicting)
    stated: dict[int, list[int]] = field(default_factory=dict)

    @property
    def linked(self) -> bool:
        return bool(self.status) or bool(self.slots)


def _column(view: ConversationView, name: str) -> list:
    try:
        return view.record_column(name)
    except KeyError:  # a records table without the column (an in-memory view of an older schema)
        return [None] * view.num_records


def view_currency(view: ConversationView) -> ViewCurrency:
    """The view's :class:`ViewCurrency` (computed on first use, kept in its memo)."""
    vc = view.memo.get(_MEMO_KEY)
    if vc is not None:
        return vc
    n = view.num_records
    slots = [s or None for s in _column(view, "slot")] if n else []
    sup = [list(x or []) for x in _column(view, "supersedes")] if n else []
    con = [list(x or []) for x in _column(view, "conflicts_with")] if n else []
    since = list(_column(view, "valid_from")) if n else []
    values = list(_column(view, "slot_value")) if n else []
    stated = [list(x or []) for x in _column(view, "statements")] if n else []
    vc = ViewCurrency(slot_of=slots, value_of=values, valid_from=since, statements=stated)
    for p, s in enumerate(slots):
        if s:
            vc.slots.setdefault(s, []).append(p)
    for q, sts in enumerate(stated):
        for st in sts:
            for sid in st.get("supersedes") or []:
                vc.replaced_by.setdefault(sid, []).append(q)
    if any(sup) or any(con) or vc.replaced_by:
        rows = [LinkRow(view.record_ids[p], sup[p], con[p], since[p]) for p in range(n)]
        by_id = view.record_pos
        vc.status = {by_id[rid]: st for rid, st in derive_status(rows).items() if rid in by_id}
        vc.replaced = _replaced_tokens(view, vc) + _replaced_values(view, vc)
        for p in sorted(vc.status):
            if vc.status[p].status != CURRENT_STATUS:
                for tp in dict.fromkeys(view.record_turns[p]):
                    vc.stated.setdefault(tp, []).append(p)
    view.memo[_MEMO_KEY] = vc
    return vc


def _replaced_tokens(view: ConversationView, vc: ViewCurrency) -> list[Replaced]:
    out: list[Replaced] = []
    for p, st in vc.status.items():
        if st.status != SUPERSEDED_STATUS:
            continue
        succ = [view.record_pos[r] for r in (st.latest or st.superseded_by) if r in view.record_pos]
        if not succ:
            continue
        kept = set().union(*(identifier_terms(view.record_text[q]) for q in succ))
        starts = [min(view.record_turns[q]) for q in succ if view.record_turns[q]]
        before = min(starts) if starts else view.num_turns
        for tok in dict.fromkeys(identifier_terms(view.record_text[p])):
            # codes (letters and digits: a flight number, an order code), not the names of tools or keys
            if tok not in kept and any(c.isdigit() for c in tok) and any(c.isalpha() for c in tok):
                out.append(Replaced(tok, before, p))
    return out


def _replaced_values(view: ConversationView, vc: ViewCurrency) -> list[Replaced]:
    """The stated values a newer statement replaced (named in another's ``supersedes``), each shown
    only beside a word of its record's own sentence other than the value's ("45 sources" of a library,
    not of a survey paper), with the records that replaced it and when."""
    out: list[Replaced] = []
    for sid, succ in vc.replaced_by.items():
        rid, i = statement_parts(sid)
        p = view.record_pos.get(rid)
        if p is None or not 0 <= i < len(vc.statements[p]):
            continue
        st = vc.statements[p][i]
        said = " ".join(str(st.get("said") or "").lower().split()).rstrip(".")
        words = frozenset(lexical_terms(view.record_text[p])) - _FRAME - frozenset(lexical_terms(said))
        starts = [min(view.record_turns[q]) for q in succ if view.record_turns[q]]
        if said and words:
            out.append(Replaced(said, min(starts) if starts else view.num_turns, p, words,
                                [view.record_ids[q] for q in succ], vc.valid_from[succ[0]] if succ else None))
    return out


@dataclass
class ScopeCurrency:
    """The statuses of a query's scope: per conversation, plus links across a user's conversations."""

    views: dict[str, ConversationView]
    per_view: dict[str, ViewCurrency]
    across: dict[tuple[str, int], RecordStatus] = field(default_factory=dict)

    def status(self, cid: str, pos: int) -> RecordStatus:
        st = self.across.get((cid, pos))
        return st if st is not None else self.per_view[cid].status.get(pos, CURRENT)

    def locate(self, record_id: str, near: str) -> tuple[str, int] | None:
        """(conversation, position) of a record id, looked up in ``near`` first."""
        for cid in (near, *self.views):
            p = self.views[cid].record_pos.get(record_id)
            if p is not None:
                return cid, p
        return None

    @property
    def any_links(self) -> bool:
        return bool(self.across) or any(vc.status or vc.replaced for vc in self.per_view.values())

    def chain(self, cid: str, pos: int) -> list[tuple[str, int]]:
        """Every record of ``pos``'s slot in the scope (its conversation's first), stored order."""
        slot = self.per_view[cid].slot_of[pos] if pos < len(self.per_view[cid].slot_of) else None
        if not slot:
            return []
        out = [(cid, p) for p in self.per_view[cid].slots.get(slot, [])]
        for other, vc in self.per_view.items():
            if other != cid:
                out.extend((other, p) for p in vc.slots.get(slot, []))
        return out


def scope_currency(views: dict[str, ConversationView]) -> ScopeCurrency:
    """Statuses of ``views`` (one conversation, or a user's conversations read together)."""
    per = {cid: view_currency(v) for cid, v in views.items()}
    sc = ScopeCurrency(views, per)
    if len(views) < 2 or sum(bool(vc.slots) for vc in per.values()) < 2:
        return sc
    rows: list[SlotRow] = []
    gone: set[str] = set()
    for cid, vc in per.items():
        v = views[cid]
        for slot, ps in vc.slots.items():
            for p in ps:
                rid = f"{cid}\x1f{v.record_ids[p]}"
                rows.append(SlotRow(rid, cid, slot, vc.value_of[p], vc.valid_from[p]))
                if vc.status.get(p, CURRENT).status == SUPERSEDED_STATUS:
                    gone.add(rid)
    across = links_across(rows, gone)
    if not across.supersedes and not across.conflicts:
        return sc

    def split(rid: str) -> tuple[str, int]:
        cid, _, rec = rid.partition("\x1f")
        return cid, views[cid].record_pos[rec]

    derived = derive_status([LinkRow(r.id, (), (), r.valid_from) for r in rows], across.supersedes, across.conflicts)
    for rid, st in derived.items():
        if st.status == CURRENT_STATUS:
            continue
        key = split(rid)
        st.superseded_by = [views[c].record_ids[p] for c, p in map(split, st.superseded_by)]
        st.latest = [views[c].record_ids[p] for c, p in map(split, st.latest)]
        st.conflicts = [views[c].record_ids[p] for c, p in map(split, st.conflicts)]
        sc.across[key] = st
    return sc


def adjust_pool(pool: list[FusedItem], relevance: Sequence[float], sc: ScopeCurrency, superseded_weight: float,
                history: bool, margin: float = 0.0) -> tuple[list[FusedItem], list[float]]:
    """The fused pool with what holds now brought forward (see the module doc); returns the pool
    and its relevance, best first. ``margin``: what holds now gets this much more than the relevance
    of what it replaced, so it is shown first; a raw turn (or a passage of it) a superseded record was
    made from brings the replacing records' turns too."""
    if not sc.any_links and not history:
        return pool, list(relevance)
    score = {it.key: float(r) for it, r in zip(pool, relevance, strict=False)}
    items = {it.key: it for it in pool}
    added: list[FusedItem] = []

    def bring_key(key: ItemKey, at_least: float, src: FusedItem) -> None:
        if key not in items:
            it = FusedItem(key=key, score=0.0, channels={HISTORY_CHANNEL}, routes=set(src.routes),
                           first_seen=len(items))
            items[key] = it
            added.append(it)
            score[key] = 0.0
        score[key] = max(score[key], at_least)

    def bring(cid: str, pos: int, at_least: float, src: FusedItem) -> None:
        bring_key(ItemKey(cid, "record", sc.views[cid].record_ids[pos]), at_least, src)

    def bring_now(cid: str, st: RecordStatus, here: float, src: FusedItem, turns: bool) -> None:
        for rid in st.latest or st.superseded_by:
            loc = sc.locate(rid, cid)
            if loc is None:
                continue
            bring(*loc, here * (1 + margin), src)
            view = sc.views[loc[0]]
            if turns and view.record_turns[loc[1]]:  # the turn that says what holds now, as a turn is shown
                bring_key(ItemKey(loc[0], "turn", view.turn_ids[min(view.record_turns[loc[1]])]), here * (1 + margin), src)

    for it in list(pool):
        cid = it.key.conversation_id
        view = sc.views[cid]
        here = score[it.key]
        if it.key.kind != "record":
            if history:
                continue
            tp = view.turn_pos.get(it.key.id) if it.key.kind == "turn" else (
                view.passage_turn(view.passage_pos[it.key.id]) if it.key.id in view.passage_pos else None)
            for p in sc.per_view[cid].stated.get(tp, []) if tp is not None else []:
                st = sc.status(cid, p)
                if st.status == SUPERSEDED_STATUS:
                    bring_now(cid, st, here, it, True)
            continue
        pos = view.record_pos.get(it.key.id)
        if pos is None:
            continue
        if history:
            for c, p in sc.chain(cid, pos):
                bring(c, p, here, it)
            continue
        st = sc.status(cid, pos)
        if st.status == CONFLICTING_STATUS:  # the statements it contradicts come with it, for both to be seen
            for rid in st.conflicts:
                loc = sc.locate(rid, cid)
                if loc is not None:
                    bring(*loc, here, it)
            continue
        if st.status != SUPERSEDED_STATUS:
            continue
        bring_now(cid, st, here, it, False)
        score[it.key] = here * superseded_weight
    out = sorted([*pool, *added], key=lambda x: (-score[x.key], x.first_seen))
    return out, [score[x.key] for x in out]


__all__ = ["HISTORY_CHANNEL", "Replaced", "ScopeCurrency", "ViewCurrency", "adjust_pool", "scope_currency", "view_currency"]
