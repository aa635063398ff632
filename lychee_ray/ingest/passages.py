"""The passages of a conversation's long turns, as every write path makes them.

A turn of a role in ``passages.roles`` whose text has more than ``passages.max_tokens`` tokens is cut
into passages (:func:`~lychee_ray.text.passages.split_passages`; rows: core/passages.py); only its
first ``passages.max_turn_chars`` characters are, and a turn cut shorter is reported
(:func:`capped_turns`, an input warning). Passages depend on the turns alone, so a full build, an
incremental build's delta and a queued append make the same rows for the same turns (each embeds
the passages of the turns it adds; the vectors are made by the record and node embedder).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from lychee_ray.config import PassagesConfig
from lychee_ray.core.conversation import Conversation, Turn
from lychee_ray.core.passages import Passage
from lychee_ray.text.passages import split_passages
from lychee_ray.text.tokens import DEFAULT_ENCODING


def turn_passages(conversation_id: str, user_id: str, turn: Turn, cfg: PassagesConfig,
                  encoding: str = DEFAULT_ENCODING) -> list[Passage]:
    """The passages of one turn (none when its role has none or it fits in one passage)."""
    if turn.role not in cfg.roles:
        return []
    text = turn.text
    if len(text.encode("utf-8")) <= cfg.max_tokens:  # at most that many tokens: one passage
        return []
    split = split_passages(text, cfg.max_tokens, encoding, cfg.max_turn_chars)
    if len(split.spans) <= 1 and not split.capped:
        return []
    n = len(split.spans)
    return [Passage(conversation_id, user_id, turn.turn_id, k, n, s.start, s.end, s.tokens, text[s.start:s.end])
            for k, s in enumerate(split.spans)]


def conversation_passages(conv: Conversation, cfg: PassagesConfig, encoding: str = DEFAULT_ENCODING,
                          start: int = 0) -> list[Passage]:
    """The passages of ``conv``'s turns from the ``start``-th on (``iter_turns`` order), in turn order."""
    return passages_of_turns(conv.conversation_id, conv.user_id, (t for *_, t in conv.iter_turns_from(start)), cfg,
                             encoding)


def passages_of_turns(conversation_id: str, user_id: str, turns: Iterable[Turn], cfg: PassagesConfig,
                      encoding: str = DEFAULT_ENCODING) -> list[Passage]:
    """The passages of ``turns``, in order."""
    return [p for t in turns for p in turn_passages(conversation_id, user_id, t, cfg, encoding)]


def capped_turns(turns: Sequence[Turn], cfg: PassagesConfig) -> list[Turn]:
    """Turns cut into passages only up to ``passages.max_turn_chars`` (their rest is not searchable)."""
    if not cfg.max_turn_chars:
        return []
    return [t for t in turns if t.role in cfg.roles and len(t.text) > cfg.max_turn_chars]


__all__ = ["capped_turns", "conversation_passages", "passages_of_turns", "turn_passages"]
