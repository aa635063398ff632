"""Retrieval baselines at lychee's token budget, all in one plain serialisation.

Every baseline shows what it selects as **plain lines** — ``Speaker: text``, in conversation
order, without turn ids or session headers — so no baseline pays tokens for ids or dates it does
not need, and every measured text (content coverage, answer-in-context) is of the same kind.
Lychee's own context keeps its ids and headers in the answer prompt (that is the method); its
*measured* text is the plain projection of its evidence (record texts and window lines, no ids,
types or headers), see :func:`lychee_plain_context`.

- :class:`TurnRAG` — (a) the question's top raw turns by cosine (the store's turn vectors);
- :class:`SentenceRAG` — (b) the conversation's sentences (every turn split with
  :func:`~lychee_ray.text.sentences.split_sentences`), embedded with the same embedding model, top
  sentences by cosine;
- :class:`HybridRAG` — (c) BM25 over the turns (the query's own BM25 parameters and vocabulary)
  and the dense turn ranking, fused with reciprocal rank fusion (``query.fusion.rrf_k``);
- :class:`FullContext` — (d) the ceiling: every turn, up to ``eval.full_context_max_tokens``
  (newest kept when a conversation is longer);
- :class:`~lychee_ray.eval.baselines.passages.PassageRAG` — (e) hybrid BM25 + dense RAG over
  role-labelled passages of the messages (:mod:`~lychee_ray.eval.baselines.passages`).

:mod:`~lychee_ray.eval.baselines.factory` names them all (``BASELINES``, ``make_baseline``).
(a)–(c) and (e) add units in their ranked order while they fit the budget (a unit that does not fit is
skipped, a later smaller one may still fit) and show them in conversation order.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Protocol
from collections.abc import Sequence

import numpy as np

from lychee_ray.query.bm25 import BM25Index
from lychee_ray.query.evidence import Evidence, line_tokens
from lychee_ray.query.fuse import ItemKey, RankedList, rrf
from lychee_ray.query.hits import Hit
from lychee_ray.query.view import ConversationView
from lychee_ray.text.sentences import split_sentences
from lychee_ray.text.tokens import count_tokens

def plain_line(speaker: str, text: str) -> str:
    """``Speaker: text`` on one line."""
    return f"{speaker}: {' '.join(text.split())}"


def plain_context(units: Sequence[Evidence]) -> str:
    """The units' plain lines, one per line, in the given order."""
    return "\n".join(u.block for u in units)


def lychee_plain_context(evidence: Sequence[Any]) -> str:
    """Lychee's evidence (``EvidenceItem``/``Evidence``) as plain text: record texts and window lines."""
    return "\n".join(" ".join(line.split()) for e in evidence for line in str(e.text).splitlines() if line.strip())


@dataclass
class Selected:
    """What a baseline selected for one question: its units (chronological) and plain context."""

    units: list[Evidence]
    context: str
    tokens: int
    truncated: bool = False

    @property
    def turn_ids(self) -> list[str]:
        """Every turn the selection shows (a sentence covers its turn)."""
        return list(dict.fromkeys(t for u in self.units for t in u.turn_ids))


class TurnView(Protocol):
    """What the baselines read of a conversation's turns: a :class:`ConversationView` or a :class:`MergedTurns`."""

    @property
    def conversation_id(self) -> str: ...
    @property
    def turn_ids(self) -> list[str]: ...
    @property
    def turn_text(self) -> list[str]: ...
    @property
    def turn_speaker(self) -> list[str]: ...
    @property
    def turn_role(self) -> list[str]: ...
    @property
    def turn_session_date(self) -> list[str | None]: ...
    @property
    def turn_index(self) -> Any: ...  # a FAISS index over the turn vectors (ids = row positions)
    @property
    def num_turns(self) -> int: ...
    @property
    def dim(self) -> int: ...

    def is_context_turn(self, pos: int) -> bool: ...


def unit(view: TurnView, uid: str, pos: int, sub: int, text: str, encoding: str) -> Evidence:
    """One plain-line unit ``uid`` showing ``text`` of the turn at ``pos`` (``sub``: its place in the turn)."""
    block = plain_line(view.turn_speaker[pos], text)
    return Evidence(
        key=ItemKey(view.conversation_id, "turn", uid), kind="turns", conversation_id=view.conversation_id, id=uid,
        text=f"{view.turn_speaker[pos]}: {text}", type="turns", time=None, session_date=view.turn_session_date[pos],
        turn_ids=[view.turn_ids[pos]], score=0.0, channels=["baseline"], routes=[], block=block,
        tokens=line_tokens(block, encoding), order=(pos, sub), group=(view.conversation_id, None),
    )


def pack(ranked: Sequence[Evidence], budget: int, encoding: str) -> Selected:
    """Units in ranked order while they fit ``budget`` (plain lines), shown chronologically."""
    if budget <= 0:
        return Selected([], "", 0)
    used, chosen = 0, []
    for u in ranked:
        if used + u.tokens <= budget:
            chosen.append(u)
            used += u.tokens
    chosen.sort(key=lambda u: u.order)
    context = plain_context(chosen)
    tokens = count_tokens(context, encoding)
    while tokens > budget and chosen:  # the sum of line counts bounds the text's count; kept as a guard
        chosen.pop()
        context = plain_context(chosen)
        tokens = count_tokens(context, encoding)
    return Selected(chosen, context, tokens)


@dataclass
class MergedTurns:
    """Several conversations' turns as one view for the baselines (a user's scope): turn ids are
    qualified ``<conversation id>/<turn id>``, the dense index holds every turn vector."""

    conversation_id: str
    turn_ids: list[str]
    turn_text: list[str]
    turn_speaker: list[str]
    turn_role: list[str]
    turn_session_date: list[str | None]
    turn_index: Any
    dim: int
    context: frozenset[int]
    turn_pos: dict[str, int]

    @property
    def num_turns(self) -> int:
        return len(self.turn_ids)

    def is_context_turn(self, pos: int) -> bool:
        return pos in self.context


def qualified(conversation_id: str, turn_id: str) -> str:
    """A turn id that names its conversation (``c-1/m4``): unique in a user's scope."""
    return f"{conversation_id}/{turn_id}"


def merged_turns(views: Sequence[ConversationView], name: str) -> MergedTurns:
    """The turns of ``views`` (in order) as one :class:`MergedTurns` called ``name``."""
    import faiss

    ids: list[str] = []
    text: list[str] = []
    speaker: list[str] = []
    role: list[str] = []
    dates: list[str | None] = []
    vecs: list[np.ndarray] = []
    context: list[int] = []
    for v in views:
        base = len(ids)
        ids += [qualified(v.conversation_id, t) for t in v.turn_ids]
        text += v.turn_text
        speaker += v.turn_speaker
        role += v.turn_role
        dates += v.turn_session_date
        vecs.append(np.asarray(v.turn_vecs, dtype=np.float32))
        context += [base + p for p in range(v.num_turns) if v.is_context_turn(p)]
    dim = views[0].dim if views else 0
    index = faiss.IndexFlatIP(dim)
    if ids:
        index.add(np.ascontiguousarray(np.concatenate(vecs), dtype=np.float32))
    return MergedTurns(name, ids, text, speaker, role, dates, index, dim, frozenset(context), {t: i for i, t in enumerate(ids)})


class TurnUnits:
    """Every turn of a conversation (or of a :class:`MergedTurns` scope) as one plain-line unit.

    A system prompt (agent logs) is no unit: it is the agent's own instructions, which a retrieval
    baseline would not index as memory either (and a 6,000-character policy that lexically matches
    every question would crowd out the messages at some budgets and not others)."""

    def __init__(self, view: TurnView, encoding: str) -> None:
        self.view = view
        self.encoding = encoding
        self.units = [unit(view, view.turn_ids[p], p, 0, view.turn_text[p], encoding) for p in range(view.num_turns)]
        self.excluded = frozenset(p for p in range(view.num_turns) if view.is_context_turn(p))

    def usable(self, units: Sequence[Evidence]) -> list[Evidence]:
        """``units`` without the excluded turns' (system prompts)."""
        return [u for u in units if u.order[0] not in self.excluded] if self.excluded else list(units)

    def dense_order(self, qvec: np.ndarray) -> list[int]:
        """Turn positions by cosine to ``qvec``, best first."""
        v = self.view
        if v.num_turns == 0:
            return []
        _, ids = v.turn_index.search(np.ascontiguousarray(qvec[None, :], dtype=np.float32), v.num_turns)
        return [int(p) for p in ids[0] if p >= 0]  # (a merged scope's index ids are its row positions too)


class TurnRAG:
    """(a) Top raw turns by cosine until the budget is full."""

    name = "turn_rag"

    def __init__(self, turns: TurnUnits) -> None:
        self.turns = turns

    def select(self, question: str, qvec: np.ndarray, budget: int) -> Selected:
        """The plain selection for one question."""
        return pack(self.turns.usable([self.turns.units[p] for p in self.turns.dense_order(qvec)]), budget,
                    self.turns.encoding)


class SentenceRAG:
    """(b) Top sentences by cosine (sentence chunks of the turns, same embedding model)."""

    name = "sentence_rag"

    def __init__(self, turns: TurnUnits, embedder: Any) -> None:
        v = turns.view
        self.turns = turns
        self.units = [unit(v, f"{v.turn_ids[p]}#{k}", p, k, s, turns.encoding)
                      for p in range(v.num_turns) for k, s in enumerate(split_sentences(v.turn_text[p]) or [v.turn_text[p]])]
        texts = [u.text for u in self.units]
        self.vectors = (np.asarray(embedder.encode(texts), dtype=np.float32) if texts
                        else np.zeros((0, v.dim), dtype=np.float32))

    def select(self, question: str, qvec: np.ndarray, budget: int) -> Selected:
        """The plain selection for one question."""
        if not self.units:
            return Selected([], "", 0)
        sims = self.vectors @ np.asarray(qvec, dtype=np.float32)
        order = np.lexsort((np.arange(len(sims)), -sims))  # similarity desc, position asc (deterministic)
        return pack(self.turns.usable([self.units[i] for i in order]), budget, self.turns.encoding)


class HybridRAG:
    """(c) BM25 over turns + dense turn ranking, fused with RRF."""

    name = "hybrid_rag"

    def __init__(self, turns: TurnUnits, bm25_k1: float, bm25_b: float, rrf_k: float) -> None:
        v = turns.view
        self.turns = turns
        self.rrf_k = rrf_k
        self.pos = {t: p for p, t in enumerate(v.turn_ids)}
        self.bm25 = BM25Index([f"{s}: {t}" for s, t in zip(v.turn_speaker, v.turn_text, strict=False)], ["turn"] * v.num_turns,
                              v.turn_ids, bm25_k1, bm25_b)

    def select(self, question: str, qvec: np.ndarray, budget: int) -> Selected:
        """The plain selection for one question."""
        v = self.turns.view
        dense = [Hit("turn", v.turn_ids[p], 0.0) for p in self.turns.dense_order(qvec)]
        lexical = self.bm25.search(question, v.num_turns)
        fused = rrf([RankedList("dense", 0, v.conversation_id, dense), RankedList("bm25", 0, v.conversation_id, lexical)],
                    k=self.rrf_k)
        return pack(self.turns.usable([self.turns.units[self.pos[it.key.id]] for it in fused]), budget,
                    self.turns.encoding)


class FullContext:
    """(d) Every turn that fits ``limit`` tokens (newest kept), the same text for every question."""

    name = "full_context"

    def __init__(self, turns: TurnUnits, limit: int) -> None:
        self.turns = turns
        self.limit = limit

    @cached_property
    def selection(self) -> Selected:
        """The conversation's plain context (computed once)."""
        units, used = [], 0
        for u in reversed(self.turns.usable(self.turns.units)):  # newest first: a conversation that does not fit keeps its latest turns
            if used + u.tokens > self.limit:
                break
            units.append(u)
            used += u.tokens
        units.reverse()
        sel = pack(units, self.limit, self.turns.encoding)
        sel.truncated = len(sel.units) < len(self.turns.usable(self.turns.units))
        return sel

    def select(self, question: str, qvec: np.ndarray, budget: int) -> Selected:
        """The whole conversation (``budget`` does not apply to the ceiling)."""
        return self.selection


__all__ = ["FullContext", "HybridRAG", "MergedTurns", "Selected", "SentenceRAG", "TurnRAG", "TurnUnits", "TurnView",
           "lychee_plain_context", "merged_turns", "pack", "plain_context", "plain_line", "qualified", "unit"]
