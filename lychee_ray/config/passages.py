"""Section for the passages of long turns (docs/data-format.md, "Long turns")."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lychee_ray.config.base import Section


class PassagesConfig(Section):
    """How a turn longer than one passage is cut for search: the raw-turn channels (dense and
    lexical) index its passages, and a hit shows that passage, not the whole turn."""

    # Tokens (offline tokenizer) of one passage at most; a turn with more is cut into passages at
    # paragraph, line, sentence or word boundaries. Below MiniLM's 256-word-piece window, so the
    # embedder sees every word of a passage; a turn of at most this many tokens stays one passage
    # (its turn row and turn vector, as before).
    max_tokens: int = Field(ge=16)
    # Characters of one turn cut into passages at most (bounded cost per turn); the rest of a longer
    # turn is stored but not searchable, reported as an input warning. 0 = no bound.
    max_turn_chars: int = Field(ge=0)
    # Roles whose long turns are cut into passages; system prompts are context, kept as their
    # records (they are left out of recall unless a route asks for rules).
    roles: list[Literal["user", "assistant", "system", "tool"]]
