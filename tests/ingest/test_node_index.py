"""The incremental node index equals ``build_nodes`` (issue 28; ingest/increment/node_index.py): built
whole, and after every tail replacement an append makes (tail segments re-encoded, new ones added)."""

from __future__ import annotations

import random

import pytest

from lychee_ray.ingest.increment.node_index import NodeIndex
from lychee_ray.ingest.nodes import build_nodes
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.pipeline import build_conversation
from lychee_ray.config import load_config
from lychee_ray.io.adapters import read_input
from tests.paths import LOCOMO_DIR, need
from tests.reliability.test_bad_input import HashEmbedder

CFG = load_config(env={})


@pytest.fixture(scope="module")
def built():
    """LoCoMo 26, first five sessions, built with the rules backend: records in conversation order."""
    import asyncio

    c = next(iter(read_input("locomo", need(LOCOMO_DIR / "26.json")))).conversation
    conv = c.model_copy(update={"sessions": c.sessions[:5]})
    art = asyncio.run(build_conversation(conv, make_context(CFG, "rules", HashEmbedder())))
    return conv, art.records, [t.turn_id for *_, t in conv.iter_turns()]


def test_built_whole_equals_build_nodes(built):
    conv, records, order = built
    idx = NodeIndex.build(records, order, CFG.nodes, conv.conversation_id, conv.user_id)
    assert idx.nodes() == build_nodes(records, order, CFG.nodes)
    assert len(idx) == len(build_nodes(records, order, CFG.nodes))


@pytest.mark.parametrize("cap", [200, 3])  # 3: most nodes hit the cap on their record list
def test_tail_replacements_equal_build_nodes(built, cap):
    conv, records, order = built
    cfg_nodes = CFG.nodes.model_copy(update={"max_records_per_node": cap})
    rng = random.Random(7)
    segs = list(dict.fromkeys(r.segment_id for r in records))
    idx = NodeIndex.build([], order, cfg_nodes, conv.conversation_id, conv.user_id)
    current: list = []
    nodes = {}
    for n_segs in range(1, len(segs) + 1):
        want = [r for r in records if r.segment_id in set(segs[:n_segs])]
        # the last 0-2 segments are replaced (a re-opened tail), sometimes with a record dropped
        keep_segs = set(segs[: max(0, n_segs - 1 - rng.randint(0, 2))])
        keep = sum(r.segment_id in keep_segs for r in current)
        assert [r.record_id for r in current[:keep]] == [r.record_id for r in want[:keep]]
        tail = want[keep:]
        if tail and rng.random() < 0.3:  # a provisional version with a record less, replaced next round
            changed, gone = idx.replace_tail(keep, tail[:-1])
            for n in changed:
                nodes[n.node_id] = n
            for g in gone:
                nodes.pop(g)
        changed, gone = idx.replace_tail(keep, tail)
        for n in changed:
            nodes[n.node_id] = n
        for g in gone:
            nodes.pop(g)
        current = want
        expected = build_nodes(want, order, cfg_nodes)
        assert idx.nodes() == expected, n_segs
        # what replace_tail reported, applied to the earlier nodes, is the same set
        assert sorted(nodes.values(), key=lambda n: (n.kind, n.key)) == expected, n_segs
