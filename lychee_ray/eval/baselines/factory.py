"""Every retrieval baseline by name (:mod:`.retrieval`, :mod:`.passages`): what ``eval-retrieval``
and ``eval`` compare lychee with at the same budget."""

from __future__ import annotations

from typing import Any

from lychee_ray.eval.baselines.passages import PassageRAG
from lychee_ray.eval.baselines.retrieval import FullContext, HybridRAG, SentenceRAG, TurnRAG, TurnUnits

BASELINES = ("turn_rag", "sentence_rag", "hybrid_rag", "passage_rag", "full_context")
# the baselines that embed texts of their own with the document embedder
EMBEDDING_BASELINES = ("sentence_rag", "passage_rag")


def make_baseline(name: str, turns: TurnUnits, cfg: Any, embedder: Any = None) -> Any:
    """The baseline ``name`` over ``turns`` (``cfg``: the :class:`~lychee_ray.config.LycheeConfig`;
    ``embedder``: the document embedder, needed by :data:`EMBEDDING_BASELINES`)."""
    r = cfg.query.recall
    if name == "turn_rag":
        return TurnRAG(turns)
    if name == "sentence_rag":
        return SentenceRAG(turns, embedder)
    if name == "hybrid_rag":
        return HybridRAG(turns, r.bm25_k1, r.bm25_b, cfg.query.fusion.rrf_k)
    if name == "passage_rag":
        return PassageRAG(turns, embedder, cfg.eval.passage_rag_max_tokens, r.bm25_k1, r.bm25_b, cfg.query.fusion.rrf_k)
    if name == "full_context":
        return FullContext(turns, cfg.eval.full_context_max_tokens)
    raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}")


__all__ = ["BASELINES", "EMBEDDING_BASELINES", "make_baseline"]
