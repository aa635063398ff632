"""Passages of long turns: the stored rows (one per passage) and their Arrow schema.

A turn whose text (:attr:`~lychee_ray.core.conversation.Turn.text`: content with tool calls
rendered) has more tokens than ``passages.max_tokens`` is searched by its passages
(docs/data-format.md, "Long turns"). A passage row holds where the passage lies in its turn's text
(``char_start``/``char_end``), not the text itself: the turn's content is stored once, in the
turns table, and a reader slices it. Turns that fit in one passage have no rows: they are searched
as the turn itself (its turn row and turn vector).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pyarrow as pa

PASSAGE_SCHEMA = pa.schema(
    [
        pa.field("passage_id", pa.string(), nullable=False),
        pa.field("conversation_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("turn_id", pa.string(), nullable=False),
        pa.field("index", pa.int32(), nullable=False),  # position in its turn (0 = first)
        pa.field("count", pa.int32(), nullable=False),  # passages its turn has
        pa.field("char_start", pa.int64(), nullable=False),  # span in the turn's text
        pa.field("char_end", pa.int64(), nullable=False),
        pa.field("tokens", pa.int32(), nullable=False),
    ]
)

# a passage id is its turn's id, this separator and its position: unique within a conversation
# because turn ids are, and readable where it is shown (an evidence item's id)
PASSAGE_ID_SEPARATOR = "#p"


def passage_id(turn_id: str, index: int) -> str:
    """The id of passage ``index`` (0-based) of turn ``turn_id``."""
    return f"{turn_id}{PASSAGE_ID_SEPARATOR}{index + 1}"


@dataclass(frozen=True)
class Passage:
    """One passage of a turn: its row, and the text it spans (what is embedded)."""

    conversation_id: str
    user_id: str
    turn_id: str
    index: int
    count: int
    char_start: int
    char_end: int
    tokens: int
    text: str

    @property
    def passage_id(self) -> str:
        return passage_id(self.turn_id, self.index)

    def row(self) -> dict[str, Any]:
        """The :data:`PASSAGE_SCHEMA` row."""
        return {"passage_id": self.passage_id, "conversation_id": self.conversation_id, "user_id": self.user_id,
                "turn_id": self.turn_id, "index": self.index, "count": self.count, "char_start": self.char_start,
                "char_end": self.char_end, "tokens": self.tokens}


def passages_table(passages: list[Passage]) -> pa.Table:
    """Rows of ``passages`` as a :data:`PASSAGE_SCHEMA` table."""
    return pa.Table.from_pylist([p.row() for p in passages], schema=PASSAGE_SCHEMA)


__all__ = ["PASSAGE_ID_SEPARATOR", "PASSAGE_SCHEMA", "Passage", "passage_id", "passages_table"]
