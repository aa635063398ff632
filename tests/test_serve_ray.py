"""The query service on Ray Serve: ONE Serve instance for the whole test session, on 127.0.0.1.

Most behaviour is tested without Ray in ``test_serve_app.py``; these tests check the deployment
wiring: the ingress over HTTP, auth, limits, @serve.batch embeddings and load shedding (503).
"""

from __future__ import annotations

import asyncio
import socket
import time

import httpx
import pytest

from tests.test_query import RECORDS, conversation_spec, make_store

TOKEN = "ray-test-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
Q = "When did Caroline go to the LGBTQ support group?"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def serve_url(ray_session, tmp_path_factory, embedder):
    """The memory service deployed once per session (Serve ready ≈ 15-20 s with the model)."""
    from lychee_ray.config import load_config
    from lychee_ray.serve_deploy import start_service, stop_service

    root = make_store(tmp_path_factory.mktemp("serve_ray_store"), embedder, [
        conversation_spec("c-1", "u-1"), conversation_spec("c-2", "u-2", records=RECORDS[:4])])
    cfg = load_config(env={}, sets=[
        "serve.host=127.0.0.1", f"serve.port={_free_port()}", f"serve.token={TOKEN}", "llm.backend=rules",
        "serve.replica_num_cpus=0.25",  # leave the session's 2 CPUs to the other Ray tests
        "serve.max_ongoing_requests=2", "serve.max_queued_requests=2",  # small, so a burst is shed
        "serve.max_request_bytes=4096",
    ])
    url = start_service(root, cfg, name="lychee-test")
    try:
        yield url
    finally:
        stop_service("lychee-test")


def test_serve_endpoints_over_http(serve_url):
    assert serve_url.startswith("http://127.0.0.1:")
    with httpx.Client(base_url=serve_url, timeout=60) as c:
        assert c.get("/healthz").json()["conversations"] == 2
        assert c.post("/v1/search", json={"conversation_id": "c-1", "question": Q}).status_code == 401
        r = c.post("/v1/search", json={"conversation_id": "c-1", "question": Q, "question_date": "2023-08-01"}, headers=AUTH)
        assert r.status_code == 200, r.text
        assert r.json()["evidence"] and {e["conversation_id"] for e in r.json()["evidence"]} == {"c-1"}
        r = c.post("/v1/query", json={"user_id": "u-1", "question": Q, "question_date": "2023-08-01"}, headers=AUTH)
        assert r.status_code == 200 and "support group" in r.json()["answer"]
        assert r.json()["conversation_ids"] == ["c-1"]
        assert c.post("/v1/query", json={"user_id": "u-1", "conversation_id": "c-2", "question": Q}, headers=AUTH).status_code == 404
        assert c.post("/v1/query", json={"conversation_id": "c-1"}, headers=AUTH).status_code == 422
        assert c.post("/v1/query", json={"conversation_id": "c-1", "question": "x" * 5000}, headers=AUTH).status_code == 413
        assert c.get("/v1/conversations/c-2", headers=AUTH).json()["records"] == 4
        assert c.get("/docs", headers=AUTH).status_code == 200
        assert "/v1/search" in c.get("/openapi.json", headers=AUTH).json()["paths"]
        st = c.get("/v1/admin/stats", headers=AUTH).json()
        assert st["embedding"]["batched"] is True and st["embedding"]["model_calls"] >= 1


def test_serve_sheds_bursts_with_503(serve_url):
    """max_ongoing_requests=2 + max_queued_requests=2: a burst of 24 is answered 200 or 503, never hangs."""

    async def burst() -> list[int]:
        async with httpx.AsyncClient(base_url=serve_url, timeout=60, headers=AUTH) as c:
            rs = await asyncio.gather(*[c.post("/v1/search", json={"conversation_id": f"c-{1 + i % 2}", "question": f"{Q} {i}"})
                                        for i in range(24)])
            return [r.status_code for r in rs]

    t0 = time.perf_counter()
    codes = asyncio.run(burst())
    assert set(codes) <= {200, 503}, codes
    assert codes.count(200) >= 2 and codes.count(503) >= 1, codes
    assert time.perf_counter() - t0 < 60
