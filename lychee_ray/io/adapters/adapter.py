"""What an input format is: one :class:`Adapter` object (name, suffixes, content sniffing,
counting, reading). Each format module defines its own; :mod:`.registry` registers them."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

from lychee_ray.io.adapters.base import AdapterItem
from lychee_ray.io.adapters.documents import count_objects
from lychee_ray.io.adapters.units import Unit

Sniff = Callable[[dict[str, Any] | None, str], bool]


@dataclass(frozen=True)
class Adapter:
    """One input format.

    ``unit``: what one ``read`` takes (:mod:`.units`): ``file`` — each file stands alone, and a
    folder is read file by file (its own files, not its subfolders'); ``folder`` — the files of one
    folder (subfolders included) together make its conversations, and an input is one such folder
    or a folder of them. ``read(unit)`` and ``count(unit)`` get one unit (a folder format's readers
    open its files with :func:`~.units.folder_files` / :func:`~.units.join`).
    ``sniff(first_object, head_text)``: whether a file is of this format, from its first JSON
    object (None when the first bytes hold no whole object) and its first characters (a folder
    format: of the file that speaks for its folder, the first of its suffixes in name order);
    ``magic``: leading bytes that decide alone (Parquet); ``count(unit)``: conversations one unit
    holds (unreadable content counts one: the build reports it)."""

    name: str
    title: str
    suffixes: tuple[str, ...]
    read: Callable[[str | Path], Iterator[AdapterItem]]
    sniff: Sniff
    count: Callable[[str], int] = count_objects
    magic: bytes | None = None
    # chat / agent logs: message lists with tool traffic and no QA of their own (evaluation derives
    # its questions from the tool traffic)
    agent_log: bool = False
    unit: Unit = "file"


def never(obj: dict[str, Any] | None, head: str) -> bool:
    """A format no content sniffing recognises (one told by its ``magic`` bytes)."""
    return False


def has_messages(obj: dict[str, Any] | None) -> bool:
    """The object holds a ``messages`` list (the chat and agent log formats)."""
    return obj is not None and isinstance(obj.get("messages"), list)


__all__ = ["Adapter", "Sniff", "has_messages", "never"]
