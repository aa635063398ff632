"""A search asked to explain itself: channel ranks, fused scores and what the budget dropped
(query/explain.py), with the result JSON unchanged when not asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lychee_ray.query.results import result_json
from tests.query.test_query import open_store
from tests.stores import conversation_spec, make_store

QUESTION = "What did Melanie and Caroline do?"


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory, embedder) -> Path:
    return make_store(tmp_path_factory.mktemp("explain"), embedder, [conversation_spec("c-1", "u-1")])


@pytest.mark.parametrize("units", ["turns", "items"])
def test_explain_reports_ranks_scores_and_budget_drops(store_dir, embedder, units):
    with open_store(store_dir, embedder, **{"query.select.units": units}) as store:
        small = store.search("c-1", QUESTION, budget_tokens=60, explain=True)
        plain = store.search("c-1", QUESTION, budget_tokens=60)
        wide = store.search("c-1", QUESTION, budget_tokens=4000, explain=True)
    ex = small.explain
    assert ex is not None and plain.explain is None
    # the same evidence with and without the explanation
    assert [e.id for e in small.evidence] == [e.id for e in plain.evidence]
    assert ex.channels and set(ex.channels) >= {"records", "turns"}
    assert len(ex.pool) == small.pool_size and [p.position for p in ex.pool] == list(range(1, small.pool_size + 1))
    scores = [p.fused_score for p in ex.pool]
    assert scores == sorted(scores, reverse=True)  # fused order (no reranker configured)
    for p in ex.pool:
        assert p.ranks and set(p.ranks) <= set(ex.channels) and min(p.ranks.values()) >= 1
        assert (p.outcome == "selected") == (p.shown_by is not None)
        assert (p.outcome == "budget") == (p.tokens is not None)
    ids = {e.id for e in small.evidence}
    assert {p.shown_by for p in ex.pool if p.shown_by} <= ids
    # one entry per evidence unit, in the result's order, with the ranks of the items it shows
    assert [e.id for e in ex.evidence] == [e.id for e in small.evidence]
    for er in ex.evidence:
        mine = [p for p in ex.pool if p.position in er.pool_positions]
        assert all(p.shown_by == er.id for p in mine)
        if mine:
            assert er.fused_score == max(p.fused_score for p in mine)
            for ch, r in er.ranks.items():
                assert r == min(p.ranks[ch] for p in mine if ch in p.ranks)
    # a small budget drops candidates that need more than is left; a wide one drops none
    assert ex.dropped and ex.skipped["budget"] >= 1
    assert all(d.tokens > ex.remaining_tokens for d in ex.dropped)
    assert not {d.id for d in ex.dropped} & ids
    assert [d.score for d in ex.dropped] == sorted((d.score for d in ex.dropped), reverse=True)
    assert wide.explain is not None and not wide.explain.dropped and wide.explain.remaining_tokens > 0
    assert ex.remaining_tokens == small.budget_tokens - small.usage.context_tokens


def test_result_json_is_unchanged_without_explain(store_dir, embedder):
    with open_store(store_dir, embedder) as store:
        plain = json.loads(result_json(store.search("c-1", QUESTION)))
        explained = json.loads(result_json(store.search("c-1", QUESTION, explain=True)))
    assert "explain" not in plain
    assert set(explained) == set(plain) | {"explain"}
    assert {"channels", "pool", "evidence", "dropped", "skipped", "remaining_tokens"} == set(explained["explain"])
