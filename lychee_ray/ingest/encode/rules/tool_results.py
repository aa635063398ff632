"""A tool call and its result as record text (the ``rules`` backend's agent records, :mod:`.agent`).

JSON is written compactly with its keys (:func:`render`) and split into record-sized chunks by
fields and list items (:func:`result_chunks`, :func:`state_chunks` for an object's state by field
group); other text by sentences. A result that reports a failure is recognised by its source's
flag, an error word or an error key (:func:`is_error_result`); a call is led by its identifying
arguments (:func:`short_signature`).
"""

from __future__ import annotations

import json
import re
from typing import Any
from collections.abc import Iterator

from lychee_ray.core.tools import ToolCall
from lychee_ray.ingest.encode.base import SegmentTurn
from lychee_ray.ingest.encode.rules.object_state import StateGroup
from lychee_ray.text.sentences import split_sentences

# A tool result that reports a failure.
_ERROR_TEXT = re.compile(r"^\s*(?:error|exception|failed|failure|traceback)\b", re.I)
_ERROR_KEYS = ("error", "errors", "error_message", "exception")
_SPACES = re.compile(r"\s+")


def one_line(text: str) -> str:
    return _SPACES.sub(" ", text).strip()


def cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters at a word boundary (marked with …)."""
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit(" ", 1)[0]
    return (head or text[:limit]) + " …"


def _key(k: Any) -> str:
    """A JSON key as a record says it: ``created_at`` → ``created at``; a key that is itself an id
    (``credit_card_4421486``: it has digits) stays verbatim."""
    s = str(k)
    return s if any(c.isdigit() for c in s) else s.replace("_", " ")


def render(value: Any) -> str:
    """A JSON value written compactly with its keys: ``a: 1, b: (c: 2)``, lists as ``x; y``."""
    if isinstance(value, dict):
        return ", ".join(f"{_key(k)}: {render(v) if not isinstance(v, dict) else '(' + render(v) + ')'}"
                         for k, v in value.items())
    if isinstance(value, list):
        return "; ".join(render(v) if not isinstance(v, list) else " + ".join(render(x) for x in v) for v in value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _items(value: Any, split_chars: int, prefix: str = "") -> Iterator[str]:
    """The parts of a JSON value that can stand as one record each: top-level fields (one whose
    rendering is longer than ``split_chars`` split into its own items), list elements."""
    if isinstance(value, dict):
        for k, v in value.items():
            key = f"{prefix}{_key(k)}"
            if isinstance(v, (dict, list)) and v and len(render(v)) > split_chars:
                yield from _items(v, split_chars, f"{key} ")
            else:
                yield f"{key}: {render(v)}"
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield f"{prefix}{i + 1}: {render(v)}" if prefix else render(v)
    else:
        yield f"{prefix}{render(value)}"


def result_chunks(text: str, limit: int, max_chunks: int) -> list[str]:
    """A tool result as at most ``max_chunks`` texts of at most ``limit`` characters: JSON split by
    fields and list items (packed while they fit), other text by sentences. The last chunk says
    how many items did not fit."""
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, TypeError):
        value = None
    # a field longer than half a record is split (so that a record holds a few whole fields)
    parts = list(_items(value, limit // 2)) if isinstance(value, (dict, list)) else [s for s in split_sentences(one_line(text)) if s]
    return _pack(parts, limit, max_chunks)


def state_chunks(groups: list[StateGroup], limit: int, max_chunks: int) -> list[tuple[str, StateGroup]]:
    """An object's state (:func:`~.object_state.state_groups`) as at most ``max_chunks`` texts of
    at most ``limit`` characters, each holding fields of one group only (its slot), with its group."""
    out: list[tuple[str, StateGroup]] = []
    for i, g in enumerate(groups):
        left = max_chunks - len(out)
        if left <= 0:
            more = sum(len(x.fields) for x in groups[i:])
            out[-1] = (cut(out[-1][0], max(20, limit - 24)) + f" (and {more} more)", out[-1][1])
            break
        out.extend((c, g) for c in _pack(list(_items(g.fields, limit // 2)), limit, left))
    return out


def _pack(parts: list[str], limit: int, max_chunks: int) -> list[str]:
    """``parts`` packed in order into texts of at most ``limit`` characters (``; ``-joined), at most
    ``max_chunks`` of them; the last one says how many parts did not fit."""
    chunks: list[str] = []
    cur = ""
    for i, p in enumerate(parts):
        p = cut(one_line(p), limit)
        if cur and len(cur) + 2 + len(p) > limit:
            chunks.append(cur)
            cur = ""
            if len(chunks) == max_chunks:
                left = len(parts) - i
                chunks[-1] = cut(chunks[-1], max(20, limit - 24)) + f" (and {left} more)"
                return chunks
        cur = f"{cur}; {p}" if cur else p
    if cur:
        chunks.append(cur)
    return chunks


def is_error_result(turn: SegmentTurn) -> bool:
    """A tool result that reports a failure (marked by its source, or reads as an error)."""
    if turn.is_error:
        return True
    body = result_body(turn)
    if _ERROR_TEXT.match(body):
        return True
    try:
        value = json.loads(body)
    except (json.JSONDecodeError, TypeError):
        return False
    return isinstance(value, dict) and any(value.get(k) for k in _ERROR_KEYS)


def result_body(turn: SegmentTurn) -> str:
    """A tool turn's own output (its rendered text minus the ``name result:`` prefix)."""
    prefix = f"{turn.tool_name or 'tool'} result: "
    return turn.content[len(prefix):] if turn.content.startswith(prefix) else turn.content


def args_text(call: ToolCall) -> str:
    args = call.parsed_arguments()
    if isinstance(args, dict):
        return ", ".join(f"{k}={render(v)}" for k, v in args.items()) or "(none)"  # (argument names verbatim)
    return one_line(call.arguments) or "(none)"


def short_signature(call: ToolCall, max_arg_chars: int) -> str:
    """``name(key=value, …)`` with the scalar arguments that identify the call (ids, codes, dates);
    longer or nested values are shown as ``…`` (the call's tool_affordance record has them all):
    records lead with what identifies a call, not with a booking's payload."""
    args = call.parsed_arguments()
    if not isinstance(args, dict):
        return call.signature() if len(call.arguments) <= max_arg_chars else f"{call.name}(…)"
    shown = [f"{k}={v}" for k, v in args.items()
             if isinstance(v, (str, int, float)) and not isinstance(v, bool) and len(str(v)) <= max_arg_chars]
    more = "…" if len(shown) < len(args) else ""
    return f"{call.name}({', '.join([*shown, more] if shown and more else shown or [more])})"


__all__ = ["args_text", "cut", "is_error_result", "one_line", "render", "result_body", "result_chunks", "short_signature",
           "state_chunks"]
