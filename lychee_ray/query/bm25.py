"""The lexical channel (DESIGN §1 step 5e): BM25 over a conversation's record and turn texts.

Names, numbers and rare words are what vector search misses; :class:`BM25Index` is built once
when a conversation is loaded (and cached with its view), :func:`recall_bm25` searches it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Sequence

import numpy as np

from lychee_ray.query.hits import Hit, ItemKind
from lychee_ray.text.lexical import lexical_terms

if TYPE_CHECKING:
    from lychee_ray.query.recall import ConversationView

# bm25s rejects an empty document; a term no query can produce stands in for one
_EMPTY_DOC = "\x00empty"


class BM25Index:
    """BM25 (``bm25s``) over a mixed corpus of record and turn texts, with kind tags."""

    def __init__(self, texts: Sequence[str], kinds: Sequence[ItemKind], ids: Sequence[str], k1: float, b: float) -> None:
        import bm25s

        logging.getLogger("bm25s").setLevel(logging.WARNING)  # it logs every index build at DEBUG
        self.kinds = list(kinds)
        self.ids = list(ids)
        tokens = [lexical_terms(t) or [_EMPTY_DOC] for t in texts]
        self._retriever = bm25s.BM25(k1=k1, b=b)
        self._vocab = set()
        if tokens:
            self._retriever.index(tokens, show_progress=False)
            self._vocab = {t for doc in tokens for t in doc}

    def search(self, query: str, depth: int) -> list[Hit]:
        """The ``depth`` best-scoring items with a positive score, best first (ties by position)."""
        terms = [t for t in dict.fromkeys(lexical_terms(query)) if t in self._vocab]
        if not terms or depth <= 0 or not self.ids:
            return []
        scores = np.asarray(self._retriever.get_scores(terms), dtype=np.float32)
        k = min(depth, int((scores > 0).sum()))
        if k == 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.lexsort((top, -scores[top]))]  # score desc, position asc (deterministic)
        return [Hit(self.kinds[i], self.ids[i], float(scores[i])) for i in top]


def recall_bm25(view: "ConversationView", query: str, depth: int) -> list[Hit]:
    """(e) Lexical matches over record and turn texts."""
    return view.bm25.search(query, depth)


def recall_turn_bm25(view: "ConversationView", query: str, depth: int) -> list[Hit]:
    """(f) Lexical matches over the raw turns alone (turn-only term statistics)."""
    return view.turn_bm25.search(query, depth)


__all__ = ["BM25Index", "recall_bm25", "recall_turn_bm25"]
