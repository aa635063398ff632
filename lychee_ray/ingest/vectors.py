"""The record and node vectors of a conversation: which texts still need embedding, and the
vectors once they are embedded.

Split from the rest of assembling a conversation so that the embedding can happen elsewhere: the
staged build (ingest/stages/) embeds the texts of many conversations in one model call, on another
worker, possibly on a GPU; :func:`~lychee_ray.ingest.pipeline.build_conversation` and an append's
increment embed them at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lychee_ray.core.records import EvidenceNode, MemoryRecord


@dataclass
class VectorPlan:
    """Rows to vectorise: every record, then the nodes of ``node_rows``; ``have`` holds the vectors
    already known (None = to embed), ``texts`` the texts of the None rows in order."""

    num_records: int
    node_rows: list[int]
    have: list[np.ndarray | None]
    texts: list[str]

    def vectors(self, fresh: np.ndarray, dim: int) -> np.ndarray:
        """All rows' vectors (``num_records`` record rows, then node rows) from ``fresh`` (the
        vectors of :attr:`texts`, in order) and the known ones."""
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
                 known_nodes: dict[tuple[str, str], np.ndarray] | None = None) -> VectorPlan:
    """What to embed for ``records`` and the nodes linking at least ``min_records_to_embed``
    records; vectors already stored are reused (records by id: the id fixes the text; nodes by
    (id, text): a node's text grows with its records)."""
    known_records = known_records or {}
    known_nodes = known_nodes or {}
    node_rows = [i for i, n in enumerate(nodes) if len(n.record_ids) >= min_records_to_embed]
    have: list[np.ndarray | None] = [known_records.get(r.record_id) for r in records]
    have += [known_nodes.get((nodes[i].node_id, nodes[i].text)) for i in node_rows]
    texts = [r.text for r, v in zip(records, have, strict=False) if v is None]
    texts += [nodes[i].text for i, v in zip(node_rows, have[len(records):], strict=False) if v is None]
    return VectorPlan(len(records), node_rows, have, texts)


__all__ = ["VectorPlan", "plan_vectors"]
