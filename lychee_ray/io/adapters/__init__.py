"""Input adapters: every supported format → :class:`~lychee_ray.core.conversation.Conversation`.

Every format is one :class:`~.adapter.Adapter` object (name, suffixes, content sniffing, counting,
reading) in its own module, registered in one registry (:mod:`.registry`); :mod:`.detect` tells
which format an input is and refuses inputs that cannot be built (before a build starts). Chat and agent logs: ``openai`` (chat completions), ``anthropic``
(Messages), ``chatgpt`` (data export); datasets: ``locomo``, ``longmemeval``; canonical: ``jsonl``,
``parquet``.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Iterator

from lychee_ray.io.adapters.base import AdapterItem, InputIssue, dedupe_conversations, list_input_files
from lychee_ray.io.adapters.detect import InputError, InputSurvey, detect_format, survey_input
from lychee_ray.io.adapters.jsonl import read_jsonl
from lychee_ray.io.adapters.locomo import read_locomo
from lychee_ray.io.adapters.longmemeval import read_longmemeval
from lychee_ray.io.adapters.objects import read_objects
from lychee_ray.io.adapters.parquet import read_parquet
from lychee_ray.io.adapters.registry import adapter, adapters, format_names

# Every format, in detection order (the CLI's --format choices).
FORMATS = format_names()
# File suffixes each format reads from a directory.
SUFFIXES: dict[str, tuple[str, ...]] = {a.name: a.suffixes for a in adapters()}


def read_input(fmt: str, path: str | Path) -> Iterator[AdapterItem]:
    """Read ``path`` (a file or directory) in ``fmt``; duplicate conversation ids become issues."""
    return dedupe_conversations(adapter(fmt).read(path))


def input_files(fmt: str, path: str | Path) -> list[str]:
    """The files ``read_input(fmt, path)`` would read, in order."""
    return list_input_files(path, adapter(fmt).suffixes)


__all__ = ["AdapterItem", "FORMATS", "InputError", "InputIssue", "InputSurvey", "SUFFIXES", "detect_format", "input_files",
           "read_input", "read_jsonl", "read_locomo", "read_longmemeval", "read_objects", "read_parquet", "survey_input"]
