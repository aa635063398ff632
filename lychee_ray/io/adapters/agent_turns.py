"""Message lists with tool traffic → canonical conversation objects (shared by the ``openai``,
``anthropic`` and ``chatgpt`` adapters).

What every message-list format has in common: messages become turns (id: the message's own id,
else its position, so a grown log re-imports with the same ids and builds as an append), content
parts become text (an image becomes a placeholder line), tool calls stay typed on their assistant
turn, and each tool result is linked to its call by :class:`ToolLinker`. Everything unusual is kept
and reported as a warning (never dropped silently):

* a tool result whose call is missing (kept, linked to nothing);
* a call that no result answers (kept; a log cut short, or a call still running);
* arguments that are not JSON (kept as text);
* a call id used again while a call with it is still unanswered (results link the most recent one).
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from lychee_ray.io.adapters.base import AdapterItem, InputIssue, canonical_item

# The one session of a message-list conversation (chat logs have no sessions of their own).
SESSION_ID = "s1"
# Characters of each leading message hashed into a generated conversation id.
_ID_HASH_CHARS = 2000
# Hex digits of that hash in the id.
_ID_HEX = 16
# Roles the message formats use, mapped onto the canonical four (unknown roles: see clean.py).
MESSAGE_ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant",
                 "tool": "tool", "function": "tool"}


@dataclass
class ToolLinker:
    """Links tool results to the calls they answer, in message order, and collects what did not link."""

    warnings: list[tuple[str, str]] = field(default_factory=list)  # (field, message)
    _open: list[tuple[str, str, str]] = field(default_factory=list)  # (call id, tool name, calling turn id)

    def call(self, turn_id: str, call_id: str, name: str) -> None:
        """An assistant turn made this call (an id reused after its call was answered is harmless:
        some models repeat ids)."""
        if any(cid == call_id for cid, _, _ in self._open):
            self.warnings.append((f"{turn_id}.tool_calls", f"call id {call_id!r} used again while a call with it is "
                                                           f"unanswered (results link the most recent one)"))
        self._open.append((call_id, name, turn_id))

    def result(self, turn_id: str, call_id: str | None, name: str | None) -> tuple[str | None, str | None]:
        """(the call id, the tool name) a tool result at ``turn_id`` answers: by its ``call_id``, else
        (legacy ``function`` messages) the oldest open call of tool ``name``. Unlinked: warned, kept."""
        for i in range(len(self._open) - 1, -1, -1) if call_id is not None else range(len(self._open)):
            cid, cname, _ = self._open[i]
            if (call_id is not None and cid == call_id) or (call_id is None and name is not None and cname == name):
                del self._open[i]
                return cid, name or cname
        what = f"call {call_id!r}" if call_id is not None else f"a call of {name!r}" if name else "a call"
        self.warnings.append((f"{turn_id}.tool_call_id", f"tool result without a matching {what} (kept, not linked)"))
        return call_id, name

    def finish(self) -> None:
        """Warn about calls no result answered."""
        for cid, name, turn_id in self._open:
            self.warnings.append((f"{turn_id}.tool_calls", f"tool call {name}({cid}) has no result in the log (kept)"))
        self._open.clear()


def arguments_text(raw: Any, where: str, warnings: list[tuple[str, str]]) -> str:
    """A call's arguments as text: JSON objects serialised, strings kept as given (warned when they
    are not JSON)."""
    if raw is None:
        return ""
    if not isinstance(raw, str):
        return json.dumps(raw, ensure_ascii=False)
    if raw.strip():
        try:
            json.loads(raw)
        except json.JSONDecodeError:
            warnings.append((where, f"tool call arguments are not JSON (kept as text): {raw[:60]!r}"))
    return raw


# content part types that carry text, by format (OpenAI chat / Responses, Anthropic)
_TEXT_PARTS = {"text", "input_text", "output_text"}
# non-text parts shown as a placeholder line in the text
_PLACEHOLDERS = {"image_url": "[image]", "image": "[image]", "input_image": "[image]", "image_file": "[image]",
                 "input_audio": "[audio]", "audio": "[audio]", "file": "[file]", "input_file": "[file]",
                 "document": "[document]"}


def content_text(content: Any, where: str, warnings: list[tuple[str, str]]) -> str | None:
    """A message's content as text: a string as is, a list of parts joined by newlines (text parts
    verbatim, images and files as placeholder lines, a refusal as its text); None stays None (the
    caller decides whether that is normal: an assistant turn that only calls tools)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, dict):
        content = [content]
    if not isinstance(content, list):
        warnings.append((where, f"content of type {type(content).__name__} read as its JSON text"))
        return json.dumps(content, ensure_ascii=False)
    lines: list[str] = []
    for i, part in enumerate(content):
        if isinstance(part, str):
            lines.append(part)
            continue
        if not isinstance(part, dict):
            warnings.append((f"{where}.{i}", "content part is not an object (read as its JSON text)"))
            lines.append(json.dumps(part, ensure_ascii=False))
            continue
        kind = part.get("type")
        if kind in _TEXT_PARTS:
            lines.append(str(part.get("text") or ""))
        elif kind == "refusal":
            lines.append(str(part.get("refusal") or ""))
        elif kind in _PLACEHOLDERS:
            name = part.get("filename") or (part.get("file") or {}).get("filename") if kind in ("file", "input_file") else None
            lines.append(f"[file: {name}]" if name else _PLACEHOLDERS[kind])
        else:
            warnings.append((f"{where}.{i}", f"content part of type {kind!r} kept as a placeholder"))
            lines.append(f"[{kind}]")
    return "\n".join(lines)


def epoch_iso(value: Any) -> Any:
    """An epoch time in seconds (the formats' native ``created`` / ``create_time``) as ISO UTC;
    anything else unchanged (ISO strings; other values are normalised, or reported, by the repair)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            return datetime.fromtimestamp(float(value), tz=timezone.utc).replace(tzinfo=None).isoformat()
        except (OverflowError, OSError, ValueError):
            return value
    return value


def generated_conversation_id(user_id: Any, started_at: Any, messages: list[Any]) -> str:
    """A stable id for a conversation that has none: a hash of its owner, start and first messages
    (a grown log keeps its first messages, so it gets the same id and builds as an append)."""
    head = [json.dumps(m, sort_keys=True, ensure_ascii=False)[:_ID_HASH_CHARS] for m in messages[:3]]
    payload = json.dumps([user_id, started_at, head], sort_keys=True, ensure_ascii=False)
    return "conv-" + hashlib.sha256(payload.encode("utf-8")).hexdigest()[:_ID_HEX]


def conversation_item(obj: dict[str, Any], turns: list[dict[str, Any]], warnings: list[tuple[str, str]], file: str,
                      line: int, *, conversation_id: Any, user_id: Any, started_at: Any, meta: Any,
                      id_source: list[Any]) -> AdapterItem:
    """The canonical conversation of converted turns, repaired and validated like a JSONL line
    (:func:`~lychee_ray.io.adapters.base.canonical_item`), with the conversion's warnings."""
    issues: list[InputIssue] = []
    cid = conversation_id if isinstance(conversation_id, (str, int)) and str(conversation_id).strip() else None
    if cid is None:
        cid = generated_conversation_id(user_id, started_at, id_source)
        issues.append(InputIssue(file, f"no conversation id: generated {cid} from its first messages", line=line,
                                 field="conversation_id", level="warning"))
    canonical: dict[str, Any] = {"conversation_id": cid,
                                 "sessions": [{"session_id": SESSION_ID, "started_at": epoch_iso(started_at), "turns": turns}]}
    if user_id is not None:
        canonical["user_id"] = user_id
    if isinstance(meta, dict) and meta:
        canonical["meta"] = meta
    issues += [InputIssue(file, msg, line=line, field=fld, level="warning") for fld, msg in warnings]
    return canonical_item(canonical, file, line, issues)


def message_list_mismatch(obj: dict[str, Any], shape: str) -> str | None:
    """What ``obj`` looks like when it is not a message-list conversation (``shape`` names the one
    expected, e.g. "chat-completion"); None when it has a ``messages`` list and is no other format."""
    if "sessions" in obj:
        return "a canonical conversation (--format jsonl)"
    if "mapping" in obj:
        return "a ChatGPT export conversation (--format chatgpt)"
    if not isinstance(obj.get("messages"), list):
        return f"no {shape} conversation (no messages list)"
    return None


def message_log_item(obj: dict[str, Any], turns: list[dict[str, Any]], warnings: list[tuple[str, str]], file: str,
                     line: int, known_keys: set[str], id_source: list[Any]) -> AdapterItem:
    """The item of one message-log conversation object (``openai`` / ``anthropic`` shape): its
    ``conversation_id``/``id``, ``user_id``/``user``, ``started_at``/``created`` and ``metadata``
    (plus ``model``; keys outside ``known_keys`` are kept in meta with a warning)."""
    unknown = sorted(set(obj) - known_keys)
    meta = dict(obj["metadata"]) if isinstance(obj.get("metadata"), dict) else {}
    if unknown:
        meta.update({k: obj[k] for k in unknown})
        warnings.append((unknown[0], f"unknown conversation keys kept in meta: {', '.join(unknown)}"))
    if isinstance(obj.get("model"), str):
        meta.setdefault("model", obj["model"])
    user = obj.get("user_id", obj.get("user"))
    return conversation_item(obj, turns, warnings, file, line, conversation_id=obj.get("conversation_id", obj.get("id")),
                             user_id=user, started_at=obj.get("started_at", obj.get("created")), meta=meta,
                             id_source=[user, *id_source])


__all__ = ["MESSAGE_ROLES", "message_log_item", "SESSION_ID", "ToolLinker", "arguments_text", "content_text", "conversation_item",
           "epoch_iso", "generated_conversation_id"]
