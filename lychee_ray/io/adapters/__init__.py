"""Input adapters: canonical JSONL, LoCoMo and LongMemEval → :class:`~lychee_ray.core.conversation.Conversation`.

:mod:`.detect` tells which format an input is and refuses inputs that cannot be built (before a build starts).
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Iterator

from lychee_ray.io.adapters import jsonl, locomo, longmemeval, parquet
from lychee_ray.io.adapters.base import AdapterItem, InputIssue, dedupe_conversations
from lychee_ray.io.adapters.jsonl import read_jsonl
from lychee_ray.io.adapters.locomo import read_locomo
from lychee_ray.io.adapters.longmemeval import read_longmemeval
from lychee_ray.io.adapters.objects import read_objects
from lychee_ray.io.adapters.parquet import read_parquet

READERS: dict[str, Callable[[str | Path], Iterator[AdapterItem]]] = {
    "jsonl": read_jsonl,
    "locomo": read_locomo,
    "longmemeval": read_longmemeval,
    "parquet": read_parquet,
}
# File suffixes each format reads from a directory.
SUFFIXES: dict[str, tuple[str, ...]] = {
    "jsonl": jsonl.SUFFIXES,
    "locomo": locomo.SUFFIXES,
    "longmemeval": longmemeval.SUFFIXES,
    "parquet": parquet.SUFFIXES,
}
FORMATS = tuple(READERS)


def read_input(fmt: str, path: str | Path) -> Iterator[AdapterItem]:
    """Read ``path`` (a file or directory) in ``fmt``; duplicate conversation ids become issues."""
    if fmt not in READERS:
        raise ValueError(f"unknown format {fmt!r}; expected one of {FORMATS}")
    return dedupe_conversations(READERS[fmt](path))


def input_files(fmt: str, path: str | Path) -> list[str]:
    """The files ``read_input(fmt, path)`` would read, in order."""
    from lychee_ray.io.adapters.base import list_input_files

    return list_input_files(path, SUFFIXES[fmt])


from lychee_ray.io.adapters.detect import InputError, InputSurvey, detect_format, survey_input  # noqa: E402 (needs SUFFIXES)

__all__ = ["AdapterItem", "FORMATS", "InputError", "InputIssue", "InputSurvey", "SUFFIXES", "detect_format", "input_files",
           "read_input", "read_jsonl", "read_locomo", "read_longmemeval", "read_objects", "read_parquet", "survey_input"]
