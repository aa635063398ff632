"""The passages of a loaded conversation's long turns (core/passages.py), as the view keeps them.

A turn with passages is searched by them: the dense raw-turn channel ranks its passages' vectors
instead of the turn's vector (which sees only the embedder's window), and both lexical indexes hold
its passages instead of the whole turn (:func:`lexical_units`). A passage's text is its span of the
turn's text, sliced here; its row says where it lies (``index`` of ``count`` in its turn).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow as pa

from lychee_ray.query.bm25 import doc_terms
from lychee_ray.query.hits import ItemKind
from lychee_ray.query.pacing import Pause, paced


@dataclass
class PassageColumns:
    """What a view keeps per passage, by passage position (one place for a view built whole and one
    extended by appended turns, as :class:`~lychee_ray.query.view.TurnColumns`)."""

    ids: list[str] = field(default_factory=list)
    turn: list[int] = field(default_factory=list)  # the turn's position in the view
    part: list[int] = field(default_factory=list)  # position in its turn (0 = first)
    count: list[int] = field(default_factory=list)  # passages its turn has
    span: list[tuple[int, int]] = field(default_factory=list)  # (char_start, char_end) in the turn's text
    text: list[str] = field(default_factory=list)
    tokens: list[list[str]] = field(default_factory=list)  # BM25 terms of "speaker: text"

    @classmethod
    def of(cls, table: pa.Table, turn_pos: dict[str, int], turn_text: list[str], turn_speaker: list[str],
           pause: Pause | None = None) -> PassageColumns:
        """Columns of a passages table, row for row (positions are the rows of its vector index). A
        passage whose turn the view lacks (a damaged store: ``lychee-ray verify`` reports it) keeps
        its row with turn -1 and no text, and is never recalled."""
        out = cls()
        if table.num_rows == 0:
            return out
        cols = table.select(["passage_id", "turn_id", "index", "count", "char_start", "char_end"]).to_pydict()
        for pid, tid, k, n, a, b in paced(zip(cols["passage_id"], cols["turn_id"], cols["index"], cols["count"],
                                              cols["char_start"], cols["char_end"], strict=False), pause):
            tp = turn_pos.get(tid, -1)
            text = turn_text[tp][a:b] if tp >= 0 else ""
            out.ids.append(str(pid))
            out.turn.append(tp)
            out.part.append(int(k))
            out.count.append(int(n))
            out.span.append((int(a), int(b)))
            out.text.append(text)
            out.tokens.append(doc_terms(f"{turn_speaker[tp]}: {text}") if tp >= 0 else doc_terms(""))
        return out

    def __len__(self) -> int:
        return len(self.ids)

    def __add__(self, other: PassageColumns) -> PassageColumns:
        return PassageColumns(self.ids + other.ids, self.turn + other.turn, self.part + other.part,
                              self.count + other.count, self.span + other.span, self.text + other.text,
                              self.tokens + other.tokens)

    def by_turn(self, start: int = 0) -> dict[int, list[int]]:
        """Turn position -> its passage positions (in order), for passages from ``start`` on."""
        out: dict[int, list[int]] = {}
        for i in range(start, len(self.ids)):
            if self.turn[i] >= 0:
                out.setdefault(self.turn[i], []).append(i)
        return out


def lexical_units(turn_ids: list[str], turn_tokens: list[list[str]], passages: PassageColumns,
                  turn_passages: dict[int, list[int]], start_turn: int = 0
                  ) -> tuple[list[ItemKind], list[str], list[list[str]]]:
    """The lexical indexes' documents for turns from ``start_turn`` on, in turn order: a turn with
    passages is its passages, any other turn itself (kinds, ids, terms)."""
    kinds: list[ItemKind] = []
    ids: list[str] = []
    tokens: list[list[str]] = []
    for tp in range(start_turn, len(turn_ids)):
        parts = turn_passages.get(tp)
        if parts is None:
            kinds.append("turn")
            ids.append(turn_ids[tp])
            tokens.append(turn_tokens[tp])
            continue
        for pp in parts:
            kinds.append("passage")
            ids.append(passages.ids[pp])
            tokens.append(passages.tokens[pp])
    return kinds, ids, tokens


__all__ = ["PassageColumns", "lexical_units"]
