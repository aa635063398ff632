"""Canonical JSONL input: one :class:`~lychee_ray.core.conversation.Conversation` object per line.

A line that cannot be read (malformed or truncated JSON, not an object) is one error naming
``file:line`` (and the conversation id when it can still be seen in the raw text); the next line
is read as usual. Invalid UTF-8 is replaced (U+FFFD) and a leading BOM dropped; raw control
characters inside JSON strings are accepted and then cleaned; every other repair is described in
:mod:`lychee_ray.io.adapters.clean` and reported as a warning.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from lychee_ray.io.adapters.adapter import Adapter
from lychee_ray.io.adapters.base import AdapterItem, InputIssue, canonical_item, decode_text, list_input_files, open_input

SUFFIXES = (".jsonl", ".ndjson")

_RAW_ID = re.compile(r'"conversation_id"\s*:\s*"((?:[^"\\]|\\.){1,200})"')


def _raw_conversation_id(text: str) -> str | None:
    """Best-effort conversation id of a line that is not valid JSON (for the error report)."""
    m = _RAW_ID.search(text[:4096])
    if not m:
        return None
    try:
        return json.loads(f'"{m.group(1)}"')
    except json.JSONDecodeError:
        return m.group(1)


def read_jsonl_file(path: str | Path) -> Iterator[AdapterItem]:
    """Validate each line; a bad line becomes an issue and the next line is still read."""
    f = str(path)
    with open_input(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            text, issues = decode_text(raw, f, lineno)
            text = text.rstrip("\r\n")
            try:
                # strict=False: raw control characters inside strings are read (and cleaned later)
                obj = json.loads(text, strict=False)
            except json.JSONDecodeError as e:
                truncated = e.pos >= len(text.rstrip()) or e.msg.startswith("Unterminated")
                msg = f"malformed JSON: {e.msg}: column {e.pos + 1}" + (" (the line ends early: truncated?)" if truncated else "")
                cid = _raw_conversation_id(text)
                yield AdapterItem(f, lineno, issues=[*issues, InputIssue(f, msg, line=lineno, conversation_id=cid)])
                continue
            if not isinstance(obj, dict):
                yield AdapterItem(f, lineno, issues=[*issues, InputIssue(f, "line is not a JSON object", line=lineno)])
                continue
            yield canonical_item(obj, f, lineno, issues)


def read_jsonl(path: str | Path) -> Iterator[AdapterItem]:
    """All ``*.jsonl`` files under ``path`` (or the file itself)."""
    for file in list_input_files(path, SUFFIXES):
        yield from read_jsonl_file(file)


def sniff(obj: dict[str, Any] | None, head: str) -> bool:
    """A canonical conversation: a first object with ``sessions``."""
    if obj is not None:
        return "sessions" in obj
    return '"sessions"' in head and '"conversation_id"' in head


ADAPTER = Adapter("jsonl", "JSONL", SUFFIXES, read_jsonl, sniff)
