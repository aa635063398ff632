"""Channel (b): evidence-node expansion — nodes by vector plus exact key matches of the route's
entities/topics → their linked records (at most ``per_node`` per node, best first)."""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Sequence

import numpy as np

from lychee_ray.config import RecallConfig
from lychee_ray.core.keys import normalise_key
from lychee_ray.query.channels.base import faiss_search, ranked
from lychee_ray.query.hits import Hit
from lychee_ray.query.plan.model import Route
from lychee_ray.query.view import ConversationView


def exact_node_keys(entities: Sequence[str], topics: Sequence[str]) -> list[tuple[str, str]]:
    """(kind, key) pairs a route's entities and topics match exactly (entity, topic, entity×topic)."""
    ents = [k for k in dict.fromkeys(normalise_key(e) for e in entities) if k]
    tops = [k for k in dict.fromkeys(normalise_key(t) for t in topics) if k]
    out = [("entity_topic", f"{e}|{t}") for e in ents for t in tops if e != t]
    out += [("entity", e) for e in ents] + [("topic", t) for t in tops]
    return out


def recall_nodes(
    view: ConversationView, qvecs: np.ndarray, entities: Sequence[str], topics: Sequence[str],
    node_depth: int, depth: int, per_node: int,
) -> list[Hit]:
    """(b) Records linked from matched evidence nodes.

    Nodes: exact key matches of the route's entities/topics (node similarity counted as 1) plus the
    ``node_depth`` nodes nearest to the search texts. From each node its ``per_node`` records most
    similar to the search texts are taken; a record scores node similarity + record similarity
    (best over the nodes that reached it), so records of specific, well-matched nodes come first.
    """
    if depth <= 0 or view.num_records == 0 or len(qvecs) == 0:
        return []
    matched: dict[int, float] = {}
    for kk in exact_node_keys(entities, topics):
        i = view.keys.get(kk)
        if i is not None:
            matched[i] = 1.0
    for i, s in faiss_search(view.node_index, qvecs, node_depth, len(view.node_kind)).items():
        if s > matched.get(i, -np.inf):
            matched[i] = s
    if not matched:
        return []
    rec_sim = (view.record_vecs @ qvecs.T).max(axis=1) if len(qvecs) > 1 else view.record_vecs @ qvecs[0]
    best: dict[int, float] = {}
    for ni, ns in matched.items():
        recs = view.node_records[ni]
        if len(recs) == 0:
            continue
        sims = rec_sim[recs]
        if len(recs) > per_node:
            top = np.argpartition(-sims, per_node - 1)[:per_node]
            recs, sims = recs[top], sims[top]
        for r, s in zip(recs.tolist(), sims.tolist(), strict=False):
            score = ns + s
            if score > best.get(r, -np.inf):
                best[r] = score
    return [Hit("record", view.record_ids[i], s) for i, s in ranked(best, depth)]


@dataclass(frozen=True)
class EvidenceNodes:
    """(b) Records linked from the evidence nodes a route matches."""

    name: str = "nodes"
    depth_keys: tuple[str, ...] = ("node_depth", "node_record_depth")

    def recall(self, view: ConversationView, route: Route, qvecs: np.ndarray, cfg: RecallConfig) -> list[Hit]:
        return recall_nodes(view, qvecs, route.entities, route.topics, cfg.node_depth, cfg.node_record_depth,
                            cfg.per_node_records)


__all__ = ["EvidenceNodes", "exact_node_keys", "recall_nodes"]
