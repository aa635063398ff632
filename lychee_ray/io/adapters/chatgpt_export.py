"""ChatGPT data exports (``--format chatgpt``): the export's ``conversations.json``, a JSON array of
conversations whose messages form a tree (``mapping``: node id → ``message``, ``parent``,
``children``).

The conversation read is the branch that ends at ``current_node`` (what the user saw last), root
first; messages on other branches (edited prompts, regenerated answers) are skipped and counted in
a warning. Per message: ``author.role`` (``system``/``user``/``assistant``/``tool``), ``content``
by ``content_type`` (``text`` and ``multimodal_text`` parts — images as a placeholder line —,
``code``, ``execution_output``, browsing and quote displays, errors), epoch ``create_time`` as the
turn's timestamp, the message id as the turn id. An assistant message addressed to a tool
(``recipient`` other than ``all``) is a tool call named for the recipient, with its content as
the arguments; the ``tool`` message that follows is its result. Empty messages (the export's hidden
system prompts, empty placeholders) carry nothing and are skipped (counted in a warning). The
export names no user: the owner defaults to the conversation id (``user_id`` in a conversation
object is read when present).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from collections.abc import Iterator

from lychee_ray.io.adapters.agent_turns import MESSAGE_ROLES, ToolLinker, conversation_item, epoch_iso
from lychee_ray.io.adapters.base import AdapterItem
from lychee_ray.io.adapters.adapter import Adapter
from lychee_ray.io.adapters.documents import read_objects_as

NAME = "chatgpt"
SUFFIXES = (".json",)
_TEXT_KEYS = ("text", "result", "summary")


def recognise(obj: dict[str, Any]) -> str | None:
    """None when ``obj`` reads as a ChatGPT export conversation, else what it looks like."""
    if isinstance(obj.get("mapping"), dict):
        return None
    if "sessions" in obj:
        return "a canonical conversation (--format jsonl)"
    if isinstance(obj.get("messages"), list):
        return "a chat-completion conversation (--format openai or anthropic)"
    return "no ChatGPT export conversation (no mapping)"


def _part_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    if isinstance(part, dict):
        kind = str(part.get("content_type") or "")
        if "image" in kind:
            return "[image]"
        if "audio" in kind and part.get("text") is None:
            return "[audio]"
        for k in _TEXT_KEYS:
            if isinstance(part.get(k), str):
                return part[k]
        return f"[{kind or 'part'}]"
    return json.dumps(part, ensure_ascii=False)


def message_text(content: Any, where: str, warnings: list[tuple[str, str]]) -> str:
    """A message's content as text, whatever its ``content_type``."""
    if not isinstance(content, dict):
        return "" if content is None else str(content)
    if isinstance(content.get("parts"), list):
        return "\n".join(t for t in (_part_text(p) for p in content["parts"]) if t)
    for k in _TEXT_KEYS:
        if isinstance(content.get(k), str):
            return content[k]
    kind = content.get("content_type")
    rest = {k: v for k, v in content.items() if k != "content_type"}
    if rest:
        warnings.append((where, f"content of type {kind!r} kept as its JSON text"))
        return json.dumps(rest, ensure_ascii=False)
    return ""


def current_branch(mapping: dict[str, Any], current: Any) -> list[str]:
    """Node ids from the root to ``current`` (the last node of the longest first-child chain when
    ``current_node`` is missing); a cycle or a missing parent ends the walk."""
    if not isinstance(current, str) or current not in mapping:
        roots = [k for k, n in mapping.items() if isinstance(n, dict) and n.get("parent") not in mapping]
        current = roots[0] if roots else next(iter(mapping), None)
        while current is not None:
            kids = [c for c in (mapping.get(current) or {}).get("children") or [] if c in mapping]
            if not kids:
                break
            current = kids[-1]  # the newest regeneration, as the app shows it
    path: list[str] = []
    seen: set[str] = set()
    while isinstance(current, str) and current in mapping and current not in seen:
        seen.add(current)
        path.append(current)
        current = (mapping[current] or {}).get("parent")
    return path[::-1]


def convert_conversation(obj: dict[str, Any], file: str, line: int) -> AdapterItem:
    """One export conversation → an adapter item (the current branch's messages as turns)."""
    warnings: list[tuple[str, str]] = []
    linker = ToolLinker(warnings)
    mapping = obj["mapping"]
    branch = current_branch(mapping, obj.get("current_node"))
    on_branch = set(branch)
    off = [k for k, n in mapping.items() if k not in on_branch and isinstance(n, dict) and n.get("message")]
    if off:
        warnings.append(("mapping", f"{len(off)} message(s) on other branches (edits, regenerations) skipped; the "
                                    f"branch ending at current_node is read"))
    turns: list[dict[str, Any]] = []
    empty = 0
    for node_id in branch:
        m = (mapping[node_id] or {}).get("message")
        if not isinstance(m, dict):
            continue
        where = f"mapping.{node_id}"
        raw_author = m.get("author")
        author: dict[str, Any] = raw_author if isinstance(raw_author, dict) else {}
        raw_role = author.get("role")
        role = MESSAGE_ROLES.get(raw_role, raw_role) if isinstance(raw_role, str) else raw_role
        text = message_text(m.get("content"), f"{where}.content", warnings)
        recipient = m.get("recipient")
        # the tool an assistant message is addressed to (None: not a tool call)
        to_tool = recipient if role == "assistant" and isinstance(recipient, str) and recipient not in ("all", "") \
            else None
        if not text.strip() and to_tool is None:
            empty += 1
            continue
        tid = str(m.get("id") or node_id)
        turn: dict[str, Any] = {"turn_id": tid, "role": role, "content": text}
        if to_tool is not None:
            turn["content"] = ""
            turn["tool_calls"] = [{"call_id": tid, "name": to_tool, "arguments": text}]
            linker.call(tid, tid, to_tool)
        elif role == "tool":
            name = author.get("name") if isinstance(author.get("name"), str) else None
            call_id, tool = linker.result(tid, None, name)
            turn.update({k: v for k, v in (("tool_call_id", call_id), ("tool_name", tool or name)) if v})
        elif isinstance(author.get("name"), str) and author["name"].strip():
            turn["speaker"] = author["name"]
        if m.get("create_time") is not None:
            turn["timestamp"] = epoch_iso(m["create_time"])
        raw_content = m.get("content")
        content: dict[str, Any] = raw_content if isinstance(raw_content, dict) else {}
        if content.get("content_type") == "system_error":
            turn["meta"] = {"is_error": True}
        turns.append(turn)
    linker.finish()
    if empty:
        warnings.append(("mapping", f"{empty} empty message(s) on the branch skipped (hidden system prompts, placeholders)"))
    meta = {k: obj[k] for k in ("title", "default_model_slug") if isinstance(obj.get(k), str)}
    return conversation_item(obj, turns, warnings, file, line, conversation_id=obj.get("conversation_id", obj.get("id")),
                             user_id=obj.get("user_id"), started_at=obj.get("create_time"), meta=meta,
                             id_source=[obj.get("title"), *branch[:3]])


def read_chatgpt(path: str | Path) -> Iterator[AdapterItem]:
    """Conversations of ChatGPT export files under ``path`` (``conversations.json``)."""
    return read_objects_as(path, SUFFIXES, recognise, convert_conversation, "ChatGPT export (--format chatgpt)")


def sniff(obj: dict[str, Any] | None, head: str) -> bool:
    """A ChatGPT export: a ``mapping`` tree of messages."""
    if obj is not None:
        return isinstance(obj.get("mapping"), dict)
    return '"mapping"' in head and ('"current_node"' in head or '"author"' in head)


ADAPTER = Adapter(NAME, "ChatGPT export", SUFFIXES, read_chatgpt, sniff, agent_log=True)


__all__ = ["ADAPTER", "sniff", "NAME", "SUFFIXES", "convert_conversation", "current_branch", "read_chatgpt", "recognise"]
