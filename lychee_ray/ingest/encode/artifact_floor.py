"""Artifacts an LLM reply left out, added from the turn's own blocks (``encoder.artifact_floor``).

The encode prompt asks for one ``artifact`` record per code block, table or drafted document of a
chat turn, but a model may write none (a small one often describes the prose around a code block
and skips the code), and a block past ``encoder.max_turn_chars`` is cut from the prompt so the model
never sees it. A later question about that code ("which table did the assistant's schema define?")
then finds only the raw turn. The blocks are found without a model (:mod:`.rules.blocks`), so for
each chat turn with a block that no record of the reply describes (no record with ``artifact`` set
cites the turn), the rules backend's artifact records of that turn are added: what it is, for whom,
its identifiers, names and numbers verbatim (:mod:`.rules.artifacts`). A turn the model did describe
is left as the model wrote it.
"""

from __future__ import annotations

from lychee_ray.config import EncoderConfig
from lychee_ray.ingest.encode.base import EncodeOutput, EncodeRequest, RecordDraft, SegmentTurn
from lychee_ray.ingest.encode.rules.assistant import AssistantAnswers, party
from lychee_ray.ingest.encode.rules.blocks import split_blocks
from lychee_ray.ingest.encode.rules.encoder import is_assistant_chat
from lychee_ray.ingest.encode.rules.speakers import display_name

# The two sides of an assistant chat: an artifact of one is made for the other.
_CHAT_SIDES = {"user": "assistant", "assistant": "user"}


class ArtifactFloor:
    """Adds the artifact records a reply left out (see the module doc)."""

    def __init__(self, cfg: EncoderConfig) -> None:
        self.answers = AssistantAnswers.from_config(cfg.rules.assistant, cfg.rules.max_entities, cfg.rules.max_topics)

    def fill(self, output: EncodeOutput, request: EncodeRequest) -> tuple[EncodeOutput, int]:
        """``output`` with the missing artifact records appended, and how many were added."""
        if not is_assistant_chat(request):
            return output, 0
        described = {t for rec in output.records if rec.artifact for t in rec.source_turns}
        added: list[RecordDraft] = []
        for turn in request.turns:
            if turn.role not in _CHAT_SIDES or turn.index in described:
                continue
            blocks = split_blocks(turn.content)
            if all(b.kind == "prose" for b in blocks):
                continue
            author = party(display_name(turn.speaker, turn.role))
            whom = self._other(request, turn)
            joiner = " for " if turn.role == "assistant" else " with "
            added += self.answers.artifacts(blocks, author[:1].upper() + author[1:], f"{joiner}{whom}" if whom else "",
                                            turn.index, whom or None)
        if not added:
            return output, 0
        return EncodeOutput(records=[*output.records, *added], resolution_state=output.resolution_state), len(added)

    @staticmethod
    def _other(request: EncodeRequest, turn: SegmentTurn) -> str:
        """How the other side of the chat is named ("the user", or its speaker's name)."""
        side = _CHAT_SIDES[turn.role]
        for t in request.turns:
            if t.role == side:
                return party(display_name(t.speaker, t.role))
        return party(display_name(side.capitalize(), side))


__all__ = ["ArtifactFloor"]
