"""Marks on the selected context: an item that shows a value no longer current says so on its line.

After the selection (:mod:`lychee_ray.query.select`), each unit is checked against its scope's
statuses (:mod:`lychee_ray.query.currency`):

* a superseded record's line ends with ``[superseded on 2024-05-15 by: <what holds now>]`` (status
  ``superseded``; ``history`` when the question asks for history);
* a record that contradicts another current one ends with ``[conflicts with: <the other> (day)]``
  (status ``conflicting``);
* a raw-turn line (or a record of no slot) said before a change that holds an identifier the
  change replaced ends with ``[shows HAT227, superseded on 2024-05-15 by: …]``, or a plain value a
  chat statement's change replaced, beside a word of its slot (``[shows april 1, 2024, …]``: a
  restatement of the old deadline in another message, the assistant's answer repeating it);
* a raw-turn line (or a passage of it holding the statement) that a superseded or conflicting
  record was made from takes that record's mark and status; a record answering such a user turn
  (made from it and the assistant's reply) says ``[answers a statement superseded on … by: …]``;
* for a history question, a current record of a slot that changed ends with ``[current since day]``.

Marks go at the end of lines (no line starts with whitespace or holds a line break, as
:func:`~lychee_ray.query.evidence.rendered_tokens` needs), and count against the budget: the
selection runs with ``query.current.mark_reserve_tokens`` less when the scope has links, and if the
marked context still passes the budget, superseded units go first, then the least relevant.
"""

from __future__ import annotations

from lychee_ray.core.status import CONFLICTING_STATUS, CURRENT_STATUS, SUPERSEDED_STATUS

import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from lychee_ray.config import CurrentConfig
from lychee_ray.core.currency import SLOT_SEP, day
from lychee_ray.query.currency import ScopeCurrency
from lychee_ray.query.evidence import Evidence, Selection, line_tokens, render, rendered_tokens
from lychee_ray.query.view import ConversationView
from lychee_ray.text.lexical import identifier_terms, lexical_terms

_ON_DAY = re.compile(r"^On \d{4}-\d{2}-\d{2}, ")
_CLOCK = re.compile(r"\d+t\d+")  # the "13t05" of an ISO time "2024-05-13T05:37", not a code
_WORD = re.compile(r"[A-Za-z0-9][A-Za-z0-9_@.+]*[A-Za-z0-9]")  # identifier_terms' tokens, case kept


def _cut(text: str, limit: int) -> str:
    """``text`` on one line, without a leading "On <date>, " (the mark says the date), cut to ``limit``."""
    t = _ON_DAY.sub("", " ".join(text.split()), count=1)
    if len(t) <= limit:
        return t
    head = t[:limit].rsplit(" ", 1)[0]
    return (head if len(head) >= limit // 2 else t[:limit]) + " …"  # (a long call is cut inside, not dropped)


def _codes(text: str) -> list[str]:
    """Identifier terms with letters and digits (``hat110``, ``gift_card_8887175``): codes, not words."""
    return [t for t in dict.fromkeys(identifier_terms(text))
            if any(c.isdigit() for c in t) and any(c.isalpha() for c in t) and not _CLOCK.fullmatch(t)]


def _now(sc: ScopeCurrency, st_ids: Sequence[str], near: str, old: tuple[str, str | None, str | None],
         cfg: CurrentConfig, codes_only: bool = False) -> str:
    """What holds now, briefly, from the first record of ``st_ids`` found: the codes its value (else
    its text) has that the old record's (``old``: text, value, slot) lacks — ``flights: HAT110,
    HAT172`` —, else (unless ``codes_only``: then "") its slot's value, else its text (also when it
    is of another slot: an ending)."""
    for rid in st_ids:
        loc = sc.locate(rid, near)
        if loc is None:
            continue
        cid, pos = loc
        vc = sc.per_view[cid]
        text = sc.views[cid].record_text[pos]
        slot = vc.slot_of[pos] if pos < len(vc.slot_of) else None
        attr = slot.partition(SLOT_SEP)[2] if slot else ""
        value = vc.value_of[pos] if pos < len(vc.value_of) else None
        old_text, old_value, old_slot = old
        if old_slot and slot != old_slot:  # the record that ended the subject (a cancellation)
            return _cut(text, cfg.mark_chars)
        gone = set(_codes(old_value if value and old_value else old_text))
        new = [t for t in _codes(value if value and old_value else text) if t not in gone]
        if new and attr:
            shown = [m.group(0) for m in _WORD.finditer(text) if m.group(0).lower() in new]
            return _cut(f"{attr}: {', '.join(dict.fromkeys(shown or new))}", cfg.mark_chars)
        if codes_only:
            return ""
        if attr and value and not value.startswith("("):
            return _cut(f"{attr} = {value}", cfg.mark_chars)
        return _cut(text, cfg.mark_chars)
    return ""


@dataclass
class _Mark:
    """A mark and the evidence fields it sets."""

    text: str
    status: str
    valid_until: str | None = None
    superseded_by: list[str] = field(default_factory=list)


def _status_mark(cid: str, pos: int, sc: ScopeCurrency, history: bool, cfg: CurrentConfig) -> _Mark | None:
    """The mark of record ``pos`` when it is superseded or conflicting, else None."""
    view = sc.views[cid]
    st = sc.status(cid, pos)
    vc = sc.per_view[cid]
    mine = (view.record_text[pos], vc.value_of[pos] if pos < len(vc.value_of) else None,
            vc.slot_of[pos] if pos < len(vc.slot_of) else None)
    if st.status == SUPERSEDED_STATUS:
        now = _now(sc, st.latest or st.superseded_by, cid, mine, cfg)
        when = f" on {day(st.valid_until)}" if day(st.valid_until) else ""
        return _Mark(f"[superseded{when} by: {now}]", "history" if history else "superseded", st.valid_until,
                     list(st.superseded_by))
    if st.status == CONFLICTING_STATUS:
        mine_since = vc.valid_from[pos] if pos < len(vc.valid_from) else None
        for other in st.conflicts:
            loc = sc.locate(other, cid)
            if loc is not None and sc.status(*loc).status != SUPERSEDED_STATUS:
                since = day(sc.per_view[loc[0]].valid_from[loc[1]])
                when = f" ({since})" if since and since != day(mine_since) else ""
                # what the other says: the codes it has that this one lacks, else its words
                brief = _now(sc, [other], cid, mine, cfg, codes_only=True) or _cut(sc.views[loc[0]].record_text[loc[1]],
                                                                                   cfg.mark_chars)
                return _Mark(f"[conflicts with: {brief}{when}]", "conflicting")
        return _Mark("", "conflicting")
    return None


def _record_mark(e: Evidence, view: ConversationView, sc: ScopeCurrency, history: bool, cfg: CurrentConfig) -> str:
    pos = view.record_pos[e.id]
    got = _status_mark(e.conversation_id, pos, sc, history, cfg)
    if got is not None:
        e.status, e.valid_until, e.superseded_by = got.status, got.valid_until, got.superseded_by
        return got.text
    if history and any(sc.status(c, p).status == SUPERSEDED_STATUS for c, p in sc.chain(e.conversation_id, pos)):
        since = day(sc.per_view[e.conversation_id].valid_from[pos])
        return f"[current since {since}]" if since else "[current]"
    src = view.record_turns[pos]
    answered = _answer_mark(e, src, view, sc, history, cfg)
    if answered is not None:
        e.status, e.valid_until, e.superseded_by = answered.status, answered.valid_until, answered.superseded_by
        return answered.text
    if src:
        # a record that holds, or states nothing, can still repeat a value a change replaced
        mark, until, by = _shown_value_mark(e.conversation_id, min(src), view.record_text[pos], sc, cfg)
        if mark:
            e.status, e.valid_until, e.superseded_by = ("history" if history else "superseded"), until, by
        return mark
    return ""


def _answer_mark(e: Evidence, src: Sequence[int], view: ConversationView, sc: ScopeCurrency, history: bool,
                 cfg: CurrentConfig) -> _Mark | None:
    """The mark of a record that answers a user's turn whose statement is superseded or conflicting
    (made from that turn and the assistant's reply, ``query.current.mark_answers``): the advice was
    given for the old value, so it says so — ``[answers a statement superseded on … by: …]``."""
    if not cfg.mark_answers or len(src) < 2 or not any(view.turn_role[tp] == "assistant" for tp in src):
        return None
    for tp in src:
        if view.turn_role[tp] == "user":
            got = _stated_mark(e, tp, sc, history, cfg)
            if got is not None:
                lead = "[answers a statement that " if got.status == CONFLICTING_STATUS else "[answers a statement "
                return _Mark(lead + got.text[1:], got.status, got.valid_until, got.superseded_by)
    return None


def _stated_mark(e: Evidence, tp: int, sc: ScopeCurrency, history: bool, cfg: CurrentConfig,
                 part: str | None = None) -> _Mark | None:
    """The mark of a turn line (or a passage of it: ``part``, its text) that states what a superseded
    or conflicting record made from the turn states: that record's mark (a superseded one first). A
    passage takes it only when it holds ``stated_min_share`` of the record's words (the statement is in
    that part)."""
    cid = e.conversation_id
    recs = sc.per_view[cid].stated.get(tp) if cfg.mark_stated_turns else None
    if not recs:
        return None
    view = sc.views[cid]
    if part is not None:
        words = set(lexical_terms(part))
        recs = [p for p in recs if view.record_terms[p]
                and len(view.record_terms[p] & words) >= cfg.stated_min_share * len(view.record_terms[p])]
    marks = [m for m in (_status_mark(cid, p, sc, history, cfg) for p in recs) if m is not None and m.text]
    marks.sort(key=lambda m: m.status == CONFLICTING_STATUS)
    return marks[0] if marks else None


def _shown_value_mark(cid: str, tp: int, text: str, sc: ScopeCurrency, cfg: CurrentConfig,
                      kinds: tuple[bool, ...] = (False, True)) -> tuple[str, str | None, list[str]]:
    """The mark of a line said at turn position ``tp`` that shows identifiers or values a later
    change replaced (:attr:`~lychee_ray.query.currency.ViewCurrency.replaced`): (mark or "",
    valid_until, superseded_by); ``kinds``: identifiers (False), plain values (True) or both."""
    hits = [r for r in sc.per_view[cid].replaced if tp < r.before and bool(r.words) in kinds]
    if not hits:
        return "", None, []
    idents = set(identifier_terms(text))
    words = set(lexical_terms(text)) if any(r.words for r in hits) else set()
    found = [r for r in hits if r.shown_in(text, idents, words)]
    if not found:
        return "", None, []
    st = sc.status(cid, found[0].record)
    by = found[0].by or st.latest or st.superseded_by
    until = found[0].until if found[0].by else st.valid_until
    now = _now(sc, by, cid, (text, None, None), cfg)
    toks = ", ".join(dict.fromkeys(r.token if r.words else r.token.upper() for r in found))
    when = f" on {day(until)}" if day(until) else ""
    return f"[shows {toks}, superseded{when} by: {now}]", until, list(found[0].by or st.superseded_by)


def _turn_marks(e: Evidence, view: ConversationView, sc: ScopeCurrency, history: bool, cfg: CurrentConfig) -> list[str]:
    """One mark (or "") per turn of a window (or the one line of a passage); sets the evidence's status."""
    marks = []
    shown = view.passage_pos.get(e.id) if e.kind == "passage" else None
    for tid in e.turn_ids:
        tp = view.turn_pos[tid]
        # a passage shows its part of its turn; the turns around it are shown whole
        part = view.passages.text[shown] if shown is not None and view.passage_turn(shown) == tp else None
        line = view.turn_text[tp] if part is None else part
        # an identifier shown first, then what the turn's own records state, then a plain value
        # repeated (the turn a replaced statement came from says so with that statement's mark)
        mark, until, by = _shown_value_mark(e.conversation_id, tp, line, sc, cfg, (False,))
        status: str = ("history" if history else "superseded") if mark else CURRENT_STATUS
        if not mark:
            got = _stated_mark(e, tp, sc, history, cfg, part)
            if got is not None:
                mark, status, until, by = got.text, got.status, got.valid_until, got.superseded_by
        if not mark:
            mark, until, by = _shown_value_mark(e.conversation_id, tp, line, sc, cfg, (True,))
            status = ("history" if history else "superseded") if mark else CURRENT_STATUS
        marks.append(mark)
        if mark and (e.status == CURRENT_STATUS or (e.status == CONFLICTING_STATUS and status != CONFLICTING_STATUS)):
            e.status, e.valid_until, e.superseded_by = status, until, by
    return marks


def _marked(e: Evidence, marks: Sequence[str], encoding: str) -> None:
    lines = e.block.split("\n")
    if len(marks) != len(lines):
        return
    lines = [f"{line} {m}" if m else line for line, m in zip(lines, marks, strict=True)]
    e.block = "\n".join(lines)
    e.tokens = sum(line_tokens(line, encoding) for line in lines)


def apply_marks(sel: Selection, sc: ScopeCurrency, history: bool, cfg: CurrentConfig, budget: int, show_conv: bool,
                encoding: str) -> Selection:
    """``sel`` with its units marked (see the module doc), within ``budget``."""
    if not sc.any_links and not history:
        return sel
    changed = False
    for e in sel.evidence:
        view = sc.views[e.conversation_id]
        if e.kind == "record":
            mark = _record_mark(e, view, sc, history, cfg)
            if mark:
                _marked(e, [mark], encoding)
                changed = True
        else:
            marks = _turn_marks(e, view, sc, history, cfg)
            if any(marks):
                _marked(e, marks, encoding)
                changed = True
    if not changed:
        return sel
    units = list(sel.evidence)
    tokens = rendered_tokens(units, show_conv, encoding)
    while tokens > budget and units:
        stale = [j for j, u in enumerate(units) if u.status in ("superseded", "history")]
        pick = stale or list(range(len(units)))
        units.pop(min(pick, key=lambda j: units[j].score))
        tokens = rendered_tokens(units, show_conv, encoding)
    return Selection(units, render(units, show_conv), tokens, sel.budget, sel.pool, sel.skipped)


__all__ = ["apply_marks"]
