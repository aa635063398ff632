"""Conversations given as Python objects (:class:`Conversation` or canonical dicts) → adapter items.

They go through the same cleaning, repair and validation as a JSONL line, so a conversation built
from Python behaves exactly like the same conversation read from a file; the "file" of each item is
``<python>`` and its "line" the position in the iterable (1-based), for error reports.
"""

from __future__ import annotations

from typing import Any
from collections.abc import Iterable, Iterator

from lychee_ray.core.conversation import Conversation
from lychee_ray.io.adapters.base import AdapterItem, InputIssue, canonical_item, dedupe_conversations

SOURCE_NAME = "<python>"


def read_objects(conversations: Iterable[Conversation | dict[str, Any]]) -> Iterator[AdapterItem]:
    """One item per conversation object; duplicate ids and unusable objects become issues, never raise."""

    def items() -> Iterator[AdapterItem]:
        for i, obj in enumerate(conversations, start=1):
            if isinstance(obj, Conversation):
                obj = obj.model_dump(mode="json")
            if not isinstance(obj, dict):
                issue = InputIssue(SOURCE_NAME, f"expected a Conversation or a dict, got {type(obj).__name__}", line=i)
                yield AdapterItem(file=SOURCE_NAME, line=i, issues=[issue])
                continue
            yield canonical_item(obj, SOURCE_NAME, i)

    return dedupe_conversations(items())
