"""Current-state questions derived from agent logs: what holds *now* after a change (docs/current-memory.md).

An agent looks an object up and then changes it. Every successful write after a successful lookup of
the same object gives a question about the object's state now, whose answer is in the write's
result, and whose replaced value is in the lookup's (the benchmark's own reading of the log,
kept apart from the encoder's so that tuning one cannot tune the other):

* the **object** of a call is its first argument whose key ends in ``id`` (``reservation_id M05KNL``);
* a **write** is a call whose tool name's first word is not a lookup word
  (:data:`~lychee_ray.eval.setup.agentlog_questions.LOOKUP_WORDS`) and whose result is a JSON object
  (an error result changes nothing and gives no question);
* its **changed field** is a top-level field of the result that differs from the object's last
  known state (the last lookup or write result of the object before it) and that the call's
  arguments name (``update_reservation_flights(…, flights=…)`` → ``flights``); a write whose
  arguments name no changed field asks about ``status`` when that changed (a cancellation);
* **current** tokens: the new value's leaf values the old one lacks (``HAT110``, ``cancelled``);
  **replaced** tokens: the old value's identifier-like leaves (letters and digits: ``HAT227``) the new
  one lacks; **replaced turns**: the results that showed the old state (the object's lookups since
  its last write).

Each change gives a ``current`` question ("What are the flights of reservation M05KNL now?") and a
``history`` one ("What were the flights of reservation M05KNL before the change on 2024-05-15?"),
with the metrics' inputs in ``meta`` (:mod:`lychee_ray.eval.metrics.current`).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from lychee_ray.core.conversation import Conversation, QAItem, Turn
from lychee_ray.core.tools import ToolCall
from lychee_ray.eval.setup.agentlog_questions import is_lookup

KINDS = ("current", "history")
_ID_KEY = re.compile(r"(?:^|_)id$", re.I)
_IDENT = re.compile(r"^(?=.*[a-z])(?=.*\d)[a-z0-9_.@-]{3,}$", re.I)
_ERROR = re.compile(r"^\s*(?:error|exception|failed|failure)\b", re.I)
STATUS_FIELD = "status"


@dataclass
class _State:
    value: dict[str, Any]
    turn_id: str
    lookup: bool


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        return None


def _object(call: ToolCall) -> str | None:
    args = call.parsed_arguments()
    if not isinstance(args, dict):
        return None
    for k, v in args.items():
        if _ID_KEY.search(str(k)) and isinstance(v, (str, int)) and not isinstance(v, bool) and str(v).strip():
            return f"{re.sub(r'_?id$', '', str(k), flags=re.I).replace('_', ' ') or 'object'} {v}"
    return None


def leaves(value: Any) -> list[str]:
    """Every scalar leaf of a JSON value, as text."""
    if isinstance(value, dict):
        return [x for v in value.values() for x in leaves(v)]
    if isinstance(value, list):
        return [x for v in value for x in leaves(v)]
    return [] if value is None or isinstance(value, bool) else [str(value)]


def _describes(value: dict[str, Any], obj: str) -> bool:
    """The result's own first id field, when it has one, names ``obj``'s id."""
    own = next((v for k, v in value.items() if _ID_KEY.search(str(k)) and isinstance(v, (str, int))), None)
    return own is None or obj.endswith(f" {own}")


def _canon(value: Any) -> str:
    return json.dumps(value, sort_keys=True)


def _failed(turn: Turn) -> bool:
    if turn.meta.get("is_error") is True or _ERROR.match(turn.content or ""):
        return True
    v = _parse(turn.content)
    return isinstance(v, dict) and bool(v.get("error"))


def derive_current_questions(conv: Conversation) -> list[QAItem]:
    """The conversation's current-state and history questions (see the module doc), in log order."""
    states: dict[str, list[_State]] = {}  # object -> its known states, oldest first
    open_calls: dict[str, tuple[ToolCall, Turn]] = {}
    out: list[QAItem] = []
    named = {x for _, _, _, t in conv.iter_turns() for c in t.tool_calls for x in leaves(c.parsed_arguments())}
    for _, s, _, t in conv.iter_turns():
        for c in t.tool_calls:
            open_calls[c.call_id] = (c, t)
        if t.role != "tool" or t.tool_call_id not in open_calls:
            continue
        call, call_turn = open_calls.pop(t.tool_call_id)
        obj = _object(call)
        value = _parse(t.content)
        if obj is None or _failed(t) or not isinstance(value, dict):
            continue
        lookup = is_lookup(call.name)
        if not lookup and not _describes(value, obj):
            continue  # a write whose result is another object (a booking's new reservation)
        known = states.setdefault(obj, [])
        if not lookup and any(st.lookup for st in known):
            day = (call_turn.timestamp or s.started_at or "")[:10] or None
            out.extend(_questions(conv, obj, call, call_turn, t, value, known, day, len(out), named))
        known.append(_State(value, t.turn_id, lookup))
    return out


def _questions(conv: Conversation, obj: str, call: ToolCall, call_turn: Turn, result: Turn, value: dict[str, Any],
               known: list[_State], day: str | None, n: int, named_ids: set[str]) -> list[QAItem]:
    last = known[-1].value
    args = call.parsed_arguments()
    named = [str(k) for k in args] if isinstance(args, dict) else []
    changed = [k for k in named if k in value and _canon(value.get(k)) != _canon(last.get(k))]
    if not changed and STATUS_FIELD in value and _canon(value.get(STATUS_FIELD)) != _canon(last.get(STATUS_FIELD)):
        changed = [STATUS_FIELD]
    if not changed:
        return []
    field = changed[0]
    old, new = last.get(field), value[field]
    old_leaves, new_leaves = leaves(old), leaves(new)
    old_ids, new_ids = [x for x in old_leaves if _IDENT.match(x)], [x for x in new_leaves if _IDENT.match(x)]
    if old_ids or new_ids:  # a field of identifiers (flight numbers) changes when they do, not its prices
        current = [x for x in dict.fromkeys(new_ids) if x not in old_ids]
        replaced = [x for x in dict.fromkeys(old_ids) if x not in new_ids]
        if not current and not replaced:
            return []
    else:
        current = [x for x in dict.fromkeys(new_leaves) if x not in old_leaves]
        replaced = []
    if not current:
        return []
    # the results that showed the old state: the object's states since its last write
    since_write = []
    for st in reversed(known):
        since_write.append(st.turn_id)
        if not st.lookup:
            break
    human = field.replace("_", " ")
    verb = "are" if isinstance(new, list) or human.endswith("s") else "is"
    old_values = list(dict.fromkeys(old_leaves))
    # what shows the old state of a cancelled object: its identifiers no call names (flight numbers),
    # not the ids the agent's calls name anyway, nor the user's own
    state_ids = [x for x in dict.fromkeys(leaves(last)) if _IDENT.match(x) and x not in named_ids
                 and x != conv.user_id] if field == STATUS_FIELD else []
    meta: dict[str, Any] = {"source": "current_state", "state_ids": state_ids, "user_id": conv.user_id, "object": obj, "field": field,
                            "tool": call.name, "current": current, "replaced": replaced, "replaced_turns": since_write[::-1],
                            "old": old_values, "change_day": day}
    gold = [call_turn.turn_id, result.turn_id]
    when = f" on {day}" if day else ""
    past = "were" if verb == "are" else "was"
    return [
        QAItem(conversation_id=conv.conversation_id, question_id=f"{conv.conversation_id}-current{n}",
               question=f"What {verb} the {human} of {obj} now?", answer=" ".join(current), category="current",
               evidence=gold, meta=meta),
        QAItem(conversation_id=conv.conversation_id, question_id=f"{conv.conversation_id}-history{n}",
               question=f"What {past} the {human} of {obj} before it changed{when}?",
               answer=" ".join(old_values), category="history", evidence=[*since_write[::-1], *gold], meta=meta),
    ]


__all__ = ["KINDS", "derive_current_questions", "leaves"]
