"""The query service's HTTP API without Ray: FastAPI TestClient over :class:`MemoryService`."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from lychee_ray.config import load_config
from lychee_ray.serve import ConversationInfo, MemoryService, QueryResponse, SearchResponse, create_app
from tests.stores import RECORDS, conversation_spec, make_store

Q = "When did Caroline go to the LGBTQ support group?"
TOKEN = "test-token-123"


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory, embedder) -> Path:
    return make_store(tmp_path_factory.mktemp("serve_store"), embedder, [
        conversation_spec("c-1", "u-1"),
        conversation_spec("c-2", "u-2"),  # same texts, another user: must never leak
        conversation_spec("c-3", "u-1", records=RECORDS[:3]),
        conversation_spec("c-4", "u-4"),
    ])


def make_service(store_dir: Path, embedder, llm: str | None = "rules", **sets: Any) -> MemoryService:
    cfg = load_config(sets=[f"{k}={v}" for k, v in sets.items()], env={})
    return MemoryService(store_dir, cfg, embedder=embedder, llm=llm)


@pytest.fixture(scope="module")
def client(store_dir, embedder):
    svc = make_service(store_dir, embedder, **{"serve.reload_interval_s": 0})
    with TestClient(create_app(svc)) as c:
        yield c
    svc.close()


def body(**kw: Any) -> dict[str, Any]:
    return {"conversation_id": "c-1", "question": Q, "question_date": "2023-08-01", **kw}


def test_search_query_conversation_health_docs(client):
    r = client.post("/v1/search", json=body())
    assert r.status_code == 200, r.text
    s = SearchResponse.model_validate(r.json())
    assert s.conversation_ids == ["c-1"] and s.evidence
    assert all(e.conversation_id == "c-1" for e in s.evidence)
    assert "D1:1" in {t for e in s.evidence for t in e.source_turn_ids}
    e = s.evidence[0]
    assert e.id and e.text and e.type and 0 <= e.score <= 1
    assert {"embed", "channels", "selection", "queue", "server"} <= set(s.timings)
    assert "answer" not in r.json()

    r = client.post("/v1/query", json=body())
    assert r.status_code == 200, r.text
    q = QueryResponse.model_validate(r.json())
    assert "support group" in q.answer and q.plan.backend == "rules" and "answer" in q.timings
    assert q.usage.query_prompt_tokens == q.usage.plan_prompt_tokens + q.usage.answer_prompt_tokens

    r = client.get("/v1/conversations/c-1")
    info = ConversationInfo.model_validate(r.json())
    assert (info.user_id, info.sessions, info.turns, info.records, info.segments) == ("u-1", 2, 8, len(RECORDS), 1)
    assert info.failed_segments == 0 and info.speakers == ["Caroline", "Melanie"]
    assert info.date_from.startswith("2023-05-08") and info.date_to.startswith("2023-06-09")

    h = client.get("/healthz").json()
    assert h["status"] == "ok" and h["conversations"] == 4
    assert client.get("/docs").status_code == 200
    paths = client.get("/openapi.json").json()["paths"]
    assert {"/v1/query", "/v1/search", "/v1/conversations/{conversation_id}", "/healthz", "/v1/admin/reload"} <= set(paths)


def test_bearer_token_on_every_endpoint_but_healthz_and_docs(store_dir, embedder):
    svc = make_service(store_dir, embedder, **{"serve.token": TOKEN})
    with TestClient(create_app(svc)) as c:
        calls = [("post", "/v1/search", body()), ("post", "/v1/query", body()), ("get", "/v1/conversations/c-1", None),
                 ("get", "/v1/conversations", None), ("post", "/v1/admin/reload", None), ("get", "/v1/admin/stats", None)]
        for method, path, js in calls:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": TOKEN}, {"Authorization": f"Basic {TOKEN}"}):
                r = c.request(method, path, json=js, headers=headers)
                assert r.status_code == 401, (path, headers)
                assert r.headers["www-authenticate"] == "Bearer" and r.json()["error"] == "unauthorized"
            ok = c.request(method, path, json=js, headers={"Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200, (path, ok.text)
        for open_path in ("/healthz", "/docs", "/redoc", "/openapi.json", "/docs-assets/swagger-ui.css"):
            assert c.get(open_path).status_code == 200, open_path  # no memory in them; a browser sends no token
        # 401 comes before the size check: an unauthenticated client cannot make the service read a body
        assert c.post("/v1/search", content=b"x" * 100_000).status_code == 401
    svc.close()


def test_scope_unknown_ids_and_other_users(client):
    r = client.post("/v1/search", json=body(conversation_id="nope"))
    assert r.status_code == 404 and "nope" in r.json()["detail"]
    r = client.post("/v1/query", json={"user_id": "ghost", "question": Q})
    assert r.status_code == 404 and "ghost" in r.json()["detail"]
    # a conversation that exists but is another user's looks exactly like a missing one
    other = client.post("/v1/search", json=body(user_id="u-1", conversation_id="c-2"))
    missing = client.post("/v1/search", json=body(user_id="u-1", conversation_id="c-999"))
    assert other.status_code == missing.status_code == 404
    assert other.json()["detail"].replace("c-2", "X") == missing.json()["detail"].replace("c-999", "X")
    # user scope: all of u-1's conversations and nothing else, although c-2 holds the same texts
    r = client.post("/v1/search", json={"user_id": "u-1", "question": "Caroline adoption agencies support group"})
    s = SearchResponse.model_validate(r.json())
    assert set(s.conversation_ids) == {"c-1", "c-3"} and {e.conversation_id for e in s.evidence} <= {"c-1", "c-3"}
    for cid in ("c-1", "c-2"):
        s = SearchResponse.model_validate(client.post("/v1/search", json=body(conversation_id=cid)).json())
        assert {e.conversation_id for e in s.evidence} == {cid}
    assert client.get("/v1/conversations/nope").status_code == 404
    assert client.get("/v1/conversations/c-2", params={"user_id": "u-1"}).status_code == 404
    assert client.get("/v1/conversations/c-2", params={"user_id": "u-2"}).status_code == 200


@pytest.mark.parametrize("bad, reason", [
    ({"conversation_id": "c-1"}, "question"),
    (body(question="   "), "blank"),
    (body(question=""), "question"),
    ({"question": Q}, "conversation_id or user_id"),
    (body(extra_field=1), "extra_field"),
    (body(question_date="next tuesday"), "ISO"),
    (body(budget_tokens=-5), "budget_tokens"),
    (body(budget_tokens=10**6), "at most 16000"),
    (body(question="why " * 600), "at most 2000"),
    (body(conversation_id=7), "conversation_id"),
    ([1, 2], "dict"),
])
def test_malformed_bodies_get_422_with_reason(client, bad, reason):
    r = client.post("/v1/search", json=bad)
    assert r.status_code == 422, r.text
    assert reason in r.text


def test_non_json_body_is_422(client):
    r = client.post("/v1/query", content=b"{not json", headers={"content-type": "application/json"})
    assert r.status_code == 422 and "json" in r.text.lower()


def test_request_size_limit_413(store_dir, embedder):
    svc = make_service(store_dir, embedder, **{"serve.max_request_bytes": 1024})
    with TestClient(create_app(svc)) as c:
        r = c.post("/v1/search", json=body(question="x" * 2000))
        assert r.status_code == 413 and "1024" in r.json()["detail"]

        def chunks():  # no Content-Length: counted while reading
            for _ in range(10):
                yield b"y" * 200

        r = c.post("/v1/search", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413
        assert c.post("/v1/search", json=body()).status_code == 200
    svc.close()


def test_cache_is_bounded_by_count_and_bytes(store_dir, embedder):
    svc = make_service(store_dir, embedder, **{"serve.cache_max_conversations": 2})
    with TestClient(create_app(svc)) as c:
        for cid in ("c-1", "c-2", "c-3", "c-4", "c-1"):
            assert c.post("/v1/search", json=body(conversation_id=cid)).status_code == 200
            assert c.get("/v1/admin/stats").json()["cache"]["conversations"] <= 2
        st = c.get("/v1/admin/stats").json()
        assert st["cache"]["evictions"] >= 3 and st["cache"]["loads"] == 5 and st["rss_bytes"] > 0
        assert c.get("/v1/conversations/c-1").json()["cached"] is True
        assert c.get("/v1/conversations/c-2").json()["cached"] is False
    svc.close()
    svc = make_service(store_dir, embedder, **{"serve.cache_max_bytes": 1})
    with TestClient(create_app(svc)) as c:
        for cid in ("c-1", "c-2", "c-3"):
            assert c.post("/v1/search", json=body(conversation_id=cid)).status_code == 200
        cache = c.get("/v1/admin/stats").json()["cache"]
        assert cache["conversations"] == 1 and cache["evictions"] == 2  # the newest view always stays
        assert svc.store.cache.cached_ids() == ["c-3"] and cache["bytes"] == svc.store.view("c-3").nbytes
    svc.close()


def concurrent_searches(svc: MemoryService, n: int) -> list[httpx.Response]:
    """``n`` simultaneous /v1/search requests (question i on conversation c-(1 + i % 4))."""
    app = create_app(svc)

    async def burst() -> list[httpx.Response]:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as ac:
            return await asyncio.gather(*[ac.post("/v1/search", json=body(question=f"{Q} #{i}", conversation_id=f"c-{1 + i % 4}"))
                                          for i in range(n)])

    return asyncio.run(burst())


def test_concurrent_requests_share_embedding_calls(store_dir, embedder):
    # batching is on by default only for the openai embedding backend; the path is the same
    svc = make_service(store_dir, embedder, **{"serve.batch_wait_ms": 50, "serve.batch_embeddings": True, "serve.search_threads": 8})
    rs = concurrent_searches(svc, 8)
    assert [r.status_code for r in rs] == [200] * 8
    for i, r in enumerate(rs):  # each request got its own vectors back (its own evidence, its conversation)
        assert r.json()["question"] == f"{Q} #{i}" and r.json()["conversation_ids"] == [f"c-{1 + i % 4}"]
    st = svc.stats()["embedding"]
    assert st["requests"] == 8 and st["model_calls"] < 8 and st["batched"] is True
    svc.close()


def test_local_model_embeds_in_the_search_thread_without_batching(store_dir, embedder):
    """Auto defaults with the local model: no batching hop, one search thread per replica."""
    svc = make_service(store_dir, embedder)
    assert svc.batching is False and svc._executor._max_workers == 1
    rs = concurrent_searches(svc, 4)
    assert [r.status_code for r in rs] == [200] * 4
    assert all(r.json()["conversation_ids"] == [f"c-{1 + i % 4}"] for i, r in enumerate(rs))
    st = svc.stats()["embedding"]
    assert st["batched"] is False and st["model_calls"] == 4
    svc.close()


@pytest.mark.heavy
def test_reload_picks_up_new_conversations(tmp_path, store_dir, embedder):
    root = tmp_path / "store"
    shutil.copytree(store_dir, root)
    svc = make_service(root, embedder, **{"serve.reload_interval_s": 0})
    with TestClient(create_app(svc)) as c:
        assert c.post("/v1/search", json=body(conversation_id="c-new")).status_code == 404
        make_store(root, embedder, [conversation_spec("c-new", "u-new")])
        # no rescan for an unknown user (a request naming the id stats its marker: test_serve_append.py)
        assert c.post("/v1/search", json={"user_id": "u-new", "question": Q}).status_code == 404
        r = c.post("/v1/admin/reload").json()
        assert r["added"] == 1 and r["conversations"] == 5
        assert c.post("/v1/search", json=body(conversation_id="c-new")).status_code == 200
        assert c.post("/v1/search", json={"user_id": "u-new", "question": Q}).status_code == 200
    svc.close()
    # periodic check of the store's mtimes
    svc = make_service(root, embedder, **{"serve.reload_interval_s": 0.01})
    with TestClient(create_app(svc)) as c:
        make_store(root, embedder, [conversation_spec("c-newer", "u-new")])
        import time

        time.sleep(0.05)
        assert c.post("/v1/search", json=body(conversation_id="c-newer")).status_code == 200
        assert svc.reloads == 1
    svc.close()


def _openai_sets(srv, **extra: Any) -> dict[str, Any]:
    return {"llm.backend": "openai", "llm.base_url": srv.base_url, "llm.api_key": "test", "llm.max_attempts": 1,
            "llm.backoff_initial_s": 0, **extra}


def test_llm_down_query_503_while_search_works(store_dir, embedder):
    from lychee_ray.testing import OpenAIServer, status

    with OpenAIServer(default=status(503, message="model overloaded")) as srv:
        svc = make_service(store_dir, embedder, llm=None, **_openai_sets(srv, **{"serve.llm_cooldown_s": 30}))
        with TestClient(create_app(svc)) as c:
            r = c.post("/v1/query", json=body())
            assert r.status_code == 503, r.text
            d = r.json()
            assert d["error"] == "llm_unavailable" and "LLM endpoint unavailable" in d["detail"]
            assert "/v1/search still works" in d["detail"] and "server_error" in d["detail"]
            assert int(r.headers["retry-after"]) >= 1
            seen = len(srv.chat_requests())
            assert seen == 2  # plan (fell back) + answer, one attempt each
            # search keeps working: evidence from the rules planner, no LLM call while it is marked down
            s = c.post("/v1/search", json=body())
            assert s.status_code == 200 and s.json()["evidence"] and s.json()["plan"]["backend"] == "rules"
            # query fails fast without calling the LLM again
            r2 = c.post("/v1/query", json=body())
            assert r2.status_code == 503 and "not retried" in r2.json()["detail"]
            assert len(srv.chat_requests()) == seen
            assert c.get("/v1/admin/stats").json()["llm"]["available"] is False
        svc.close()


def test_llm_failures_map_to_502_and_503_and_search_survives_plan_failure(store_dir, embedder):
    from lychee_ray.testing import OpenAIServer, schema_violation, status

    def handler(req):
        if req["response_format"]["json_schema"]["name"] == "query_plan":
            return status(500)
        return schema_violation()

    with OpenAIServer(handler=handler) as srv:
        svc = make_service(store_dir, embedder, llm=None, **_openai_sets(srv, **{"serve.llm_cooldown_s": 0}))
        with TestClient(create_app(svc)) as c:
            s = c.post("/v1/search", json=body())  # planner fails -> fallback plan, still 200
            assert s.status_code == 200 and s.json()["plan"]["fallback"] is True and s.json()["evidence"]
            r = c.post("/v1/query", json=body())
            assert r.status_code == 502 and r.json()["error"] == "llm_bad_reply" and "schema_violation" in r.json()["detail"]
        svc.close()


def test_llm_ok_query(store_dir, embedder):
    from lychee_ray.testing.openai_server import OpenAIServer

    def handler(req):
        if req["response_format"]["json_schema"]["name"] == "query_plan":
            return {"routes": [{"search_texts": ["Caroline support group"],
                                                             "entities": ["Caroline"], "topics": ["support group"],
                                                             "record_types": [], "time": None}]}
        return {"answer": "7 May 2023"}

    with OpenAIServer(handler=handler) as srv:
        svc = make_service(store_dir, embedder, llm=None, **_openai_sets(srv))
        with TestClient(create_app(svc)) as c:
            r = c.post("/v1/query", json=body())
            assert r.status_code == 200, r.text
            q = QueryResponse.model_validate(r.json())
            assert q.answer == "7 May 2023" and q.plan.backend == "openai" and q.usage.llm_calls == 2
            assert q.answer_kind == "generated"
            assert {e.conversation_id for e in q.evidence} == {"c-1"}
        svc.close()


def test_cli_query_url(client, monkeypatch, capsys):
    """``lychee-ray query --url`` against the app (HTTP calls routed into the TestClient)."""
    from lychee_ray.cli.main import main

    monkeypatch.setattr(httpx, "post", lambda url, timeout=None, **kw: client.post(url.replace("http://svc", ""), **kw))
    assert main(["query", "--url", "http://svc", "--conversation", "c-1", "--question-date", "2023-08-01", Q]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Answer (extractive, quoted from memory): ") and "support group" in out and "Evidence (" in out
    assert main(["query", "--url", "http://svc/", "--conversation", "c-1", "--search", "--json", Q]) == 0
    assert '"evidence"' in capsys.readouterr().out
    assert main(["query", "--url", "http://svc", "--conversation", "nope", Q]) == 2
    assert "HTTP 404" in capsys.readouterr().err


def test_memory_client_results_and_typed_errors(client):
    """:class:`MemoryClient` over the app (its ``http`` client = the TestClient): typed results, and
    failures as :class:`RemoteError` with the status and the body's error code as data."""
    from lychee_ray.query.results import QueryResult, SearchResult
    from lychee_ray.serve import MemoryClient, RemoteError

    mc = MemoryClient("http://testserver/", http=client)
    s = mc.search(Q, conversation_id="c-1", question_date="2023-08-01")
    assert isinstance(s, SearchResult) and {e.conversation_id for e in s.evidence} == {"c-1"}
    assert {"queue", "server"} <= set(s.timings_ms)
    q = mc.query(Q, user_id="u-1", question_date="2023-08-01")
    assert isinstance(q, QueryResult) and "support group" in q.answer and q.answer_error is None
    with pytest.raises(RemoteError) as ei:
        mc.search(Q, conversation_id="c-2", user_id="u-1")  # another user's conversation
    assert (ei.value.status, ei.value.code) == (404, "not_found") and not ei.value.unreachable
    with pytest.raises(RemoteError) as ei:
        mc.search(Q, conversation_id="c-1", question_date="not a date")
    assert ei.value.status == 422 and "question_date" in ei.value.detail
    with pytest.raises(RemoteError) as ei:
        MemoryClient("http://127.0.0.1:9", timeout=2).search(Q, conversation_id="c-1")  # nothing listens there
    assert ei.value.unreachable and ei.value.status is None and str(ei.value).startswith("cannot reach http://127.0.0.1:9")


def test_list_conversations_pages_scopes_and_reads_markers_only(client, store_dir, embedder):
    """``GET /v1/conversations``: ordered by id, paged within the configured bound, scoped to a user
    like the other endpoints, counts from the commit markers (a conversation's sessions are read once)."""
    r = client.get("/v1/conversations")
    assert r.status_code == 200, r.text
    page = r.json()
    assert (page["total"], page["offset"], page["limit"], page["next_offset"]) == (4, 0, 50, None)
    rows = {c["conversation_id"]: c for c in page["conversations"]}
    assert list(rows) == ["c-1", "c-2", "c-3", "c-4"]
    c1 = rows["c-1"]
    assert (c1["user_id"], c1["sessions"], c1["turns"], c1["records"], c1["segments"], c1["failed_segments"]) == (
        "u-1", 2, 8, len(RECORDS), 1, 0)
    assert rows["c-3"]["records"] == 3 and c1["committed_at"] and c1["key"].startswith("c-1")
    info = client.get("/v1/conversations/c-1").json()  # the listing agrees with the detail endpoint
    assert {k: info[k] for k in ("sessions", "turns", "records", "committed_at")} == {
        k: c1[k] for k in ("sessions", "turns", "records", "committed_at")}

    first = client.get("/v1/conversations", params={"limit": 3}).json()
    rest = client.get("/v1/conversations", params={"limit": 3, "offset": first["next_offset"]}).json()
    assert [c["conversation_id"] for c in first["conversations"]] == ["c-1", "c-2", "c-3"] and first["next_offset"] == 3
    assert [c["conversation_id"] for c in rest["conversations"]] == ["c-4"] and rest["next_offset"] is None
    beyond = client.get("/v1/conversations", params={"offset": 9}).json()
    assert beyond["conversations"] == [] and beyond["total"] == 4

    mine = client.get("/v1/conversations", params={"user_id": "u-1"}).json()
    assert [c["conversation_id"] for c in mine["conversations"]] == ["c-1", "c-3"] and mine["total"] == 2
    r = client.get("/v1/conversations", params={"user_id": "nobody"})
    assert r.status_code == 404 and r.json()["error"] == "not_found"
    for bad in ({"limit": 501}, {"limit": 0}, {"offset": -1}, {"user_id": ""}):
        r = client.get("/v1/conversations", params=bad)
        assert r.status_code == 422, (bad, r.text)
    assert "limit" in client.get("/v1/conversations", params={"limit": 501}).text

    # per request the listing reads no table: once seen, a conversation's sessions are remembered
    svc = make_service(store_dir, embedder, **{"serve.list_page_size": 2, "serve.list_max_page_size": 3})
    with TestClient(create_app(svc)) as c:
        assert c.get("/v1/conversations").json()["next_offset"] == 2
        assert c.get("/v1/conversations", params={"limit": 4}).status_code == 422
        before = c.get("/v1/conversations", params={"limit": 3}).json()

        def no_reads(*_a: Any) -> None:
            raise AssertionError("a table was read for a listing")

        svc.lister._read_sessions = no_reads
        assert c.get("/v1/conversations", params={"limit": 3}).json() == before
    svc.close()


def test_cli_json_and_http_bodies_have_the_same_fields(client, store_dir, capsys):
    """``lychee-ray query --json`` prints the service's JSON: the same keys, nested ones too."""
    import json

    from lychee_ray.cli.main import main

    for extra, path in (([], "/v1/query"), (["--search"], "/v1/search")):
        http = client.post(path, json=body()).json()
        assert main(["query", "--memory", str(store_dir), "--conversation", "c-1", "--question-date", "2023-08-01",
                     "--llm", "rules", "--json", *extra, Q]) == 0
        cli = json.loads(capsys.readouterr().out)
        assert set(cli) == set(http), set(cli) ^ set(http)
        assert "timings" in cli and "timings_ms" not in cli and "answer_error" not in cli
        for k in ("plan", "usage", "rerank"):
            assert set(cli[k]) == set(http[k]), k
        assert set(cli["evidence"][0]) == set(http["evidence"][0])
        assert ("answer" in cli) == (path == "/v1/query")
