"""Overload as a documented error (issue 39 item 4; ``lychee_ray/serve/admission.py``): a replica
admits ``max_active`` requests, lets ``max_waiting`` wait, and refuses the rest itself with the
service's JSON 503 and ``Retry-After``; Serve is configured to hand it more than that. The 200-client
burst through Ray Serve is ``tests/reliability/test_burst.py``."""

from __future__ import annotations

import asyncio

import httpx
import pytest
from fastapi import FastAPI

from lychee_ray.config import load_config
from lychee_ray.ray.serve import deployment_options, serve_ongoing_requests
from lychee_ray.serve.admission import Admission, AdmissionMiddleware

pytestmark = pytest.mark.reliability  # listed in docs/reliability.md (issue 39)


def gated_app(admission: Admission) -> tuple[FastAPI, asyncio.Event]:
    app = FastAPI()
    gate = asyncio.Event()

    @app.post("/v1/search")
    async def work() -> dict:
        await gate.wait()
        return {"ok": True}

    @app.get("/healthz")
    async def health() -> dict:
        return {"status": "ok"}

    @app.get("/v1/admin/stats")
    async def stats() -> dict:
        return admission.stats()

    app.add_middleware(AdmissionMiddleware, admission=admission)
    return app, gate


def test_bounded_admission_refuses_with_json_503_and_retry_after_and_loses_nothing_admitted():
    async def run() -> None:
        admission = Admission(max_active=2, max_waiting=3, max_wait_s=30.0, retry_after_s=2)
        app, gate = gated_app(admission)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            tasks = [asyncio.create_task(c.post("/v1/search", json={"i": i})) for i in range(12)]
            while admission.active + admission.waiting + admission.refused < 12:
                await asyncio.sleep(0.01)
            assert (admission.active, admission.waiting, admission.refused) == (2, 3, 7)
            # liveness and admin stats are answered while the replica is full
            assert (await c.get("/healthz")).status_code == 200
            assert (await c.get("/v1/admin/stats")).json()["refused"] == 7
            gate.set()
            rs = await asyncio.gather(*tasks)
        codes = sorted(r.status_code for r in rs)
        assert codes == [200] * 5 + [503] * 7
        for r in rs:
            if r.status_code == 503:
                assert r.headers["retry-after"] == "2" and r.headers["content-type"] == "application/json"
                body = r.json()
                assert body["error"] == "overloaded" and "retry after 2 s" in body["detail"]
        assert (admission.active, admission.waiting, admission.admitted) == (0, 0, 5)

    asyncio.run(run())


def test_a_request_waiting_too_long_gets_the_503_and_its_slot_is_not_leaked():
    async def run() -> None:
        admission = Admission(max_active=1, max_waiting=5, max_wait_s=0.2, retry_after_s=1)
        app, gate = gated_app(admission)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://t") as c:
            first = asyncio.create_task(c.post("/v1/search", json={}))
            while admission.active < 1:
                await asyncio.sleep(0.01)
            late = await c.post("/v1/search", json={})
            assert late.status_code == 503 and late.json()["error"] == "overloaded" and "no slot within" in late.text
            assert late.headers["retry-after"] == "1" and admission.timed_out == 1
            gate.set()
            assert (await first).status_code == 200
            assert (await c.post("/v1/search", json={})).status_code == 200  # the slot came back
        assert (admission.active, admission.waiting) == (0, 0)

    asyncio.run(run())


def test_serve_is_told_to_hand_a_replica_more_than_it_admits():
    cfg = load_config(env={}, sets=["serve.max_ongoing_requests=3", "serve.max_queued_requests=5",
                                    "serve.proxy_headroom=7", "serve.proxy_max_queued_requests=100"])
    opts = deployment_options(cfg)
    assert opts["max_ongoing_requests"] == serve_ongoing_requests(cfg.serve) == 3 + 5 + 7
    assert opts["max_queued_requests"] == 100
    unbounded = load_config(env={}, sets=["serve.max_ongoing_requests=3", "serve.max_queued_requests=-1"])
    assert serve_ongoing_requests(unbounded.serve) == 3 + unbounded.serve.proxy_headroom
