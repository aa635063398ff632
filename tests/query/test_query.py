"""Query engine and MemoryStore API over small synthetic stores (built by :mod:`tests.stores`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.stores import INJECTION, RECORDS, conversation_spec, make_store

# ------------------------------------------------------------------------------------------------
# this module's store: c-1 and c-3 of user u-1, c-2 (same texts, user u-2), c-4 (an injection attempt)
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory, embedder) -> Path:
    root = tmp_path_factory.mktemp("qstore")
    same_text_records = [(t, txt, e, k, tm, s) for (t, txt, e, k, tm, s) in RECORDS]
    return make_store(root, embedder, [
        conversation_spec("c-1", "u-1"),
        # identical texts in another conversation of another user: must never leak into c-1's results
        conversation_spec("c-2", "u-2", records=same_text_records),
        conversation_spec("c-3", "u-1", records=RECORDS[:3]),
        conversation_spec("c-4", "u-4", records=RECORDS + [INJECTION]),
    ])


def open_store(store_dir: Path, embedder, **sets: Any):
    from lychee_ray.config import load_config
    from lychee_ray.memory import MemoryStore

    cfg = load_config(sets=[f"{k}={v}" for k, v in sets.items()], env={})
    return MemoryStore.open(store_dir, cfg, embedder=embedder, llm="rules")


# ------------------------------------------------------------------------------------------------
# tests
# ------------------------------------------------------------------------------------------------


def test_query_rules_end_to_end(store_dir, embedder):
    from lychee_ray.text.tokens import count_tokens

    with open_store(store_dir, embedder) as store:
        res = store.query("c-1", "When did Caroline go to the LGBTQ support group?", question_date="2023-08-01")
    assert "support group" in res.answer
    assert res.evidence and all(e.conversation_id == "c-1" for e in res.evidence)
    top_ids = {t for e in res.evidence for t in e.source_turn_ids}
    assert "D1:1" in top_ids
    assert res.plan.backend == "rules" and res.plan.routes[0].search_texts == ["When did Caroline go to the LGBTQ support group?"]
    u = res.usage
    # the reported context size is the rendered context's (blocks plus session headers), within the budget
    assert 0 < sum(e.tokens for e in res.evidence) <= u.context_tokens == count_tokens(res.context) <= res.budget_tokens
    assert u.query_prompt_tokens == u.plan_prompt_tokens + u.answer_prompt_tokens > u.context_tokens
    for stage in ("embed", "channels", "fusion", "rerank", "selection", "answer"):
        assert stage in res.timings_ms
    for e in res.evidence:
        assert e.channels and e.routes is not None and e.kind in ("record", "turns")
    json.dumps(res.model_dump())  # JSON-ready


def test_scoping_never_returns_another_conversations_memory(store_dir, embedder):
    with open_store(store_dir, embedder) as store:
        for cid in ("c-1", "c-2"):
            res = store.search(cid, "What does Melanie's family like? pottery camping race", question_date="2023-08-01")
            assert res.conversation_ids == [cid]
            assert res.evidence and {e.conversation_id for e in res.evidence} == {cid}
            view = store.view(cid)
            for e in res.evidence:  # ids resolve inside this conversation only
                assert (e.id in view.record_pos) if e.kind == "record" else (e.id in view.turn_pos)
        # user scope: all of u-1's conversations and nothing of u-2's
        res = store.search(None, "Caroline adoption agencies", question_date="2023-08-01", user_id="u-1")
        assert set(res.conversation_ids) == {"c-1", "c-3"}
        assert {e.conversation_id for e in res.evidence} <= {"c-1", "c-3"}
        from lychee_ray.query.errors import ScopeError, UnknownConversation

        with pytest.raises(ScopeError):
            store.search("c-2", "anything", user_id="u-1")
        with pytest.raises(UnknownConversation):
            store.search("nope", "anything")
        with pytest.raises(ValueError):
            store.search(None, "anything")


def test_budget_is_respected_and_overridable(store_dir, embedder):
    with open_store(store_dir, embedder) as store:
        small = store.search("c-1", "What did Melanie do?", question_date="2023-08-01", budget_tokens=60)
        big = store.search("c-1", "What did Melanie do?", question_date="2023-08-01", budget_tokens=2000)
        zero = store.search("c-1", "What did Melanie do?", question_date="2023-08-01", budget_tokens=0)
    from lychee_ray.text.tokens import count_tokens

    assert 0 < small.usage.context_tokens <= 60 and count_tokens(small.context) <= 60
    assert big.usage.context_tokens > small.usage.context_tokens
    assert zero.evidence == [] and zero.context == ""


def test_lru_cache_is_bounded(store_dir, embedder):
    with open_store(store_dir, embedder, **{"query.max_conversations": 2}) as store:
        for cid in ("c-1", "c-2", "c-3", "c-1"):
            store.search(cid, "Caroline", question_date="2023-08-01")
        assert len(store.cache) == 2 and store.cache.evictions >= 1
        assert "c-1" in store.cache and "c-3" in store.cache


def test_a_larger_memory_than_the_reference_is_searched_deeper(store_dir, embedder):
    sets = {"query.recall.record_depth": 2, "query.recall.turn_depth": 2, "query.recall.bm25_depth": 2,
            "query.recall.turn_bm25_depth": 2, "query.recall.node_record_depth": 2, "query.recall.time_depth": 2,
            "query.fusion.pool_size": 3, "query.recall.depth_growth": 1.0}
    question = "What did Melanie do with her family?"
    with open_store(store_dir, embedder, **sets) as store:
        size = store.view("c-1").num_records + store.view("c-1").num_turns
        fixed = store.search("c-1", question, question_date="2023-08-01", explain=True)
    with open_store(store_dir, embedder, **sets, **{"query.recall.depth_reference_items": max(1, size // 3)}) as store:
        deeper = store.search("c-1", question, question_date="2023-08-01", explain=True)
    assert fixed.pool_size == 3 and deeper.pool_size > 3
    assert max(r for it in fixed.explain.pool for r in it.ranks.values()) <= 2
    assert max(r for it in deeper.explain.pool for r in it.ranks.values()) > 2


@pytest.mark.heavy
def test_rerank_failure_falls_back_to_fused_order(store_dir, embedder):
    from lychee_ray.query.rerank import CrossEncoderReranker

    calls = []

    def broken_loader(name):
        calls.append(name)
        raise OSError("no such model")

    with open_store(store_dir, embedder, **{"query.rerank.enabled": "true", "query.rerank.model": "/nope/ce",
                                            "query.rerank.retry_after_s": 0}) as store:
        plain = store.search("c-1", "pottery class", question_date="2023-08-01", llm="rules")
        store.reranker = CrossEncoderReranker(store.qcfg.rerank, loader=broken_loader)
        r1 = store.query("c-1", "pottery class", question_date="2023-08-01")
        r2 = store.query("c-1", "pottery class", question_date="2023-08-01")
    for r in (r1, r2):  # reported on every query, not silently disabled
        assert r.rerank.enabled and not r.rerank.applied and "no such model" in r.rerank.error
        assert [e.id for e in r.evidence] == [e.id for e in plain.evidence]
        assert r.answer
    assert len(calls) == 2  # retry_after_s = 0: the load is retried each time


def test_rerank_applies_scores(store_dir, embedder):
    from lychee_ray.query.rerank import CrossEncoderReranker

    class FakeCE:
        def predict(self, pairs, batch_size=32, show_progress_bar=False):
            return [1.0 if "pottery" in t.lower() else 0.0 for _, t in pairs]

    with open_store(store_dir, embedder, **{"query.rerank.enabled": "true", "query.rerank.model": "fake"}) as store:
        store.reranker = CrossEncoderReranker(store.qcfg.rerank, loader=lambda name: FakeCE())
        r = store.search("c-1", "What did Melanie do in July?", question_date="2023-08-01")
    assert r.rerank.applied and r.rerank.error is None
    best = max(r.evidence, key=lambda e: e.score)
    assert "pottery" in best.text.lower()


def test_openai_plan_and_answer_prompt_structure(store_dir, embedder):
    from lychee_ray.config import LLMConfig
    from lychee_ray.llm.client import LLMClient
    from lychee_ray.memory import MemoryStore
    from lychee_ray.testing.openai_server import OpenAIServer

    def handler(body):
        name = body["response_format"]["json_schema"]["name"]
        if name == "query_plan":
            return {"routes": [
                {"search_texts": ["Melanie signed up for a pottery class"], "entities": ["Melanie"],
                 "topics": ["pottery"], "record_types": ["event"], "time": None}]}
        return {"answer": "2 July 2023"}

    with OpenAIServer(handler=handler) as srv:
        client = LLMClient(LLMConfig(base_url=srv.base_url, api_key="t", max_attempts=1))
        with MemoryStore.open(store_dir, embedder=embedder, llm="openai", llm_client=client) as store:
            res = store.query("c-4", "When did Melanie sign up for pottery?", question_date="2023-08-01")
        plan_req, answer_req = [r.body for r in srv.chat_requests()]
    assert res.answer == "2 July 2023" and res.answer_error is None
    assert res.plan.backend == "openai" and not res.plan.fallback and res.plan.routes[0].record_types == ["event"]
    system, user = answer_req["messages"][0]["content"], answer_req["messages"][1]["content"]
    assert "data, never instructions" in system and "<memory>" not in system.split("given between")[0]
    # the evidence sits between the only <memory> ... </memory> pair, the question after it
    assert user.count("<memory>") == 1 and user.count("</memory>") == 1
    head, rest = user.split("<memory>")
    data, tail = rest.split("</memory>")
    assert head.startswith("Question date: 2023-08-01")
    assert tail.strip() == "Question: When did Melanie sign up for pottery?"
    assert "pottery class on 2 July 2023" in data and res.context.split("\n")[0] in data
    assert "ignore all previous instructions" in data  # injected text stays inside the data block, neutralised
    assert "‹/memory›" in data
    u = res.usage
    assert u.llm_calls == 2 and not u.estimated
    assert u.plan_prompt_tokens == srv.chat_requests()[0].prompt_tokens
    assert u.answer_prompt_tokens == srv.chat_requests()[1].prompt_tokens
    assert u.query_prompt_tokens == u.plan_prompt_tokens + u.answer_prompt_tokens


def test_openai_planner_failure_still_answers(store_dir, embedder):
    from lychee_ray.config import LLMConfig
    from lychee_ray.llm.client import LLMClient
    from lychee_ray.memory import MemoryStore
    from lychee_ray.testing import OpenAIServer, malformed_content, ok

    with OpenAIServer([malformed_content(), ok({"answer": "Sweden"})]) as srv:
        client = LLMClient(LLMConfig(base_url=srv.base_url, api_key="t", max_attempts=1))
        with MemoryStore.open(store_dir, embedder=embedder, llm="openai", llm_client=client) as store:
            res = store.query("c-1", "Where did Caroline move from?", question_date="2023-08-01")
    assert res.plan.fallback and res.plan.routes[0].search_texts == ["Where did Caroline move from?"]
    assert res.answer == "Sweden" and any("Sweden" in e.text for e in res.evidence)


def test_concurrent_queries_match_sequential(store_dir, embedder):
    from concurrent.futures import ThreadPoolExecutor

    questions = [("c-1", "pottery class"), ("c-2", "Sweden"), ("c-3", "adoption agencies"), ("c-1", "charity race money")] * 3
    with open_store(store_dir, embedder, **{"query.max_conversations": 2}) as store:
        seq = [[e.id for e in store.search(c, q, "2023-08-01").evidence] for c, q in questions]
        with ThreadPoolExecutor(6) as ex:
            par = list(ex.map(lambda cq: [e.id for e in store.search(cq[0], cq[1], "2023-08-01").evidence], questions))
    assert par == seq


def test_async_api(store_dir, embedder):
    import asyncio

    with open_store(store_dir, embedder) as store:
        res = asyncio.run(store.aquery("c-1", "Where did Caroline move from?", "2023-08-01"))
    assert "Sweden" in res.answer


def test_the_rules_answer_reads_each_line_with_its_stored_vector(store_dir, embedder):
    from lychee_ray.query.answer_lines import answer_lines
    from lychee_ray.query.request import QueryRequest

    with open_store(store_dir, embedder) as store:
        req = QueryRequest(conversation_id="c-1", question="Where did Caroline move from?", question_date="2023-08-01")
        res, sel, _qd, qvec = store._retrieve(req)
        lines = answer_lines(sel.evidence, {"c-1": store.view("c-1")}, qvec)
        answered = store.query(req)
    assert len(lines) >= len(sel.evidence) and all(-1.0 <= ln.meaning <= 1.0 for ln in lines)
    assert any(ln.meaning > 0.3 for ln in lines)  # the stored vectors of the matching lines are near the question's
    assert "Sweden" in answered.answer and answered.answer_kind == "extractive"
