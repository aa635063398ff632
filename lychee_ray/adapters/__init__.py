"""Input adapters: canonical JSONL, LoCoMo and LongMemEval → :class:`~lychee_ray.models.Conversation`."""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

from .base import AdapterItem, InputIssue, dedupe_conversations
from .jsonl import read_jsonl
from .locomo import read_locomo
from .longmemeval import read_longmemeval

READERS: dict[str, Callable[[str | Path], Iterator[AdapterItem]]] = {
    "jsonl": read_jsonl,
    "locomo": read_locomo,
    "longmemeval": read_longmemeval,
}
FORMATS = tuple(READERS)


def read_input(fmt: str, path: str | Path) -> Iterator[AdapterItem]:
    """Read ``path`` (a file or directory) in ``fmt``; duplicate conversation ids become issues."""
    if fmt not in READERS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    return dedupe_conversations(READERS[fmt](path))


__all__ = ["AdapterItem", "InputIssue", "FORMATS", "read_input", "read_jsonl", "read_locomo", "read_longmemeval"]
