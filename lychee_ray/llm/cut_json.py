"""The complete parts of a JSON object whose text was cut off (a reply cut at the token limit).

A reply cut at ``max_completion_tokens`` is a prefix of a JSON object. :func:`read_cut_object` walks
that prefix with :meth:`json.JSONDecoder.raw_decode` (which decodes one value and says where it
ended) and keeps only what was written whole: the members of the top-level object that ended
before the cut and, of the one array member named, every element that ended before the cut. The
element the cut fell in is left out, never completed: libraries that repair partial JSON
(``partial-json-parser``, ``json-repair``, ``jiter``'s partial mode) close the cut string or object,
which turns ``{"text": "Anna moved to Par`` into a valid-looking value.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = " \t\n\r"


@dataclass(frozen=True)
class CutObject:
    """What a cut JSON object's text holds whole."""

    # top-level members whose value ended before the cut (the named array is in ``items`` instead)
    members: dict[str, Any] = field(default_factory=dict)
    # the complete elements of the named array member, in order
    items: list[Any] = field(default_factory=list)
    # the named array's closing bracket was read: ``items`` is the whole array
    array_closed: bool = False


def _skip(text: str, i: int) -> int:
    while i < len(text) and text[i] in _SPACE:
        i += 1
    return i


def _value(text: str, i: int) -> tuple[Any, int] | None:
    """The value starting at ``i`` and the index after it, or None when the cut falls inside it. A
    number that ends the text may be cut too (``12`` of ``123``), so it does not count as whole."""
    try:
        value, end = _DECODER.raw_decode(text, i)
    except json.JSONDecodeError:
        return None
    if end >= len(text) and isinstance(value, (int, float)) and not isinstance(value, bool):
        return None
    return value, end


def _body(text: str) -> str:
    """The text without a leading Markdown fence line (a cut reply never reaches its closing fence)."""
    body = text.strip()
    if body.startswith("```"):
        newline = body.find("\n")
        body = body[newline + 1:] if newline >= 0 else ""
    return body.removesuffix("```").rstrip()


def read_cut_object(text: str, array_key: str) -> CutObject:
    """The members of the JSON object in ``text`` written whole, with the complete elements of its
    array member ``array_key``; an empty :class:`CutObject` when ``text`` does not start an object."""
    body = _body(text)
    i = _skip(body, 0)
    members: dict[str, Any] = {}
    items: list[Any] = []
    closed = False
    if not body.startswith("{", i):
        return CutObject()
    i += 1
    while True:
        i = _skip(body, i)
        if i >= len(body) or body[i] == "}":
            break
        if body[i] == ",":
            i += 1
            continue
        key = _value(body, i)
        if key is None or not isinstance(key[0], str):
            break
        name, i = key
        i = _skip(body, i)
        if not body.startswith(":", i):
            break
        i = _skip(body, i + 1)
        if name == array_key and body.startswith("[", i):
            i, closed = _read_array(body, i + 1, items)
            if not closed:
                break
            continue
        value = _value(body, i)
        if value is None:
            break
        members[name], i = value
    return CutObject(members, items, closed)


def _read_array(body: str, i: int, items: list[Any]) -> tuple[int, bool]:
    """Append the complete elements from ``i`` (just after ``[``) to ``items``; returns the index
    after the array and True, or where the cut fell and False."""
    while True:
        i = _skip(body, i)
        if i >= len(body):
            return i, False
        if body[i] == "]":
            return i + 1, True
        if body[i] == ",":
            i += 1
            continue
        value = _value(body, i)
        if value is None:
            return i, False
        item, i = value
        items.append(item)


__all__ = ["CutObject", "read_cut_object"]
