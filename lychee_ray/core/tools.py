"""Tool traffic on turns (agent logs): the typed calls an assistant turn makes, the link
of a tool result to its call, and the one text rendering every stage shares.

In the canonical model a tool call (name, arguments, call id) stays on the assistant turn that made
it, and a tool result is a ``tool`` turn linked to its call by ``tool_call_id``. The turns table has
no columns of its own for them: they travel in the turn's ``meta`` JSON under the reserved key
:data:`TOOL_META_KEY` (so stores written before agent logs read unchanged), and
:func:`tool_info_from_meta` / :func:`tool_meta` are the only code that spells that key.
"""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

# The turns-table ``meta`` key that carries a turn's tool calls / tool-result link.
TOOL_META_KEY = "_tool"
# How a tool call is shown in turn text (search, embedding, segmenting, encoder prompts).
CALL_ARROW = "→"


class ToolCall(BaseModel):
    """One call an assistant turn makes: ``call_id`` links the tool turn that answers it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    call_id: str = Field(min_length=1, description="the call's id (OpenAI tool_calls[].id, Anthropic tool_use.id)")
    name: str = Field(min_length=1, description="the tool (function) name")
    arguments: str = Field(default="", description="the arguments as given: JSON text when they are JSON")

    def parsed_arguments(self) -> Any:
        """The arguments as JSON (a dict for well-formed calls); None when they are not JSON."""
        try:
            return json.loads(self.arguments) if self.arguments.strip() else {}
        except json.JSONDecodeError:
            return None

    def signature(self) -> str:
        """``name(key=value, ...)`` with the argument values verbatim (what records and search keep)."""
        args = self.parsed_arguments()
        if isinstance(args, dict):
            inner = ", ".join(f"{k}={_compact(v)}" for k, v in args.items())
        else:
            inner = " ".join(self.arguments.split())
        return f"{self.name}({inner})"


class ToolInfo(BaseModel):
    """A turn's tool fields as stored under :data:`TOOL_META_KEY`."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    calls: list[ToolCall] = Field(default_factory=list)
    call_id: str | None = None
    name: str | None = None

    def is_empty(self) -> bool:
        return not self.calls and self.call_id is None and self.name is None


def _compact(v: Any) -> str:
    """A JSON value written compactly (strings bare, others as JSON)."""
    if isinstance(v, str):
        return v
    return json.dumps(v, ensure_ascii=False, separators=(",", ":"))


def tool_meta(meta: dict[str, Any], info: ToolInfo | None) -> dict[str, Any]:
    """``meta`` with the turn's tool fields under the reserved key (unchanged when there are none)."""
    if info is None or info.is_empty():
        return meta
    return {**meta, TOOL_META_KEY: info.model_dump(exclude_defaults=True)}


def split_tool_meta(meta: dict[str, Any]) -> tuple[dict[str, Any], ToolInfo | None]:
    """(the user's meta, the tool fields) of a stored turn's decoded ``meta``."""
    if TOOL_META_KEY not in meta:
        return meta, None
    rest = {k: v for k, v in meta.items() if k != TOOL_META_KEY}
    return rest, ToolInfo.model_validate(meta[TOOL_META_KEY])


def tool_info_from_meta(meta: str | dict[str, Any] | None) -> ToolInfo | None:
    """The tool fields of a turns-table row's ``meta`` (JSON text or decoded), None when it has none."""
    if not meta:
        return None
    if isinstance(meta, str):
        if TOOL_META_KEY not in meta:  # the common case: no JSON parse per plain turn
            return None
        try:
            meta = json.loads(meta)
        except json.JSONDecodeError:
            return None
    if not isinstance(meta, dict):
        return None
    return split_tool_meta(meta)[1]


def render_turn_text(content: str, info: ToolInfo | None, max_result_chars: int = 0) -> str:
    """The text a turn shows to search, embedding, the segmenter and encoder prompts: its content,
    then one ``→ name(key=value, ...)`` line per tool call; a tool result is ``name: content``.
    ``max_result_chars`` > 0 caps a tool result's content (the stored turn stays whole)."""
    if info is None:
        return content
    if info.calls:
        calls = "\n".join(f"{CALL_ARROW} {c.signature()}" for c in info.calls)
        return f"{content}\n{calls}" if content.strip() else calls
    if info.name or info.call_id:
        body = content
        if max_result_chars and len(body) > max_result_chars:
            body = body[:max_result_chars] + " […]"
        return f"{info.name or 'tool'} result: {body}"
    return content


__all__ = ["CALL_ARROW", "TOOL_META_KEY", "ToolCall", "ToolInfo", "render_turn_text", "split_tool_meta", "tool_info_from_meta",
           "tool_meta"]
