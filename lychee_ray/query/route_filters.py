"""What a route lets into its recall lists: a soft record-type preference, and the agent's
system-prompt context left out unless the route asks for rules."""

from __future__ import annotations

from lychee_ray.query.hits import Hit
from lychee_ray.query.recall import ConversationView


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
    return [h for h in hits if not (view.is_context_record(view.record_pos[h.id]) if h.kind == "record"
                                    else view.is_context_turn(view.turn_pos[h.id]))]


__all__ = ["prefer_types", "without_context"]
