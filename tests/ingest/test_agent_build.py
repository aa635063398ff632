"""Agent logs built end to end in-process (issue 35): detected, built, verified, grown as an append,
appended to with tool calls, searched by identifier, by user and with the agent's recent turns."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.append import append_turns
from lychee_ray.ingest.increment import AppendRequest, AppendTurn
from lychee_ray.ingest.runner import run_local_build
from lychee_ray.config import load_config
from lychee_ray.io.adapters import survey_input
from lychee_ray.io.store import StoreReader
from lychee_ray.io.verify import verify_store
from lychee_ray.memory import MemoryStore
from tests.io.test_agent_adapters import openai_log, write_jsonl


def _logs(extra: list[dict] | None = None) -> list[dict]:
    a = openai_log("c-1", extra)
    b = openai_log("c-2")
    for m in b["messages"]:
        for c in m.get("tool_calls") or []:
            c["function"]["arguments"] = c["function"]["arguments"].replace("W123", "W777")
        if m.get("content"):
            m["content"] = m["content"].replace("W123", "W777").replace("42.5", "99.0")
    return [a, b]


@pytest.mark.heavy
def test_agent_logs_build_grow_append_and_search(tmp_path: Path, embedder):
    cfg = load_config(env={})
    src = write_jsonl(tmp_path / "logs.jsonl", _logs())
    assert survey_input(src).format == "openai"
    ctx = make_context(cfg, "rules", embedder)
    s = run_local_build(cfg, "openai", src, tmp_path / "st", backend="rules", ctx=ctx)
    assert (s.built, s.failed) == (2, 0)
    report = verify_store(tmp_path / "st")
    assert report["ok"], report["problems"]
    data = StoreReader(tmp_path / "st").load("c-1")
    segs = data.segments.to_pylist()
    assert segs[0]["close_reason"] == "system_prompt" and segs[0]["turn_ids"] == ["m1"]
    types = set(data.records.column("type").to_pylist())
    assert {"constraint", "fact", "failure_pattern", "tool_affordance"} <= types  # (its one action failed: no event)

    # the log grew: a rebuild appends its new turns (same turn ids), nothing else is re-encoded
    grown = write_jsonl(tmp_path / "logs.jsonl", _logs(extra=[{"role": "user", "content": "Then cancel order W123."}]))
    s2 = run_local_build(cfg, "openai", grown, tmp_path / "st", backend="rules", ctx=ctx)
    assert (s2.built, s2.appended) == (1, 1) and s2.skipped == 1
    assert StoreReader(tmp_path / "st").markers["c-1"].counts.turns == 8

    # an agent appends its own turns with tool calls through the library
    actx = make_context(cfg, "rules", embedder, batched=False)
    res = append_turns(tmp_path / "st", AppendRequest(conversation_id="c-1", flush=True, turns=[
        AppendTurn(turn_id="m9", role="assistant", content="", tool_calls=[
            {"call_id": "k1", "name": "cancel_order", "arguments": json.dumps({"order_id": "W123"})}]),
        AppendTurn(turn_id="m10", role="tool", tool_call_id="k1", tool_name="cancel_order",
                   content=json.dumps({"order_id": "W123", "status": "cancelled"}))]), actx)
    assert res.stored_turn_ids == ["m9", "m10"]
    assert verify_store(tmp_path / "st")["ok"]

    with MemoryStore.open(tmp_path / "st", cfg, embedder=embedder, llm="rules") as store:
        hit = store.search("c-2", "What is the total of order W777?", budget_tokens=400)
        assert "99.0" in hit.context and "W123" not in hit.context, hit.context
        # the user's scope: both conversations, one copy of the shared policy when it is asked for
        both = store.search(None, "What is the refund policy?", budget_tokens=2000, user_id="u_1")
        assert set(both.conversation_ids) == {"c-1", "c-2"}
        rules = [e.text for e in both.evidence if e.type == "constraint"]
        assert rules and len(rules) == len(set(rules))
        # a question about something else leaves the system prompt out
        other = store.search("c-1", "What is the email of order W123?", budget_tokens=2000)
        assert all(e.type != "constraint" for e in other.evidence) and "alice@example.com" in other.context
        # "it" resolved from the agent's recent turns
        recent = store.search("c-1", "Was it cancelled?", budget_tokens=300,
                              recent_turns=[{"role": "user", "content": "I mean order W123."}])
        assert "W123" in " ".join(recent.plan.routes[0].search_texts)
        assert "cancelled" in recent.context


@pytest.mark.heavy
def test_agent_traffic_over_http_append_and_recent_turns(tmp_path: Path, embedder):
    """The service takes tool calls in appends (queued encoding, the default) and recent turns in searches."""
    from fastapi.testclient import TestClient

    from lychee_ray.serve import MemoryService, create_app

    cfg = load_config(env={})
    src = write_jsonl(tmp_path / "logs.jsonl", _logs())
    run_local_build(cfg, "openai", src, tmp_path / "st", backend="rules", ctx=make_context(cfg, "rules", embedder))
    svc = MemoryService(tmp_path / "st", cfg, embedder=embedder, llm="rules")
    with TestClient(create_app(svc)) as client:
        turns = [{"turn_id": "m20", "role": "user", "content": "Change the address of order W777 to 5 Elm St."},
                 {"turn_id": "m21", "role": "assistant", "content": "", "tool_calls": [
                     {"call_id": "z1", "name": "update_address",
                      "arguments": json.dumps({"order_id": "W777", "address": "5 Elm St"})}]},
                 {"turn_id": "m22", "role": "tool", "tool_call_id": "z1", "tool_name": "update_address",
                  "content": json.dumps({"order_id": "W777", "address": "5 Elm St", "status": "updated"})}]
        r = client.post("/v1/conversations/c-2/turns", json={"user_id": "u_1", "turns": turns})
        assert r.status_code == 200, r.text
        assert r.json()["stored_turn_ids"] == ["m20", "m21", "m22"]
        assert svc.appends.queue.drain(60)
        bad = client.post("/v1/conversations/c-2/turns", json={"turns": [
            {"turn_id": "m23", "role": "user", "content": "x", "tool_call_id": "z1"}]})
        assert bad.status_code == 422  # a tool link on a user turn names the field
        q = {"conversation_id": "c-2", "question": "What is its status now?", "budget_tokens": 600,
             "recent_turns": [{"role": "user", "content": "I asked about order W777 and 5 Elm St."}]}
        s = client.post("/v1/search", json=q)
        assert s.status_code == 200, s.text
        assert "W777" in " ".join(s.json()["plan"]["routes"][0]["search_texts"])
        assert "updated" in s.json()["context"]
        too_long = client.post("/v1/search", json={**q, "recent_turns": [{"content": "x" * 30000}]})
        assert too_long.status_code == 422
    svc.close()


def test_every_log_format_builds_with_its_format_detected(tmp_path: Path, embedder):
    """openai, anthropic and chatgpt files build through the library entry point, format detected."""
    from lychee_ray.api import build_memory
    from tests.io.test_agent_adapters import chatgpt_export

    anthropic = {"conversation_id": "a-1", "system": "You must be polite.", "messages": [
        {"role": "user", "content": "Find order W5."},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "t1", "name": "get_order", "input": {"id": "W5"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "{\"total\": 12}"}]}]}
    inputs = {"openai": write_jsonl(tmp_path / "o.jsonl", [openai_log()]),
              "anthropic": write_jsonl(tmp_path / "a.jsonl", [anthropic]),
              "chatgpt": tmp_path / "conversations.json"}
    inputs["chatgpt"].write_text(json.dumps(chatgpt_export()), encoding="utf-8")
    cfg = load_config(env={})
    for fmt, path in inputs.items():
        assert survey_input(path).format == fmt
        out = tmp_path / f"st-{fmt}"
        s = build_memory(path, out, cfg, llm="rules")
        assert (s.built, s.failed) == (1, 0), fmt
        assert verify_store(out)["ok"], fmt


@pytest.mark.heavy
def test_retrieval_eval_on_agent_logs_in_both_scopes(tmp_path: Path, embedder):
    """eval-retrieval derives questions from tool traffic and scores lychee and the baselines in a
    conversation's scope and in its user's (gold turns matched by conversation and turn id)."""
    from lychee_ray.eval.runners.retrieval import evaluate_retrieval, load_questions

    cfg = load_config(env={})
    src = write_jsonl(tmp_path / "logs.jsonl", _logs())
    run_local_build(cfg, "openai", src, tmp_path / "st", backend="rules", ctx=make_context(cfg, "rules", embedder))
    questions = load_questions("openai", src, None, cfg.eval.agentlog)
    assert {q.category for q in questions} >= {"lookup", "failure"} and all(q.meta["user_id"] == "u_1" for q in questions)
    with MemoryStore.open(tmp_path / "st", cfg, embedder=embedder, llm="rules") as store:
        for scope in ("conversation", "user"):
            report, results = evaluate_retrieval(store, questions, 800, baselines=["hybrid_rag"], scope=scope)
            assert report["scope"] == scope and report["questions"] == len(questions)
            assert report["lychee"]["answer_in_context"] is not None
            assert all(r.systems["hybrid_rag"].recall is not None for r in results)
        gold = results[0].systems["lychee"]
        assert all("/" in t for t in gold.covered)  # user scope: qualified turn ids
