"""The recall channels (DESIGN §1 step 5) and their one registry.

Each channel searches one loaded conversation (:class:`~lychee_ray.query.view.ConversationView`)
for one route and returns a ranked list of hits (:class:`~.base.RecallChannel`):

(a) ``records`` — record vectors (:mod:`.vectors`);
(b) ``nodes`` — evidence-node expansion (:mod:`.nodes`);
(c) ``turns`` — raw turn vectors (:mod:`.vectors`);
(d) ``bm25`` — lexical BM25 over record and turn texts (:mod:`.lexical`);
(e) ``turn_bm25`` — BM25 over the raw turns alone (:mod:`.lexical`);
(f) ``time`` — records and turns whose time overlaps the route's constraint (:mod:`.time_filter`).

:data:`RECALL_CHANNELS` is what the engine runs, per (conversation, route), in this order (fusion
breaks score ties by first appearance), what ``query.fusion.weights`` must weigh (one key per
channel, checked below) and what evaluation variants switch off. Adding a channel is one module
with a :class:`~.base.RecallChannel` plus one entry here, and its weight's default in
``configs/default.yaml`` (``query.fusion.weights``).
"""

from __future__ import annotations

from lychee_ray.config import ChannelWeights
from lychee_ray.query.channels.base import RecallChannel
from lychee_ray.query.channels.lexical import (
    RecordTurnBM25,
    TurnBM25,
    recall_bm25,
    recall_turn_bm25,
    route_query_text,
)
from lychee_ray.query.channels.nodes import EvidenceNodes, exact_node_keys, recall_nodes
from lychee_ray.query.channels.time_filter import TimeOverlap, recall_time, time_bounds
from lychee_ray.query.channels.vectors import RecordVectors, TurnVectors, recall_records, recall_turns

RECALL_CHANNELS: tuple[RecallChannel, ...] = (
    RecordVectors(), EvidenceNodes(), TurnVectors(), RecordTurnBM25(), TurnBM25(), TimeOverlap(),
)
CHANNELS: tuple[str, ...] = tuple(c.name for c in RECALL_CHANNELS)

if set(CHANNELS) != set(ChannelWeights.model_fields) or len(set(CHANNELS)) != len(CHANNELS):
    # a channel without a weight default (or a weight without a channel): configs/default.yaml's
    # query.fusion.weights lists one key per registered channel
    raise RuntimeError(f"recall channels {CHANNELS} and query.fusion.weights keys "
                       f"{tuple(ChannelWeights.model_fields)} differ")

__all__ = [
    "CHANNELS", "RECALL_CHANNELS", "RecallChannel", "exact_node_keys", "recall_bm25", "recall_nodes", "recall_records",
    "recall_time", "recall_turn_bm25", "recall_turns", "route_query_text", "time_bounds",
]
