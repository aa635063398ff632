"""What a route lets into its recall lists: a soft record-type preference, and the agent's
system-prompt context left out unless the route asks for rules."""

from __future__ import annotations

from lychee_ray.query.hits import Hit
from lychee_ray.query.view import ConversationView
from lychee_ray.text.lexical import identifier_terms


def prefer_types(hits: list[Hit], view: ConversationView, types: list[str]) -> list[Hit]:
    """Soft record-type constraint: records of the route's types first, the rest after (stable)."""
    if not types:
        return hits
    allowed = set(types)

    def ok(h: Hit) -> bool:
        return h.kind != "record" or view.record_type[view.record_pos[h.id]] in allowed

    return [h for h in hits if ok(h)] + [h for h in hits if not ok(h)]


# Record types a route asks for when it wants the agent's rules (a system prompt's records).
_RULE_TYPES = frozenset({"constraint", "procedure"})


def without_context(hits: list[Hit], view: ConversationView, types: list[str]) -> list[Hit]:
    """The hits minus system-prompt turns and records (agent logs: the agent's instructions, stored
    once, are context, not memory) — unless the route asks for rules (constraint / procedure)."""
    if not view.context_segments or _RULE_TYPES & set(types):
        return hits

    def context(h: Hit) -> bool:
        if h.kind == "record":
            return view.is_context_record(view.record_pos[h.id])
        tp = view.passage_turn(view.passage_pos[h.id]) if h.kind == "passage" else view.turn_pos[h.id]
        return view.is_context_turn(tp)

    return [h for h in hits if not context(h)]


def _ident_index(view: ConversationView) -> dict[str, frozenset[tuple[str, str]]]:
    """Identifier -> (kind, id) of the records, turns and passages whose text holds it; built once
    per view (memoised with the counts it covers: a view extended by appended turns builds it again)."""
    size = (view.num_records, view.num_turns, view.num_passages)
    got = view.memo.get("ident_index")
    if got is not None and got[0] == size:
        return got[1]
    index: dict[str, set[tuple[str, str]]] = {}
    # a turn with passages is searched by them: its identifiers are found in its passages
    whole = [(i, t) for p, (i, t) in enumerate(zip(view.turn_ids, view.turn_text, strict=False)) if p not in view.turn_passages]
    for kind, ids, texts in (("record", view.record_ids, view.record_text), ("turn", [i for i, _ in whole], [t for _, t in whole]),
                             ("passage", view.passages.ids, view.passages.text)):
        for i, t in zip(ids, texts, strict=False):
            for ident in identifier_terms(t):
                index.setdefault(ident, set()).add((kind, i))
    frozen = {k: frozenset(v) for k, v in index.items()}
    view.memo["ident_index"] = (size, frozen)
    return frozen


def route_identifiers(view: ConversationView, text: str) -> list[str]:
    """The identifiers (codes, ids, e-mails, tool names) a route's text names that the conversation holds."""
    index = _ident_index(view)
    return [t for t in dict.fromkeys(identifier_terms(text)) if t in index]


def prefer_identifiers(hits: list[Hit], view: ConversationView, idents: list[str]) -> list[Hit]:
    """Exact identifiers first: when the route names codes or ids the conversation holds ("reservation
    FQ8APE"), the items holding more of them come first in every channel's list (stable) — near-
    identical records about other reservations must not outrank the one asked about."""
    if not idents:
        return hits
    index = _ident_index(view)
    held = [index[t] for t in idents]

    def count(h: Hit) -> int:
        key = (h.kind, h.id)
        return sum(key in s for s in held)

    return sorted(hits, key=lambda h: -count(h))  # (sorted is stable: the channel's order within a count)


__all__ = ["prefer_identifiers", "prefer_types", "route_identifiers", "without_context"]
