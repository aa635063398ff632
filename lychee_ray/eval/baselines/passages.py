"""(e) Hybrid passage RAG: the strongest simple baseline on conversations with long messages.

Turn-level baselines see a long message badly: a turn vector holds its first few hundred tokens,
and a whole 3,000-token answer does not fit a 1,500-token budget. Here every message is cut into
**passages**:

- at every paragraph boundary (blank lines): a paragraph whose plain line (``role: text``,
  whitespace collapsed — what the context shows) has at most ``eval.passage_rag_max_tokens`` tokens
  is one passage; a longer one is cut at line breaks, then sentence ends, then between words, and
  its pieces are merged back while they fit; text that is only whitespace makes no passage.
  Paragraphs are not merged with each other: fewer, longer units let fewer messages into a
  budget, and the baseline keeps its stronger form (docs/evaluation.md "BEAM");
- each passage is **role-labelled** (``user: …`` / ``assistant: …``), indexed by BM25 (the query's
  own BM25 parameters and vocabulary) and embedded with the configured embedder;
- a question ranks the passages by BM25 and by cosine, fuses the two rankings with reciprocal rank
  fusion (``query.fusion.rrf_k``) and fills the budget by rank (:func:`~.retrieval.pack`: a passage
  that does not fit is skipped, a later smaller one may still fit), shown in conversation order.

A passage cites its message (``turn_ids``), so id and content coverage credit the message it comes
from and measure how much of it the shown passages hold.
"""

from __future__ import annotations

import re
from typing import Any
from collections.abc import Iterator

import numpy as np

from lychee_ray.eval.baselines.retrieval import Selected, TurnUnits, pack, plain_line, unit
from lychee_ray.query.bm25 import BM25Index
from lychee_ray.query.evidence import Evidence
from lychee_ray.query.fuse import RankedList, rrf
from lychee_ray.query.hits import Hit
from lychee_ray.text.sentences import split_sentences
from lychee_ray.text.tokens import count_tokens

_PARAGRAPH = re.compile(r"\n[ \t\r\f\v]*\n")


def _flat(text: str) -> str:
    return " ".join(text.split())


def _pieces(paragraph: str, fits: Any) -> Iterator[str]:
    """A paragraph as pieces that each fit: itself, else its lines, else their sentences, else words."""
    flat = _flat(paragraph)
    if not flat:
        return
    if fits(flat):
        yield flat
        return
    lines = [x for x in paragraph.splitlines() if x.strip()]
    if len(lines) > 1:
        for line in lines:
            yield from _pieces(line, fits)
        return
    sentences = split_sentences(flat)
    if len(sentences) > 1:
        for s in sentences:
            yield from _pieces(s, fits)
        return
    words: list[str] = []
    for w in flat.split():
        if words and not fits(" ".join([*words, w])):
            yield " ".join(words)
            words = []
        words.append(w)  # a single word longer than the bound is one passage of its own
    if words:
        yield " ".join(words)


def split_passages(text: str, speaker: str, max_tokens: int, encoding: str) -> list[str]:
    """``text`` as passages whose plain line (``speaker: passage``) has at most ``max_tokens``
    tokens (module docstring): a passage per paragraph; a longer paragraph's pieces are merged back
    while they fit; whitespace-only text gives none."""
    def fits(s: str) -> bool:
        return count_tokens(plain_line(speaker, s), encoding) <= max_tokens

    out: list[str] = []
    for para in _PARAGRAPH.split(text):
        cur = ""
        for piece in _pieces(para, fits):
            joined = f"{cur} {piece}" if cur else piece
            if cur and not fits(joined):
                out.append(cur)
                cur = piece
            else:
                cur = joined
        if cur:
            out.append(cur)
    return out


class PassageRAG:
    """(e) BM25 + dense over role-labelled passages of the messages, fused with RRF."""

    name = "passage_rag"

    def __init__(self, turns: TurnUnits, embedder: Any, max_tokens: int, bm25_k1: float, bm25_b: float,
                 rrf_k: float) -> None:
        v = turns.view
        self.turns = turns
        self.rrf_k = rrf_k
        self.units: list[Evidence] = []
        for p in range(v.num_turns):
            if p in turns.excluded:
                continue
            for k, passage in enumerate(split_passages(v.turn_text[p], v.turn_speaker[p], max_tokens, turns.encoding)):
                self.units.append(unit(v, f"{v.turn_ids[p]}#p{k}", p, k, passage, turns.encoding))
        self.by_id = {u.id: u for u in self.units}
        texts = [u.text for u in self.units]
        self.vectors = (np.asarray(embedder.encode(texts), dtype=np.float32) if texts
                        else np.zeros((0, v.dim), dtype=np.float32))
        self.bm25 = BM25Index(texts, ["turn"] * len(texts), [u.id for u in self.units], bm25_k1, bm25_b)

    def select(self, question: str, qvec: np.ndarray, budget: int) -> Selected:
        """The plain selection for one question."""
        if not self.units:
            return Selected([], "", 0)
        sims = self.vectors @ np.asarray(qvec, dtype=np.float32)
        order = np.lexsort((np.arange(len(sims)), -sims))  # similarity desc, position asc (deterministic)
        dense = [Hit("turn", self.units[i].id, float(sims[i])) for i in order]
        lexical = self.bm25.search(question, len(self.units))
        cid = self.turns.view.conversation_id
        fused = rrf([RankedList("dense", 0, cid, dense), RankedList("bm25", 0, cid, lexical)], k=self.rrf_k)
        return pack([self.by_id[it.key.id] for it in fused], budget, self.turns.encoding)


__all__ = ["PassageRAG", "split_passages"]
