"""The one registry of input formats: detection, ``convert``, the builds (local and Ray), the
evaluation and the CLI all read it.

Every format is one :class:`~.adapter.Adapter` object (name, suffixes, content sniffing, counting,
reading, input unit) defined in its own module. Adding a format is one module with its ``ADAPTER`` plus one
entry in the registrations below; the order of the entries is the order in which content is tried
when a format is detected (most specific first: a chat log must not be read as a LoCoMo file
because one of its messages says "conversation").
"""

from __future__ import annotations

from lychee_ray.io.adapters.anthropic_messages import ADAPTER as ANTHROPIC
from lychee_ray.io.adapters.beam import ADAPTER as BEAM
from lychee_ray.io.adapters.chat_completions import ADAPTER as OPENAI
from lychee_ray.io.adapters.chatgpt_export import ADAPTER as CHATGPT
from lychee_ray.io.adapters.jsonl import ADAPTER as JSONL
from lychee_ray.io.adapters.locomo import ADAPTER as LOCOMO
from lychee_ray.io.adapters.longmemeval import ADAPTER as LONGMEMEVAL
from lychee_ray.io.adapters.parquet import ADAPTER as PARQUET
from lychee_ray.io.adapters.adapter import Adapter
from lychee_ray.io.adapters.documents import first_object

_REGISTRY: dict[str, Adapter] = {}


def register(adapter: Adapter) -> Adapter:
    """Add a format (detection tries formats in registration order)."""
    if adapter.name in _REGISTRY:
        raise ValueError(f"format {adapter.name!r} is registered twice")
    _REGISTRY[adapter.name] = adapter
    return adapter


def unregister(name: str) -> Adapter:
    """Remove the format called ``name`` (one registered for a while, e.g. by a test)."""
    return _REGISTRY.pop(name)


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
    """Every registered format's name, in detection order."""
    return tuple(_REGISTRY)


# the registrations, in detection order
for _adapter in (JSONL, PARQUET, BEAM, CHATGPT, ANTHROPIC, OPENAI, LONGMEMEVAL, LOCOMO):
    register(_adapter)


def sniff(head: bytes) -> str | None:
    """The format a file's first bytes show, or None (see :class:`~.adapter.Adapter`)."""
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


__all__ = ["Adapter", "adapter", "adapters", "format_names", "register", "sniff", "unregister"]
