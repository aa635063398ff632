"""The scripted OpenAI-compatible test server itself (plain HTTP, no LLMClient)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import numpy as np
import pytest

from lychee_ray.testing import (
    OpenAIServer,
    RecordedRequest,
    delay,
    ok,
    pseudo_embedding,
    reset,
    status,
)
from lychee_ray.text.tokens import count_message_tokens, count_tokens

MSGS = [{"role": "user", "content": "hello there"}]


def post(srv: OpenAIServer, path: str, body: dict, timeout: float = 5.0, headers: dict | None = None):
    req = urllib.request.Request(srv.base_url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return r.status, json.loads(r.read()), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read()), dict(e.headers)


def chat(srv: OpenAIServer, **kw):
    return post(srv, "/chat/completions", {"model": "m", "messages": MSGS, **kw})


def test_chat_reply_with_computed_usage():
    with OpenAIServer([ok({"a": 1})]) as srv:
        code, body, _ = chat(srv)
    assert code == 200
    msg = body["choices"][0]
    assert json.loads(msg["message"]["content"]) == {"a": 1} and msg["finish_reason"] == "stop"
    assert body["usage"]["prompt_tokens"] == count_message_tokens(MSGS)
    assert body["usage"]["completion_tokens"] == count_tokens('{"a": 1}')
    assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 0


def test_queue_then_handler_then_default():
    seen = []

    def handler(req):
        seen.append(req["messages"][-1]["content"])
        return {"echo": req["messages"][-1]["content"]} if "echo" in req["messages"][-1]["content"] else None

    with OpenAIServer([ok("first")], handler=handler, default=ok("fallback")) as srv:
        assert chat(srv)[1]["choices"][0]["message"]["content"] == "first"
        out = post(srv, "/chat/completions", {"messages": [{"role": "user", "content": "echo me"}]})[1]
        assert json.loads(out["choices"][0]["message"]["content"]) == {"echo": "echo me"}
        assert chat(srv)[1]["choices"][0]["message"]["content"] == "fallback"
    assert seen == ["echo me", "hello there"]


def test_status_and_retry_after_header():
    with OpenAIServer([status(429, retry_after=2), status(503)]) as srv:
        code, body, headers = chat(srv)
        assert code == 429 and headers["Retry-After"] == "2" and "message" in body["error"]
        assert chat(srv)[0] == 503
        assert [r.status for r in srv.chat_requests()] == [429, 503]


def test_reject_json_schema_and_scripted_usage():
    with OpenAIServer([ok("{}", usage={"prompt_tokens": 9, "completion_tokens": 1}, cached_tokens=4)],
                      reject_json_schema=True) as srv:
        code, body, _ = chat(srv, response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": {}}})
        assert code == 400 and body["error"]["param"] == "response_format"
        code, body, _ = chat(srv, response_format={"type": "json_object"})
        assert code == 200 and body["usage"]["prompt_tokens"] == 9
        assert body["usage"]["prompt_tokens_details"]["cached_tokens"] == 4
        assert srv.pending == 0


def test_reset_and_delay():
    with OpenAIServer([reset(), delay(0.5, ok("late"))]) as srv:
        with pytest.raises((urllib.error.URLError, ConnectionError, OSError)):
            chat(srv)
        with pytest.raises((TimeoutError, urllib.error.URLError, OSError)):
            post(srv, "/chat/completions", {"messages": MSGS}, timeout=0.1)  # reply comes after 0.5 s
        assert srv.chat_requests()[0].status is None


def test_embeddings_deterministic_unit_vectors():
    with OpenAIServer(embedding_dim=16) as srv:
        code, body, _ = post(srv, "/embeddings", {"model": "e", "input": ["a cat", "a dog", "a cat"]})
        assert code == 200
        vecs = np.array([d["embedding"] for d in body["data"]])
        assert vecs.shape == (3, 16)
        assert np.allclose(np.linalg.norm(vecs, axis=1), 1.0, atol=1e-5)
        assert np.allclose(vecs[0], vecs[2]) and not np.allclose(vecs[0], vecs[1])
        assert np.allclose(vecs[0], pseudo_embedding("a cat", 16), atol=1e-6)
        _, one, _ = post(srv, "/embeddings", {"input": "x", "dimensions": 8})
        assert len(one["data"][0]["embedding"]) == 8 and one["usage"]["prompt_tokens"] == count_tokens("x")
        srv.script_embeddings(status(500))
        assert post(srv, "/embeddings", {"input": "x"})[0] == 500


def test_models_auth_and_404():
    with OpenAIServer(api_key="k") as srv:
        assert chat(srv)[0] == 401
        code, _, _ = post(srv, "/chat/completions", {"messages": MSGS}, headers={"Authorization": "Bearer k"})
        assert code == 200
        req = urllib.request.Request(srv.base_url + "/models", headers={"Authorization": "Bearer k"})
        with urllib.request.urlopen(req) as r:
            assert json.loads(r.read())["data"][0]["id"] == "test-model"
        assert post(srv, "/nope", {}, headers={"Authorization": "Bearer k"})[0] == 404


def test_server_side_rate_limit():
    with OpenAIServer(rate_limit_rpm=3) as srv:
        codes = [chat(srv)[0] for _ in range(5)]
        assert codes == [200, 200, 200, 429, 429]
        _, _, headers = chat(srv)
        assert 55 <= float(headers["Retry-After"]) <= 60
        assert srv.max_requests_in_window(60, accepted_only=True) == 3
        assert srv.max_requests_in_window(60) == 6
    with OpenAIServer(rate_limit_tpm=50, rate_limit_retry_after=1.5) as srv:
        big = [{"role": "user", "content": "word " * 30}]
        assert post(srv, "/chat/completions", {"messages": big})[0] == 200
        code, _, headers = post(srv, "/chat/completions", {"messages": big})
        assert code == 429 and headers["Retry-After"] == "1.5"


def test_window_and_minute_counting():
    srv = OpenAIServer()
    base = 60 * 16_667 + 20.0  # 20 s into a calendar minute
    for i, dt in enumerate([0, 10, 30, 39, 45, 61, 100]):
        srv._records.append(RecordedRequest("/v1/chat/completions", {}, t=base + dt, t_mono=dt, status=200,
                                            prompt_tokens=10, completion_tokens=i))
    assert srv.max_requests_in_window(60) == 5  # [0, 60): 0, 10, 30, 39, 45
    assert srv.max_tokens_in_window(60) == 50 + (1 + 2 + 3 + 4 + 5)  # [10, 70) beats [0, 60)
    per_min = srv.requests_per_minute()
    assert sum(per_min.values()) == 7 and max(per_min.values()) == 4  # 20..59 s of the first minute
    assert srv.minutes_over_limit(3) == [int(base // 60)]
    assert sum(srv.tokens_per_minute().values()) == 70 + 21
