"""Recall depth that grows with the memory.

A fixed top-k reaches a smaller share of a larger memory: on a conversation of a million tokens one
topic runs through hundreds of turns and records, and the few about a question's event sit below the
first sixty of every channel. Each channel's depth and the fused pool therefore grow with the size of
what is searched, its records plus its turns, as ``(size / query.recall.depth_reference_items) **
query.recall.depth_growth`` times the configured depths, never below them: a memory up to the
reference size is searched exactly as configured.
"""

from __future__ import annotations

from lychee_ray.config import RecallConfig

# the depths that grow (the node channel's node count and per-node cap, and the switches, do not)
GROWING_DEPTHS = ("record_depth", "node_record_depth", "time_depth", "turn_depth", "bm25_depth", "turn_bm25_depth")


def depth_scale(cfg: RecallConfig, items: int) -> float:
    """How many times the configured depths a memory of ``items`` records and turns is searched to."""
    ref = cfg.depth_reference_items
    if ref <= 0 or items <= ref:
        return 1.0
    return float((items / ref) ** cfg.depth_growth)


def scaled_recall(cfg: RecallConfig, items: int) -> RecallConfig:
    """``cfg`` with each growing depth multiplied by :func:`depth_scale` (a depth of 0, a channel
    switched off, stays 0); ``cfg`` itself when the memory is no larger than the reference."""
    s = depth_scale(cfg, items)
    if s == 1.0:
        return cfg
    return cfg.model_copy(update={k: int(round(getattr(cfg, k) * s)) for k in GROWING_DEPTHS})


def scaled_pool(pool_size: int, cfg: RecallConfig, items: int) -> int:
    """The fused pool's size for a search over ``items`` records and turns."""
    return int(round(pool_size * depth_scale(cfg, items)))


__all__ = ["GROWING_DEPTHS", "depth_scale", "scaled_pool", "scaled_recall"]
