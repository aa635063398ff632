"""Marks on the selected context: an item that shows a value no longer current says so on its line.

After the selection (:mod:`lychee_ray.query.select`), each unit is checked against its scope's
statuses (:mod:`lychee_ray.query.currency`):

* a superseded record's line ends with ``[superseded on 2024-05-15 by: <what holds now>]`` (status
  ``superseded``; ``history`` when the question asks for history);
* a record that contradicts another current one ends with ``[conflicts with: <the other> (day)]``
  (status ``conflicting``);
* a raw-turn line said before a change that holds an identifier the change replaced ends with
  ``[shows HAT227, superseded on 2024-05-15 by: …]``;
* for a history question, a current record of a slot that changed ends with ``[current since day]``.

Marks go at the end of lines (no line starts with whitespace or holds a line break, as
:func:`~lychee_ray.query.evidence.rendered_tokens` needs), and count against the budget: the
selection runs with ``query.current.mark_reserve_tokens`` less when the scope has links, and if the
marked context still passes the budget, superseded units go first, then the least relevant.
"""

from __future__ import annotations

from collections.abc import Sequence

from lychee_ray.config import CurrentConfig
from lychee_ray.core.currency import SLOT_SEP, day
from lychee_ray.query.currency import ScopeCurrency
from lychee_ray.query.evidence import Evidence, Selection, line_tokens, render, rendered_tokens
from lychee_ray.query.view import ConversationView
from lychee_ray.text.lexical import identifier_terms


def _cut(text: str, limit: int) -> str:
    t = " ".join(text.split())
    return t if len(t) <= limit else (t[:limit].rsplit(" ", 1)[0] or t[:limit]) + " …"


def _text_of(sc: ScopeCurrency, record_id: str, near: str) -> str | None:
    """What a replacing record says: its slot's value when it names one (``flights = …``), else its text."""
    loc = sc.locate(record_id, near)
    if loc is None:
        return None
    cid, pos = loc
    vc = sc.per_view[cid]
    slot = vc.slot_of[pos] if pos < len(vc.slot_of) else None
    value = vc.value_of[pos] if pos < len(vc.value_of) else None
    if slot and value:
        return f"{slot.partition(SLOT_SEP)[2]} = {value}"
    return sc.views[cid].record_text[pos]


def _record_mark(e: Evidence, view: ConversationView, sc: ScopeCurrency, history: bool, cfg: CurrentConfig) -> str:
    pos = view.record_pos[e.id]
    st = sc.status(e.conversation_id, pos)
    if st.status == "superseded":
        now = next((t for t in (_text_of(sc, r, e.conversation_id) for r in (st.latest or st.superseded_by)) if t), "")
        when = f" on {day(st.valid_until)}" if day(st.valid_until) else ""
        e.status, e.valid_until, e.superseded_by = ("history" if history else "superseded"), st.valid_until, list(st.superseded_by)
        return f"[superseded{when} by: {_cut(now, cfg.mark_chars)}]"
    if st.status == "conflicting":
        e.status = "conflicting"
        for other in st.conflicts:
            loc = sc.locate(other, e.conversation_id)
            if loc is not None and sc.status(*loc).status != "superseded":
                since = day(sc.per_view[loc[0]].valid_from[loc[1]])
                text = _cut(sc.views[loc[0]].record_text[loc[1]], cfg.mark_chars)
                return f"[conflicts with: {text}{f' ({since})' if since else ''}]"
        return ""
    if history and len(sc.chain(e.conversation_id, pos)) > 1:
        since = day(sc.per_view[e.conversation_id].valid_from[pos])
        return f"[current since {since}]" if since else "[current]"
    src = view.record_turns[pos]
    if src and not (sc.per_view[e.conversation_id].slot_of[pos] if pos < len(sc.per_view[e.conversation_id].slot_of) else None):
        # a record of no slot (a sentence the agent said) can still show a value a change replaced
        mark, until, by = _shown_value_mark(e.conversation_id, min(src), view.record_text[pos], sc, cfg)
        if mark:
            e.status, e.valid_until, e.superseded_by = ("history" if history else "superseded"), until, by
        return mark
    return ""


def _shown_value_mark(cid: str, tp: int, text: str, sc: ScopeCurrency, cfg: CurrentConfig) -> tuple[str, str | None, list[str]]:
    """The mark of a line said at turn position ``tp`` that shows identifiers a later change
    replaced (:attr:`~lychee_ray.query.currency.ViewCurrency.replaced`): (mark or "", valid_until,
    superseded_by)."""
    hits = [r for r in sc.per_view[cid].replaced if tp < r.before]
    if not hits:
        return "", None, []
    terms = set(identifier_terms(text))
    found = [r for r in hits if r.token in terms]
    if not found:
        return "", None, []
    st = sc.status(cid, found[0].record)
    now = next((t for t in (_text_of(sc, r, cid) for r in (st.latest or st.superseded_by)) if t), "")
    toks = ", ".join(dict.fromkeys(r.token.upper() for r in found))
    when = f" on {day(st.valid_until)}" if day(st.valid_until) else ""
    return f"[shows {toks}, superseded{when} by: {_cut(now, cfg.mark_chars)}]", st.valid_until, list(st.superseded_by)


def _turn_marks(e: Evidence, view: ConversationView, sc: ScopeCurrency, cfg: CurrentConfig) -> list[str]:
    """One mark (or "") per turn of a window."""
    marks = []
    for tid in e.turn_ids:
        tp = view.turn_pos[tid]
        mark, until, by = _shown_value_mark(e.conversation_id, tp, view.turn_text[tp], sc, cfg)
        marks.append(mark)
        if mark and e.valid_until is None:
            e.valid_until, e.superseded_by = until, by
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
            marks = _turn_marks(e, view, sc, cfg)
            if any(marks):
                e.status = "history" if history else "superseded"
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
