"""The state of an object a tool result describes, as slots (``rules`` backend; docs/current-memory.md).

An agent looks an object up (``get_reservation_details(reservation_id=M05KNL)``) and changes it
(``update_reservation_flights(reservation_id=M05KNL, …)``); both results are the object's state at
that moment. Read from structure, with no dataset-specific names:

* the **subject** is the object's identity: the result's own first id field (``reservation_id:
  M05KNL`` → ``reservation M05KNL``; a booking's new id names the new object), else the call's first
  id argument (``get_user_details(user_id=…)`` → ``user …``);
* its **field groups** are the slots: each field that nests lists or objects (``flights``,
  ``passengers``, ``payment_methods``) is one, and the other fields — scalars, flat objects such as
  ``name`` or ``address``, lists of scalars — together are one more (``details``). The rule reads
  the field's shape, not its size, so a field stays in its group whatever its value (an empty
  list sits with the details, whose value then changes when the list fills or empties);
  groups whose field the call's arguments name come first (what a change changed);
* each group's **value** is its canonical rendering (keys sorted), so two results of the object
  that show the same flights in another key order restate, and other flights change.

The records of a group carry its slot and value; :mod:`lychee_ray.ingest.supersede` links a newer
value of a slot to the records it replaces. A failed call has no state (it changes nothing).
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from typing import Any

from lychee_ray.core.currency import slot_key
from lychee_ray.core.tools import ToolCall

DETAILS = "details"  # the group of an object's scalar fields
_VALUE_CHARS = 200  # a longer canonical value is kept as its head and a hash (equal values still compare equal)
_HASH_CHARS = 12
_ID_KEY = re.compile(r"(?:^|_)id$", re.I)
_WORDS = re.compile(r"[_\W]+|(?<=[a-z0-9])(?=[A-Z])")


@dataclass
class StateGroup:
    """One field group of an object's state: its slot, value and the fields it holds."""

    slot: str
    value: str
    fields: dict[str, Any]


def _noun(key: str, tool: str) -> str:
    """``reservation_id`` → ``reservation``; a bare ``id`` takes the tool's object word
    (``get_order`` → ``order``)."""
    base = re.sub(r"_?id$", "", key, flags=re.I).replace("_", " ").strip()
    if base:
        return base
    words = [w for w in _WORDS.split(tool) if w]
    return " ".join(words[1:]).lower() if len(words) > 1 else tool.lower()


def _scalar_id(v: Any) -> str | None:
    if isinstance(v, bool) or not isinstance(v, (str, int)):
        return None
    s = str(v).strip()
    return s if 0 < len(s) <= 64 else None


def object_subject(call: ToolCall, value: Any) -> str | None:
    """The object a result describes (see the module doc), as ``"noun id"``; None when neither
    the result nor the call names one."""
    if isinstance(value, dict):
        for k, v in value.items():
            sid = _scalar_id(v)
            if _ID_KEY.search(str(k)) and sid:
                return f"{_noun(str(k), call.name)} {sid}"
    args = call.parsed_arguments()
    if isinstance(args, dict):
        for k, v in args.items():
            sid = _scalar_id(v)
            if _ID_KEY.search(str(k)) and sid:
                return f"{_noun(str(k), call.name)} {sid}"
    return None


def canonical(value: Any) -> str:
    """A value rendered with dict keys sorted (at every depth), compactly."""
    if isinstance(value, dict):
        return "(" + ", ".join(f"{k}: {canonical(value[k])}" for k in sorted(value, key=str)) + ")"
    if isinstance(value, list):
        return "[" + "; ".join(canonical(v) for v in value) + "]"
    return "null" if value is None else str(value)


def _value(fields: dict[str, Any]) -> str:
    text = canonical(fields)
    if len(text) <= _VALUE_CHARS:
        return text
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()[:_HASH_CHARS]
    return f"{text[:_VALUE_CHARS - _HASH_CHARS - 2]} #{digest}"


def _nested(v: Any) -> bool:
    """A list or object holding lists or objects (``flights``, ``payment_methods``): a group of its own."""
    items = v.values() if isinstance(v, dict) else v if isinstance(v, list) else ()
    return any(isinstance(x, (dict, list)) for x in items)


def state_groups(call: ToolCall, value: Any) -> list[StateGroup]:
    """The field groups of a result's object state, or [] when it has none (not a JSON object, or
    no subject)."""
    if not isinstance(value, dict) or not value:
        return []
    subject = object_subject(call, value)
    if subject is None:
        return []
    args = call.parsed_arguments()
    named = {str(k) for k in args} if isinstance(args, dict) else set()
    groups: list[tuple[str, dict[str, Any]]] = []
    scalars: dict[str, Any] = {}
    for k, v in value.items():
        if _nested(v):
            groups.append((str(k), {k: v}))
        else:
            if not scalars:
                groups.append((DETAILS, scalars))  # the scalars' group sits where the first of them does
            scalars[k] = v
    groups.sort(key=lambda g: g[0] not in named)  # stable: what the call changed first
    out = []
    for name, fields in groups:
        slot = slot_key(subject, name.replace("_", " "))
        if slot is not None:
            out.append(StateGroup(slot, _value(fields), fields))
    return out


__all__ = ["DETAILS", "StateGroup", "canonical", "object_subject", "state_groups"]
