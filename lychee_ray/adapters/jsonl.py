"""Canonical JSONL input: one :class:`~lychee_ray.models.Conversation` object per line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Iterator

from pydantic import ValidationError

from ..models import Conversation
from .base import AdapterItem, InputIssue, issues_from_validation, list_input_files, open_input

SUFFIXES = (".jsonl", ".ndjson")

def read_jsonl_file(path: str | Path) -> Iterator[AdapterItem]:
    """Validate each line; a bad line becomes an issue and the next line is still read."""
    f = str(path)
    with open_input(path) as fh:
        for lineno, raw in enumerate(fh, start=1):
            if not raw.strip():
                continue
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                yield AdapterItem(f, lineno, issues=[InputIssue(f, f"invalid UTF-8 at byte {e.start}", line=lineno)])
                continue
            try:
                obj = json.loads(text)
            except json.JSONDecodeError as e:
                msg = f"malformed JSON: {e.msg} at column {e.colno}"
                yield AdapterItem(f, lineno, issues=[InputIssue(f, msg, line=lineno)])
                continue
            if not isinstance(obj, dict):
                yield AdapterItem(f, lineno, issues=[InputIssue(f, "line is not a JSON object", line=lineno)])
                continue
            cid = obj.get("conversation_id") if isinstance(obj.get("conversation_id"), str) else None
            try:
                conv = Conversation.model_validate(obj)
            except ValidationError as e:
                yield AdapterItem(f, lineno, issues=issues_from_validation(e, f, lineno, cid))
                continue
            yield AdapterItem(f, lineno, conversation=conv)


def read_jsonl(path: str | Path) -> Iterator[AdapterItem]:
    """All ``*.jsonl`` files under ``path`` (or the file itself)."""
    for file in list_input_files(path, SUFFIXES):
        yield from read_jsonl_file(file)
