"""The query service on Ray Serve: ONE Serve instance for the whole test session, on 127.0.0.1.

The ``serve_url`` fixture lives in ``tests/serve_fixtures.py`` (shared with the reliability suite).
Most behaviour is tested without Ray in ``test_serve_app.py``; these tests check the deployment
wiring: the ingress over HTTP, auth, limits, @serve.batch embeddings and load shedding (503).
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from lychee_ray.config import ServeConfig
from tests.serve_fixtures import SERVE_AUTH as AUTH

pytestmark = pytest.mark.ray
Q = "When did Caroline go to the LGBTQ support group?"


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
        # the erasure routes are deployed (test_erase.py tests them in depth): auth first, 404 for unknown ids
        assert c.delete("/v1/conversations/c-1").status_code == 401
        r = c.delete("/v1/users/nobody", headers=AUTH)
        assert (r.status_code, r.json()["error"]) == (404, "not_found")
        st = c.get("/v1/admin/stats", headers=AUTH).json()
        assert st["embedding"]["batched"] is True and st["embedding"]["model_calls"] >= 1
        # the replica embeds questions with the int8 model and runs with Serve's event-loop switches
        assert st["embedding"]["runtime"] == "onnx-int8"
        assert st["ray_env"] == ServeConfig().ray_env


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


def test_serve_append_route_is_deployed(serve_url):
    """POST .../turns through Serve (test_serve_append.py tests appends in depth): a turn posted to a
    new conversation is stored and searchable at once through the raw-turn channel."""
    from lychee_ray.serve import MemoryClient
    from tests.serve_fixtures import SERVE_TOKEN

    with httpx.Client(timeout=60) as c:
        client = MemoryClient(serve_url, SERVE_TOKEN, http=c)
        a = client.append_turns("c-append", [{"turn_id": "ra-1", "content": "My gym locker code is 4471."}],
                                user_id="u-append")
        assert a.created and a.stored_turn_ids == ["ra-1"] and a.generation
        res = client.search("What is my gym locker code?", conversation_id="c-append")
        assert res.conversation_ids == ["c-append"] and any("ra-1" in e.source_turn_ids for e in res.evidence)
