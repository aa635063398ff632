"""The one registry of input formats: detection, ``convert``, the builds (local and Ray), the
evaluation and the CLI all read it.

An :class:`Adapter` names a format and says how to recognise, count and read it. Adding a format
is one module with a reader and a recogniser plus one :func:`register` call below; the order of
registration is the order in which content is tried when a format is detected (most specific
first: a chat log must not be read as a LoCoMo file because one of its messages says
"conversation").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

from lychee_ray.io.adapters import anthropic_messages, chat_completions, chatgpt_export, jsonl, locomo, longmemeval, parquet
from lychee_ray.io.adapters.base import AdapterItem, open_input
from lychee_ray.io.adapters.documents import count_objects, first_object

Sniff = Callable[[dict[str, Any] | None, str], bool]


@dataclass(frozen=True)
class Adapter:
    """One input format.

    ``sniff(first_object, head_text)``: whether a file is of this format, from its first JSON
    object (None when the first bytes hold no whole object) and its first characters;
    ``magic``: leading bytes that decide alone (Parquet); ``count(file)``: conversations one file
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


_REGISTRY: dict[str, Adapter] = {}


def register(adapter: Adapter) -> Adapter:
    """Add a format (detection tries formats in registration order)."""
    if adapter.name in _REGISTRY:
        raise ValueError(f"format {adapter.name!r} is registered twice")
    _REGISTRY[adapter.name] = adapter
    return adapter


def adapters() -> list[Adapter]:
    """Every registered format, in detection order."""
    return list(_REGISTRY.values())


def adapter(name: str) -> Adapter:
    """The format called ``name``; ValueError naming the known ones otherwise."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown format {name!r}; expected one of {tuple(_REGISTRY)}") from None


def format_names() -> tuple[str, ...]:
    return tuple(_REGISTRY)


# -- recognisers ------------------------------------------------------------------------------------

_SYSTEM_KEY = re.compile(r'"system"\s*:\s*["\[]')  # a top-level system prompt, not a role value


def _messages(obj: dict[str, Any] | None) -> bool:
    return obj is not None and isinstance(obj.get("messages"), list)


def _sniff_canonical(obj: dict[str, Any] | None, head: str) -> bool:
    if obj is not None:
        return "sessions" in obj
    return '"sessions"' in head and '"conversation_id"' in head


def _sniff_chatgpt(obj: dict[str, Any] | None, head: str) -> bool:
    if obj is not None:
        return isinstance(obj.get("mapping"), dict)
    return '"mapping"' in head and ('"current_node"' in head or '"author"' in head)


def _sniff_anthropic(obj: dict[str, Any] | None, head: str) -> bool:
    if obj is not None:
        return _messages(obj) and chat_completions.looks_anthropic(obj)
    return '"messages"' in head and ('"tool_use"' in head or '"tool_result"' in head or bool(_SYSTEM_KEY.search(head)))


def _sniff_openai(obj: dict[str, Any] | None, head: str) -> bool:
    if obj is not None:
        return _messages(obj)
    return '"messages"' in head and '"role"' in head


def _sniff_longmemeval(obj: dict[str, Any] | None, head: str) -> bool:
    return '"haystack_sessions"' in head or '"haystack_session_ids"' in head


def _sniff_locomo(obj: dict[str, Any] | None, head: str) -> bool:
    return '"session_1"' in head or '"sample_id"' in head or '"conversation"' in head


def _never(obj: dict[str, Any] | None, head: str) -> bool:
    return False


def _count_parquet(path: str) -> int:
    import pyarrow.parquet as pq  # delays pyarrow's load to a Parquet input

    try:
        return pq.ParquetFile(open_input(path)).metadata.num_rows
    except Exception:  # noqa: BLE001 — a corrupt file is reported by the build, not here
        return 1


register(Adapter("jsonl", "JSONL", jsonl.SUFFIXES, jsonl.read_jsonl, _sniff_canonical))
register(Adapter("parquet", "Parquet", parquet.SUFFIXES, parquet.read_parquet, _never, _count_parquet, magic=b"PAR1"))
register(Adapter(chatgpt_export.NAME, "ChatGPT export", chatgpt_export.SUFFIXES, chatgpt_export.read_chatgpt, _sniff_chatgpt,
                 agent_log=True))
register(Adapter(anthropic_messages.NAME, "Anthropic Messages", anthropic_messages.SUFFIXES,
                 anthropic_messages.read_anthropic, _sniff_anthropic, agent_log=True))
register(Adapter(chat_completions.NAME, "OpenAI chat-completion", chat_completions.SUFFIXES,
                 chat_completions.read_chat_completions, _sniff_openai, agent_log=True))
register(Adapter("longmemeval", "LongMemEval JSON", longmemeval.SUFFIXES, longmemeval.read_longmemeval, _sniff_longmemeval))
register(Adapter("locomo", "LoCoMo", locomo.SUFFIXES, locomo.read_locomo, _sniff_locomo))


def sniff(head: bytes) -> str | None:
    """The format a file's first bytes show, or None (see :class:`Adapter`)."""
    for a in _REGISTRY.values():
        if a.magic is not None and head.startswith(a.magic):
            return a.name
    text = head.decode("utf-8", errors="replace").lstrip("\ufeff \t\r\n")
    if not text.startswith(("{", "[")):
        return None
    obj = first_object(head)
    for a in _REGISTRY.values():
        if a.sniff(obj, text):
            return a.name
    return None


__all__ = ["Adapter", "adapter", "adapters", "format_names", "register", "sniff"]
