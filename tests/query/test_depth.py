"""Recall depth that grows with the memory: the scale, the scaled channel depths and the fused pool
(a search over a memory larger than the reference: tests/query/test_query.py)."""

from __future__ import annotations

import pytest

from lychee_ray.config import RecallConfig
from lychee_ray.query.depth import GROWING_DEPTHS, depth_scale, scaled_pool, scaled_recall


def test_a_memory_within_the_reference_is_searched_as_configured():
    cfg = RecallConfig(depth_reference_items=2500, depth_growth=0.5)
    for items in (0, 1, 2500):
        assert depth_scale(cfg, items) == 1.0
        assert scaled_recall(cfg, items) is cfg
        assert scaled_pool(200, cfg, items) == 200


def test_depths_grow_as_the_size_ratio_to_the_growth_power():
    cfg = RecallConfig(depth_reference_items=1000, depth_growth=0.5, record_depth=60, turn_depth=40,
                       node_depth=8, per_node_records=40)
    assert depth_scale(cfg, 4000) == pytest.approx(2.0)
    big = scaled_recall(cfg, 4000)
    assert big.record_depth == 120 and big.turn_depth == 80
    assert all(getattr(big, k) == round(2 * getattr(cfg, k)) for k in GROWING_DEPTHS)
    # the node count and per-node cap, and every other setting, stay as set
    assert big.node_depth == 8 and big.per_node_records == 40 and big.bm25_k1 == cfg.bm25_k1
    assert scaled_pool(200, cfg, 4000) == 400
    # linear growth, and growth 0 (or no reference) switches it off
    assert depth_scale(RecallConfig(depth_reference_items=1000, depth_growth=1.0), 3000) == pytest.approx(3.0)
    assert depth_scale(RecallConfig(depth_reference_items=1000, depth_growth=0.0), 3000) == 1.0
    assert depth_scale(RecallConfig(depth_reference_items=0), 10**6) == 1.0


def test_a_switched_off_channel_stays_off():
    cfg = RecallConfig(depth_reference_items=10, depth_growth=1.0, bm25_depth=0)
    assert scaled_recall(cfg, 1000).bm25_depth == 0
