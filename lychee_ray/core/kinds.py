"""What kind of conversation a list of turns is — agent log, assistant chat or dialogue — read from
the turns' structure alone.

The store keeps no input format, so the kind is read back from the turns: their roles, the tool calls
an assistant turn makes and the tool turns that answer them (:mod:`lychee_ray.core.tools`). Nothing
else is read: words in a turn's text or its metadata (an image URL ``…/workshop_tools.jpg``, a caption
about "tool_calls") say what was talked about, not how the conversation is built.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Literal

from pydantic import ValidationError

from lychee_ray.core.tools import tool_info_from_meta

# agent: tool traffic or a system prompt; chat: a user and an assistant that answers; dialogue: people
ConversationKind = Literal["agent", "chat", "dialogue"]
# Roles that make a conversation an agent log by themselves: a tool turn (a result linked to a call)
# and a system prompt (an agent's instructions, stored once).
AGENT_ROLES = frozenset({"tool", "system"})


def conversation_kind(roles: Iterable[str], metas: Iterable[str | dict[str, Any] | None]) -> ConversationKind:
    """The kind of the turns with these ``roles`` and stored ``meta`` values (JSON text or decoded,
    one per turn): ``agent`` when a turn is a tool result or a system prompt or an assistant turn
    calls a tool; else ``chat`` when an assistant answers; else ``dialogue``. A meta is read only for
    its tool fields, and only on an assistant turn (the one role that calls tools)."""
    answered = False
    for role, meta in zip(roles, metas, strict=True):
        if role in AGENT_ROLES:
            return "agent"
        if role == "assistant":
            answered = True
            if _calls_tools(meta):
                return "agent"
    return "chat" if answered else "dialogue"


def _calls_tools(meta: str | dict[str, Any] | None) -> bool:
    """Whether a stored assistant turn's meta holds tool calls (malformed tool fields hold none)."""
    try:
        info = tool_info_from_meta(meta)
    except ValidationError:
        return False
    return info is not None and bool(info.calls)


__all__ = ["AGENT_ROLES", "ConversationKind", "conversation_kind"]
