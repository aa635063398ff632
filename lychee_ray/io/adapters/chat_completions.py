"""OpenAI chat-completion logs (``--format openai``): one conversation per JSONL line, or a JSON
array of them, each ``{"messages": [...]}`` plus optional ``conversation_id``/``id``,
``user_id``/``user``, ``started_at``/``created`` (ISO or epoch seconds) and ``metadata``.

Messages: roles ``system``/``developer`` (→ system), ``user``, ``assistant``, ``tool``/``function``
(→ tool); ``content`` a string, null, or a list of parts (text; images as a placeholder line);
assistant ``tool_calls`` (``id``, ``function.name``, ``function.arguments``) and the legacy
``function_call``; tool messages with ``tool_call_id`` (and optional ``name``), legacy ``function``
messages by ``name``. Turn ids are the message's ``id`` when it has one, else ``m<position>``
(1-based, counting every message), so a log that grew re-imports as an append. What is repaired and
warned about: :mod:`lychee_ray.io.adapters.agent_turns` and :mod:`lychee_ray.io.adapters.clean`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from collections.abc import Iterator

from lychee_ray.io.adapters.agent_turns import (MESSAGE_ROLES, ToolLinker, arguments_text, content_text,
                                               message_list_mismatch, message_log_item)
from lychee_ray.io.adapters.base import AdapterItem
from lychee_ray.io.adapters.adapter import Adapter, has_messages
from lychee_ray.io.adapters.documents import read_objects_as

NAME = "openai"
SUFFIXES = (".jsonl", ".ndjson", ".json")
# keys of a chat-completion conversation object (anything else is kept in meta, with a warning)
_KNOWN = {"messages", "conversation_id", "id", "user_id", "user", "started_at", "created", "metadata", "model"}


def turn_id_of(message: dict[str, Any], position: int) -> str:
    """A message's turn id: its own ``id``, else its 1-based position (``m3``)."""
    mid = message.get("id")
    return str(mid) if isinstance(mid, (str, int)) and str(mid).strip() else f"m{position}"


def recognise(obj: dict[str, Any]) -> str | None:
    """None when ``obj`` reads as a chat-completion conversation, else what it looks like."""
    mismatch = message_list_mismatch(obj, "chat-completion")
    if mismatch is not None:
        return mismatch
    if looks_anthropic(obj):
        return "an Anthropic Messages conversation (--format anthropic)"
    return None


def looks_anthropic(obj: dict[str, Any]) -> bool:
    """Anthropic's shape: a top-level ``system``, or ``tool_use`` / ``tool_result`` content blocks."""
    if "system" in obj:
        return True
    for m in obj.get("messages") or []:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list) and any(isinstance(b, dict) and b.get("type") in ("tool_use", "tool_result")
                                             for b in content):
            return True
    return False


def convert_conversation(obj: dict[str, Any], file: str, line: int) -> AdapterItem:
    """One chat-completion conversation object → an adapter item (conversation + warnings)."""
    warnings: list[tuple[str, str]] = []
    linker = ToolLinker(warnings)
    turns: list[dict[str, Any]] = []
    messages = obj["messages"]
    for pos, m in enumerate(messages, start=1):
        where = f"messages.{pos - 1}"
        if not isinstance(m, dict):
            turns.append(m)  # validation reports it, naming the turn
            continue
        tid = turn_id_of(m, pos)
        raw_role = m.get("role")
        role = MESSAGE_ROLES.get(raw_role.strip().lower(), raw_role) if isinstance(raw_role, str) else raw_role
        turn: dict[str, Any] = {"turn_id": tid, "role": role, "content": content_text(m.get("content"), f"{where}.content",
                                                                                      warnings)}
        name = m.get("name") if isinstance(m.get("name"), str) else None
        if role == "assistant":
            calls = _calls(m, tid, where, warnings)
            for c in calls:
                linker.call(tid, c["call_id"], c["name"])
            if calls:
                turn["tool_calls"] = calls
                if turn["content"] is None:
                    turn["content"] = ""  # a turn that only calls tools: nothing to warn about
            if name:
                turn["speaker"] = name
        elif role == "tool":
            call_id = m.get("tool_call_id") if isinstance(m.get("tool_call_id"), str) else None
            call_id, tool = linker.result(tid, call_id, name)
            turn.update({k: v for k, v in (("tool_call_id", call_id), ("tool_name", tool)) if v})
        elif name:
            turn["speaker"] = name
        for key in ("timestamp", "created_at"):
            if m.get(key) is not None:
                turn["timestamp"] = m[key]
                break
        extra = {k: v for k, v in m.items() if k not in ("id", "role", "content", "name", "tool_calls", "function_call",
                                                       "tool_call_id", "timestamp", "created_at")}
        if extra:
            turn["meta"] = extra
        turns.append(turn)
    linker.finish()
    return message_log_item(obj, turns, warnings, file, line, _KNOWN, messages[:3])


def _calls(m: dict[str, Any], tid: str, where: str, warnings: list[tuple[str, str]]) -> list[dict[str, str]]:
    """An assistant message's tool calls (``tool_calls``, or the legacy ``function_call``) as ToolCall dicts."""
    out: list[dict[str, str]] = []
    raw = m.get("tool_calls") or []
    if isinstance(m.get("function_call"), dict):
        raw = [*raw, {"id": f"{tid}.function_call", "function": m["function_call"]}]
    for i, c in enumerate(raw if isinstance(raw, list) else []):
        fn = c.get("function") if isinstance(c, dict) else None
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str) or not fn["name"].strip():
            warnings.append((f"{where}.tool_calls.{i}", "tool call without a function name (kept as text)"))
            out.append({"call_id": f"{tid}.call{i + 1}", "name": "unknown_tool",
                        "arguments": arguments_text(c, f"{where}.tool_calls.{i}", [])})
            continue
        cid = c.get("id") if isinstance(c.get("id"), str) and c["id"].strip() else f"{tid}.call{i + 1}"
        out.append({"call_id": cid, "name": fn["name"],
                    "arguments": arguments_text(fn.get("arguments"), f"{where}.tool_calls.{i}.function.arguments", warnings)})
    return out


def read_chat_completions(path: str | Path) -> Iterator[AdapterItem]:
    """Chat-completion conversations in the files under ``path`` (JSONL lines or JSON arrays)."""
    return read_objects_as(path, SUFFIXES, recognise, convert_conversation, "chat-completion (--format openai)")


def sniff(obj: dict[str, Any] | None, head: str) -> bool:
    """OpenAI chat completions: any other ``messages`` list."""
    if obj is not None:
        return has_messages(obj)
    return '"messages"' in head and '"role"' in head


ADAPTER = Adapter(NAME, "OpenAI chat-completion", SUFFIXES, read_chat_completions, sniff, agent_log=True)


__all__ = [
    "ADAPTER", "sniff", "NAME", "SUFFIXES", "convert_conversation", "looks_anthropic", "read_chat_completions",
    "recognise", "turn_id_of",
]
