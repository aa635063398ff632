"""Input adapters: every supported format → :class:`~lychee_ray.core.conversation.Conversation`.

Every format is one :class:`~.adapter.Adapter` object (name, suffixes, content sniffing, counting,
reading, and its input unit: a file, or a folder whose files together make conversations —
:mod:`.units`) in its own module, registered in one registry (:mod:`.registry`); :mod:`.detect` tells
which format an input is and refuses inputs that cannot be built (before a build starts). Chat and
agent logs: ``openai`` (chat completions), ``anthropic`` (Messages), ``chatgpt`` (data export);
datasets: ``locomo``, ``longmemeval``, ``beam`` (a folder per conversation); canonical: ``jsonl``,
``parquet``.
"""

from __future__ import annotations

from pathlib import Path
from collections.abc import Iterator

from lychee_ray.io.adapters.base import AdapterItem, InputIssue, dedupe_conversations
from lychee_ray.io.adapters.detect import InputError, InputSurvey, detect_format, survey_input
from lychee_ray.io.adapters.jsonl import read_jsonl
from lychee_ray.io.adapters.locomo import read_locomo
from lychee_ray.io.adapters.longmemeval import read_longmemeval
from lychee_ray.io.adapters.objects import read_objects
from lychee_ray.io.adapters.parquet import read_parquet
from lychee_ray.io.adapters.registry import adapter, adapters, format_names
from lychee_ray.io.adapters.units import list_units

# Every format registered with the package, in detection order (formats registered later, e.g. by a
# test, are in registry.format_names()).
FORMATS = format_names()
# File suffixes each format reads.
SUFFIXES: dict[str, tuple[str, ...]] = {a.name: a.suffixes for a in adapters()}


def input_units(fmt: str, path: str | Path) -> list[str]:
    """The units ``read_input(fmt, path)`` reads, in order: files, or folders for a folder format
    (:mod:`.units`); FileNotFoundError when ``path`` does not exist."""
    a = adapter(fmt)
    return list_units(path, a.suffixes, a.unit)


def read_unit(fmt: str, unit: str) -> Iterator[AdapterItem]:
    """The items of one unit, duplicate conversation ids in it become issues (what the Ray build's
    read task calls for each of its rows)."""
    return dedupe_conversations(adapter(fmt).read(unit))


def read_input(fmt: str, path: str | Path) -> Iterator[AdapterItem]:
    """Read ``path`` (a file, a folder of files, a folder unit or a folder of them) in ``fmt``, unit
    by unit; duplicate conversation ids become issues."""

    def items() -> Iterator[AdapterItem]:
        read = adapter(fmt).read
        for unit in input_units(fmt, path):
            yield from read(unit)

    return dedupe_conversations(items())


__all__ = ["AdapterItem", "FORMATS", "InputError", "InputIssue", "InputSurvey", "SUFFIXES", "detect_format", "input_units",
           "read_input", "read_unit", "read_jsonl", "read_locomo", "read_longmemeval", "read_objects", "read_parquet", "survey_input"]
