"""The record, node and passage vectors of a conversation: which texts still need embedding, and
the vectors once they are embedded.

Split from the rest of assembling a conversation so that the embedding can happen elsewhere: the
staged build (ingest/stages/) embeds the texts of many conversations in one model call, on another
worker, possibly on a GPU; :func:`~lychee_ray.ingest.pipeline.build_conversation` and an append's
increment embed them at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lychee_ray.core.passages import Passage
from lychee_ray.core.records import EvidenceNode, MemoryRecord

# how a stored passage vector is known again: its id and span (a turn's text never changes under its id)
PassageKey = tuple[str, int, int]


def passage_key(p: Passage) -> PassageKey:
    return (p.passage_id, p.char_start, p.char_end)


@dataclass
class VectorPlan:
    """Rows to vectorise: every record, then the nodes of ``node_rows``, then every passage; ``have``
    holds the vectors already known (None = to embed), ``texts`` the texts of the None rows in order."""

    num_records: int
    node_rows: list[int]
    have: list[np.ndarray | None]
    texts: list[str]
    num_passages: int = 0

    @property
    def num_nodes(self) -> int:
        return len(self.node_rows)

    def vectors(self, fresh: np.ndarray, dim: int) -> np.ndarray:
        """All rows' vectors (``num_records`` record rows, node rows, ``num_passages`` passage rows)
        from ``fresh`` (the vectors of :attr:`texts`, in order) and the known ones."""
        fresh = np.asarray(fresh, dtype=np.float32).reshape(-1, dim)
        if len(fresh) != len(self.texts):
            raise ValueError(f"{len(fresh)} vectors for {len(self.texts)} texts")
        out = np.empty((len(self.have), dim), dtype=np.float32)
        missing = [i for i, v in enumerate(self.have) if v is None]
        if missing:
            out[missing] = fresh
        known = [i for i, v in enumerate(self.have) if v is not None]
        if known:
            out[known] = np.asarray([self.have[i] for i in known], dtype=np.float32)
        return out


def plan_vectors(records: list[MemoryRecord], nodes: list[EvidenceNode], min_records_to_embed: int,
                 known_records: dict[str, np.ndarray] | None = None,
                 known_nodes: dict[tuple[str, str], np.ndarray] | None = None,
                 passages: list[Passage] | None = None,
                 known_passages: dict[PassageKey, np.ndarray] | None = None) -> VectorPlan:
    """What to embed for ``records``, the nodes linking at least ``min_records_to_embed`` records
    and ``passages``; vectors already stored are reused (records by id: the id fixes the text; nodes
    by (id, text): a node's text grows with its records; passages by id and span)."""
    known_records = known_records or {}
    known_nodes = known_nodes or {}
    known_passages = known_passages or {}
    passages = passages or []
    node_rows = [i for i, n in enumerate(nodes) if len(n.record_ids) >= min_records_to_embed]
    have: list[np.ndarray | None] = [known_records.get(r.record_id) for r in records]
    have += [known_nodes.get((nodes[i].node_id, nodes[i].text)) for i in node_rows]
    have += [known_passages.get(passage_key(p)) for p in passages]
    n_rec, n_node = len(records), len(node_rows)
    texts = [r.text for r, v in zip(records, have, strict=False) if v is None]
    texts += [nodes[i].text for i, v in zip(node_rows, have[n_rec:n_rec + n_node], strict=False) if v is None]
    texts += [p.text for p, v in zip(passages, have[n_rec + n_node:], strict=False) if v is None]
    return VectorPlan(n_rec, node_rows, have, texts, len(passages))


__all__ = ["PassageKey", "VectorPlan", "passage_key", "plan_vectors"]
