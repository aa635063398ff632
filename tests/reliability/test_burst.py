"""Load: the session's Ray Serve deployment (max_ongoing_requests=2, max_queued_requests=2) under a
bounded burst of 32 concurrent clients sheds the excess with 503s — no timeouts, no connection
errors, no other 5xx, bounded latency — and answers normally right after (same replica: it did
not crash or restart).

``LYCHEE_RELIABILITY_BURST_S`` (default 10 s) sets the CI burst; the ``slow`` variant runs 30 s.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
from collections import Counter

import httpx
import pytest

from tests.serve_fixtures import SERVE_AUTH, SERVE_MAX_ONGOING, SERVE_MAX_QUEUED

pytestmark = [pytest.mark.reliability, pytest.mark.ray]

CLIENTS = 32
BURST_S = float(os.environ.get("LYCHEE_RELIABILITY_BURST_S", "10"))
CLIENT_TIMEOUT_S = 30.0  # a request still open after this counts as a timeout (a failure)
MAX_LATENCY_S = 15.0  # no answered request (200 or 503) may take longer
QUESTIONS = ["When did Caroline go to the LGBTQ support group?", "What do Melanie's kids love?",
             "Where did Caroline move from?", "What is Melanie painting?"]


def _body(rng: random.Random) -> dict:
    return {"conversation_id": rng.choice(["c-1", "c-2"]), "question": rng.choice(QUESTIONS), "question_date": "2023-08-01"}


async def _burst(url: str, seconds: float) -> tuple[Counter, list[float], list[str]]:
    codes: Counter = Counter()
    latencies: list[float] = []
    failures: list[str] = []
    stop_at = time.monotonic() + seconds
    limits = httpx.Limits(max_connections=CLIENTS * 2, max_keepalive_connections=CLIENTS)

    async def client(i: int) -> None:
        rng = random.Random(i)
        async with httpx.AsyncClient(base_url=url, headers=SERVE_AUTH, timeout=CLIENT_TIMEOUT_S, limits=limits) as c:
            while time.monotonic() < stop_at:
                path = "/v1/search" if i % 4 else "/v1/query"
                t0 = time.perf_counter()
                try:
                    r = await c.post(path, json=_body(rng))
                except httpx.HTTPError as e:  # timeout, refused, reset: never acceptable
                    failures.append(f"{type(e).__name__}: {e}")
                    continue
                latencies.append(time.perf_counter() - t0)
                codes[r.status_code] += 1
                if r.status_code == 200:
                    d = r.json()
                    if {e["conversation_id"] for e in d["evidence"]} - {d["conversation_ids"][0]}:
                        failures.append("evidence outside the scope under load")
                elif r.status_code == 503:
                    await asyncio.sleep(0.02)  # a client backs off a little, then comes straight back
                else:
                    failures.append(f"{r.status_code}: {r.text[:200]}")

    await asyncio.gather(*(client(i) for i in range(CLIENTS)))
    return codes, latencies, failures


def _run_burst(serve_url: str, seconds: float) -> None:
    with httpx.Client(base_url=serve_url, timeout=60, headers=SERVE_AUTH) as c:
        before = c.get("/v1/admin/stats").json()
        assert c.post("/v1/search", json=_body(random.Random(0))).status_code == 200

    t0 = time.monotonic()
    codes, latencies, failures = asyncio.run(_burst(serve_url, seconds))
    elapsed = time.monotonic() - t0

    lat = sorted(latencies)
    print(f"burst {seconds:.0f}s x {CLIENTS} clients: {dict(codes)}; latency p50 {lat[len(lat) // 2]:.3f}s "
          f"p99 {lat[int(len(lat) * 0.99)]:.3f}s max {lat[-1]:.3f}s")
    assert not failures, (len(failures), failures[:5])
    assert set(codes) <= {200, 503}, codes
    assert codes[503] >= 1, f"a burst of {CLIENTS} over {SERVE_MAX_ONGOING}+{SERVE_MAX_QUEUED} slots must be shed: {codes}"
    assert codes[200] >= 1, codes
    assert max(latencies) < MAX_LATENCY_S, sorted(latencies)[-5:]
    assert elapsed < seconds + CLIENT_TIMEOUT_S

    # recovery: the next requests are answered normally, by the same replica
    with httpx.Client(base_url=serve_url, timeout=30, headers=SERVE_AUTH) as c:
        deadline = time.monotonic() + 15
        first = None
        while time.monotonic() < deadline:
            first = c.post("/v1/search", json=_body(random.Random(1)))
            if first.status_code == 200:
                break
            time.sleep(0.2)
        assert first is not None and first.status_code == 200, first.text if first is not None else None
        for i in range(5):
            t = time.perf_counter()
            r = c.post("/v1/query" if i % 2 else "/v1/search", json=_body(random.Random(i)))
            assert r.status_code == 200 and time.perf_counter() - t < 10, (r.status_code, r.text[:200])
        h = c.get("/healthz")
        assert h.status_code == 200 and h.json()["status"] == "ok"
        after = c.get("/v1/admin/stats").json()
    assert (after["pid"], after["started_at"]) == (before["pid"], before["started_at"]), "the replica restarted"
    assert after["requests"] > before["requests"]


def test_burst_is_shed_with_503_and_service_recovers(serve_url):
    _run_burst(serve_url, BURST_S)


@pytest.mark.slow
def test_burst_30s_is_shed_with_503_and_service_recovers(serve_url):
    _run_burst(serve_url, 30.0)
