"""Anthropic Messages logs (``--format anthropic``): one conversation per JSONL line, or a JSON
array of them: a top-level ``system`` (a string or text blocks), ``messages`` of ``user`` /
``assistant`` turns whose content is a string or a list of blocks, plus the same optional
``conversation_id``/``id``, ``user_id``, ``started_at``/``created`` and ``metadata`` as
``--format openai``.

Blocks: ``text``; ``image`` / ``document`` (placeholder lines); ``tool_use`` (``id``, ``name``,
``input``) → a tool call on the assistant turn; ``tool_result`` (``tool_use_id``, ``content``,
``is_error``) inside a user message → a ``tool`` turn of its own, linked to its call (its id:
the message's id or position plus ``.r<k>``), followed by the message's own text, if any, as the
user turn; ``thinking`` blocks are kept in the turn's meta, not its text. The system prompt is the
conversation's first turn (role ``system``, id ``system``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from lychee_ray.io.adapters.agent_turns import (ToolLinker, arguments_text, content_text, message_list_mismatch,
                                               message_log_item)
from lychee_ray.io.adapters.base import AdapterItem
from lychee_ray.io.adapters.chat_completions import looks_anthropic, turn_id_of
from lychee_ray.io.adapters.adapter import Adapter, has_messages
from lychee_ray.io.adapters.documents import read_objects_as

NAME = "anthropic"
SUFFIXES = (".jsonl", ".ndjson", ".json")
# turn id of the top-level system prompt
SYSTEM_TURN_ID = "system"
_KNOWN = {"messages", "system", "conversation_id", "id", "user_id", "user", "started_at", "created", "metadata", "model"}
_THINKING = ("thinking", "redacted_thinking")


def recognise(obj: dict[str, Any]) -> str | None:
    """None when ``obj`` reads as an Anthropic Messages conversation, else what it looks like."""
    mismatch = message_list_mismatch(obj, "Messages")
    if mismatch is not None:
        return mismatch
    if not looks_anthropic(obj) and any(isinstance(m, dict) and (m.get("tool_calls") or m.get("role") in ("tool", "system"))
                                        for m in obj["messages"]):
        return "an OpenAI chat-completion conversation (--format openai)"
    return None


def convert_conversation(obj: dict[str, Any], file: str, line: int) -> AdapterItem:
    """One Messages conversation object → an adapter item (conversation + warnings)."""
    warnings: list[tuple[str, str]] = []
    linker = ToolLinker(warnings)
    turns: list[dict[str, Any]] = []
    system = content_text(obj.get("system"), "system", warnings)
    if system and system.strip():
        turns.append({"turn_id": SYSTEM_TURN_ID, "role": "system", "content": system})
    messages = obj["messages"]
    for pos, m in enumerate(messages, start=1):
        where = f"messages.{pos - 1}"
        if not isinstance(m, dict):
            turns.append(m)
            continue
        tid = turn_id_of(m, pos)
        role = m.get("role")
        content = m.get("content")
        blocks = [content] if isinstance(content, dict) else content if isinstance(content, list) else None
        if blocks is None:
            turns.append({"turn_id": tid, "role": role, "content": content})
            continue
        texts: list[Any] = []
        calls: list[dict[str, str]] = []
        results = 0
        thinking: list[str] = []
        for k, b in enumerate(blocks):
            kind = b.get("type") if isinstance(b, dict) else None
            if kind == "tool_use":
                cid = b.get("id") if isinstance(b.get("id"), str) and b["id"].strip() else f"{tid}.call{len(calls) + 1}"
                name = b.get("name") if isinstance(b.get("name"), str) and b["name"].strip() else "unknown_tool"
                calls.append({"call_id": cid, "name": name,
                              "arguments": arguments_text(b.get("input"), f"{where}.content.{k}.input", warnings)})
                linker.call(tid, cid, name)
            elif kind == "tool_result":
                results += 1
                rid = f"{tid}.r{results}"
                call_id, tool = linker.result(rid, b.get("tool_use_id") if isinstance(b.get("tool_use_id"), str) else None,
                                              None)
                result: dict[str, Any] = {"turn_id": rid, "role": "tool",
                                          "content": content_text(b.get("content"), f"{where}.content.{k}", warnings) or ""}
                result.update({k2: v for k2, v in (("tool_call_id", call_id), ("tool_name", tool)) if v})
                if b.get("is_error"):
                    result["meta"] = {"is_error": True}
                turns.append(result)
            elif kind in _THINKING:
                thinking.append(str(b.get("thinking") or b.get("data") or ""))
            else:
                texts.append(b)
        text = (content_text(texts, f"{where}.content", warnings) or "") if texts else ""  # (a list: never None)
        if calls or text.strip() or not results:  # (a message of tool results only is those turns)
            turn: dict[str, Any] = {"turn_id": tid, "role": role, "content": text}
            if calls:
                turn["tool_calls"] = calls
            if thinking:
                turn["meta"] = {"thinking": thinking}
            turns.append(turn)
    linker.finish()
    return message_log_item(obj, turns, warnings, file, line, _KNOWN, [json.dumps(obj.get("system"), ensure_ascii=False), *messages[:2]])


def read_anthropic(path: str | Path) -> Iterator[AdapterItem]:
    """Anthropic Messages conversations in the files under ``path`` (JSONL lines or JSON arrays)."""
    return read_objects_as(path, SUFFIXES, recognise, convert_conversation, "Anthropic Messages (--format anthropic)")


_SYSTEM_KEY = re.compile(r'"system"\s*:\s*["\[]')  # a top-level system prompt, not a role value


def sniff(obj: dict[str, Any] | None, head: str) -> bool:
    """Anthropic Messages: ``messages`` with a top-level ``system`` or ``tool_use`` / ``tool_result`` blocks."""
    if obj is not None:
        return has_messages(obj) and looks_anthropic(obj)
    return '"messages"' in head and ('"tool_use"' in head or '"tool_result"' in head or bool(_SYSTEM_KEY.search(head)))


ADAPTER = Adapter(NAME, "Anthropic Messages", SUFFIXES, read_anthropic, sniff, agent_log=True)


__all__ = ["ADAPTER", "sniff", "NAME", "SUFFIXES", "SYSTEM_TURN_ID", "convert_conversation", "read_anthropic", "recognise"]
