"""LLMClient against the scripted OpenAI-compatible server: formats, retries, failures, accounting."""

from __future__ import annotations

import asyncio
import json
import logging
import pickle
import time

import pytest
from pydantic import BaseModel, Field

from lychee_ray.config import ConfigError, LLMConfig, LycheeConfig, RateLimitConfig
from lychee_ray.llm import backend as backend_mod
from lychee_ray.llm import (
    LLMCallFailed,
    LLMClient,
    NoopRateLimiter,
    Reservation,
    UsageLedger,
    make_llm_client,
    parse_retry_after,
    resolve_backend,
)
from lychee_ray.testing import (
    OpenAIServer,
    delay,
    empty,
    malformed_body,
    malformed_content,
    ok,
    reset,
    schema_violation,
    status,
    truncated,
)
from lychee_ray.text.tokens import count_tokens


class Answer(BaseModel):
    answer: str
    confidence: float = Field(ge=0, le=1)


GOOD = {"answer": "Paris", "confidence": 0.9}
MSGS = [{"role": "system", "content": "You answer questions."}, {"role": "user", "content": "Capital of France?"}]


def make_client(srv: OpenAIServer, *, ledger: UsageLedger | None = None, limiter=None, **over) -> LLMClient:
    cfg = dict(base_url=srv.base_url, api_key="test", model="test-model", backoff_initial_s=0.01,
               backoff_max_s=0.05, timeout_s=0.5, max_attempts=3, retry_after_max_s=5.0,
               rate_limit=RateLimitConfig(default_429_pause_s=0.2))
    cfg.update(over)
    return LLMClient(LLMConfig(**cfg), ledger=ledger, limiter=limiter)


def call(client: LLMClient, stage: str = "answer", **kw):
    return client.chat_json_sync(stage, MSGS, Answer, **kw)


@pytest.fixture
def server():
    with OpenAIServer() as srv:
        yield srv


# ------------------------------------------------------------------------------------------------
# formats
# ------------------------------------------------------------------------------------------------


def test_schema_output_parsed(server):
    server.script(ok(GOOD))
    with make_client(server) as client:
        res = call(client, schema_name="answer reply", keys={"question_id": "q1"})
    assert res.parsed == Answer(**GOOD) and json.loads(res.text) == GOOD
    (req,) = server.chat_requests()
    rf = req.body["response_format"]
    assert rf["type"] == "json_schema" and rf["json_schema"]["strict"] is True
    assert rf["json_schema"]["name"] == "answer_reply"
    schema = rf["json_schema"]["schema"]
    assert schema["additionalProperties"] is False and set(schema["required"]) == {"answer", "confidence"}
    assert req.body["temperature"] == 0 and req.body["max_completion_tokens"] == 4096
    assert req.body["messages"] == MSGS  # schema not pasted into the prompt in json_schema mode
    u = res.usage
    assert (u.ok, u.attempts, u.estimated, u.stage, u.question_id) == (True, 1, False, "answer", "q1")
    assert u.prompt_tokens == req.prompt_tokens and u.completion_tokens == req.completion_tokens
    assert client.ledger.entries() == [u]


def test_json_schema_refused_falls_back_to_json_object(caplog):
    with OpenAIServer(reject_json_schema=True, default=ok(GOOD)) as srv, make_client(srv) as client:
        with caplog.at_level(logging.WARNING, logger="lychee_ray.llm.client"):
            first = call(client)
            second = call(client)
        assert first.parsed == second.parsed == Answer(**GOOD)
        assert client.format_mode == "json_object"
        reqs = srv.chat_requests()
        assert [r.status for r in reqs] == [400, 200, 200]  # refused once, then remembered
        assert reqs[1].body["response_format"] == {"type": "json_object"}
        system = reqs[1].body["messages"][0]
        assert system["role"] == "system" and system["content"].startswith("You answer questions.")
        assert '"confidence"' in system["content"] and "JSON" in system["content"]
        assert first.usage.attempts == 1  # the refused probe is not a failed attempt
    assert sum("refused response_format" in r.message for r in caplog.records) == 1


def test_json_object_refused_falls_back_to_prompt_only():
    with OpenAIServer(reject_formats={"json_schema", "json_object"}, default=ok(GOOD)) as srv, \
            make_client(srv) as client:
        assert call(client).parsed.answer == "Paris"
        assert client.format_mode == "none"
        assert "response_format" not in srv.chat_requests()[-1].body


def test_max_completion_tokens_refused_uses_max_tokens():
    with OpenAIServer(reject_max_completion_tokens=True, default=ok(GOOD)) as srv, make_client(srv) as client:
        assert call(client, max_completion_tokens=77).parsed.answer == "Paris"
        assert client.max_tokens_param == "max_tokens"
        assert srv.chat_requests()[-1].body["max_tokens"] == 77


# ------------------------------------------------------------------------------------------------
# rate limiting / retries
# ------------------------------------------------------------------------------------------------


def test_429_retry_after_honoured():
    with OpenAIServer([status(429, retry_after=0.3), ok(GOOD)]) as srv, make_client(srv) as client:
        t0 = time.monotonic()
        res = call(client)
        assert time.monotonic() - t0 >= 0.3
        a, b = srv.chat_requests()
        assert b.t_mono - a.t_mono >= 0.3
        assert res.usage.attempts == 2 and res.usage.limiter_wait_s >= 0.25


def test_429_retry_after_is_capped():
    with OpenAIServer([status(429, retry_after=3600), ok(GOOD)]) as srv, \
            make_client(srv, retry_after_max_s=0.1) as client:
        t0 = time.monotonic()
        assert call(client).usage.attempts == 2
        assert time.monotonic() - t0 < 2.0


def test_429_without_retry_after_uses_default_pause():
    with OpenAIServer([status(429), ok(GOOD)]) as srv, make_client(srv) as client:
        res = call(client)
        a, b = srv.chat_requests()
        assert b.t_mono - a.t_mono >= 0.2 and res.usage.attempts == 2


def test_429_pauses_every_caller():
    async def main(srv: OpenAIServer) -> None:
        async with make_client(srv) as client:
            first = asyncio.create_task(client.chat_json("answer", MSGS, Answer))
            while not srv.chat_requests():
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # the 429 has been received and the pause set
            others = [client.chat_json("plan", MSGS, Answer) for _ in range(3)]
            await asyncio.gather(first, *others)

    with OpenAIServer([status(429, retry_after=0.4)], default=ok(GOOD)) as srv:
        asyncio.run(main(srv))
        reqs = srv.chat_requests()
        assert reqs[0].status == 429 and len(reqs) == 5
        assert all(r.t_mono - reqs[0].t_mono >= 0.38 for r in reqs[1:])


@pytest.mark.parametrize("codes", [(500,), (502,), (503,), (500, 502)])
def test_5xx_retried_then_success(codes):
    with OpenAIServer([status(c) for c in codes] + [ok(GOOD)]) as srv, make_client(srv) as client:
        res = call(client)
        assert res.parsed.answer == "Paris" and res.usage.attempts == len(codes) + 1


def test_all_attempts_5xx_raise_clear_error():
    with OpenAIServer(default=status(503, message="overloaded, try later")) as srv, make_client(srv) as client:
        with pytest.raises(LLMCallFailed) as ei:
            call(client, stage="encode", keys={"conversation_id": "c9", "segment_id": "s3"})
        e = ei.value
        msg = str(e)
        assert "stage=encode" in msg and "3 attempt" in msg and "server_error" in msg
        assert "HTTP 503" in msg and "overloaded, try later" in msg
        assert (e.stage, e.attempts, e.kind) == ("encode", 3, "server_error")
        assert len(srv.chat_requests()) == 3
        (entry,) = client.ledger.entries()
        assert not entry.ok and entry.attempts == 3 and entry.error_kind == "server_error"
        assert "overloaded" in entry.error and entry.conversation_id == "c9" and entry.segment_id == "s3"
        assert entry.prompt_tokens == 0  # nothing was answered, nothing billed
        clone = pickle.loads(pickle.dumps(e))  # Ray ships exceptions between processes
        assert (clone.stage, clone.attempts, clone.kind, str(clone)) == (e.stage, e.attempts, e.kind, msg)
        assert e.usage == entry and clone.usage == entry


def test_timeout_retried():
    with OpenAIServer([delay(2.0), ok(GOOD)]) as srv, make_client(srv, timeout_s=0.3) as client:
        t0 = time.monotonic()
        res = call(client)
        assert res.usage.attempts == 2 and 0.3 <= time.monotonic() - t0 < 3.0


def test_timeout_exhausted():
    with OpenAIServer(default=delay(2.0)) as srv, make_client(srv, timeout_s=0.2, max_attempts=2) as client:
        with pytest.raises(LLMCallFailed, match=r"\[timeout\]"):
            call(client)


def test_connection_reset_retried():
    with OpenAIServer([reset(), reset(), ok(GOOD)]) as srv, make_client(srv) as client:
        assert call(client).usage.attempts == 3


def test_malformed_http_body_retried():
    with OpenAIServer([malformed_body(), ok(GOOD)]) as srv, make_client(srv) as client:
        assert call(client).usage.attempts == 2


@pytest.mark.parametrize("bad", [malformed_content(), schema_violation({"answer": "x", "confidence": 7}),
                                 schema_violation(), truncated(json.dumps(GOOD)), empty()])
def test_invalid_reply_retried_then_success(bad):
    with OpenAIServer([bad, ok(GOOD)]) as srv, make_client(srv) as client:
        res = call(client)
        assert res.parsed.answer == "Paris" and res.usage.attempts == 2
        a, b = srv.chat_requests()
        # the invalid reply was billed: both attempts' tokens are counted
        assert res.usage.prompt_tokens == a.prompt_tokens + b.prompt_tokens
        assert res.usage.completion_tokens == a.completion_tokens + b.completion_tokens


@pytest.mark.parametrize("bad,kind", [(malformed_content(), "invalid_json"),
                                      (schema_violation(), "schema_violation"),
                                      (truncated(), "truncated"),
                                      (empty(), "empty_reply")])
def test_invalid_reply_exhausted(bad, kind):
    with OpenAIServer(default=bad) as srv, make_client(srv) as client:
        with pytest.raises(LLMCallFailed) as ei:
            call(client)
        assert ei.value.kind == kind and ei.value.attempts == 3
        (entry,) = client.ledger.entries()
        assert entry.error_kind == kind and not entry.ok and entry.prompt_tokens > 0
        if kind == "truncated":
            assert entry.finish_reason == "length"


def test_fenced_json_accepted_in_fallback_mode():
    fenced = "```json\n" + json.dumps(GOOD) + "\n```"
    with OpenAIServer([ok(fenced)], reject_json_schema=True) as srv, make_client(srv) as client:
        assert call(client).parsed.answer == "Paris"


@pytest.mark.parametrize("code", [400, 404])
def test_client_errors_not_retried(code):
    with OpenAIServer(default=status(code, message="nope")) as srv, make_client(srv) as client:
        with pytest.raises(LLMCallFailed) as ei:
            call(client)
        assert ei.value.kind == "client_error" and ei.value.attempts == 1
        assert "not retried" in str(ei.value) and len(srv.chat_requests()) == 1


def test_auth_error_not_retried():
    with OpenAIServer(api_key="right", default=ok(GOOD)) as srv, make_client(srv, api_key="wrong") as client:
        with pytest.raises(LLMCallFailed, match="HTTP 401"):
            call(client)
        assert len(srv.chat_requests()) == 1


# ------------------------------------------------------------------------------------------------
# accounting
# ------------------------------------------------------------------------------------------------


def test_provider_usage_recorded():
    usage = {"prompt_tokens": 1234, "completion_tokens": 56}
    with OpenAIServer([ok(GOOD, usage=usage, cached_tokens=1000)]) as srv, make_client(srv) as client:
        u = call(client, stage="encode", keys={"conversation_id": "c1"}).usage
    assert (u.prompt_tokens, u.completion_tokens, u.cached_tokens, u.estimated) == (1234, 56, 1000, False)
    assert u.total_tokens == 1290 and u.finish_reason == "stop" and u.latency_s > 0


def test_missing_usage_is_estimated_offline():
    with OpenAIServer([ok(GOOD, include_usage=False)]) as srv, make_client(srv) as client:
        res = call(client)
    u = res.usage
    assert u.estimated is True and u.prompt_tokens > 0
    assert u.completion_tokens == count_tokens(res.text)


def test_totals_by_stage_and_keys():
    ledger = UsageLedger()
    usage = {"prompt_tokens": 100, "completion_tokens": 10}
    with OpenAIServer(default=ok(GOOD, usage=usage)) as srv, make_client(srv, ledger=ledger) as client:
        call(client, "encode", keys={"conversation_id": "c1", "segment_id": "s1"})
        call(client, "encode", keys={"conversation_id": "c1", "segment_id": "s2"})
        call(client, "plan", keys={"conversation_id": "c1", "question_id": "q1"})
        call(client, "answer", keys={"conversation_id": "c1", "question_id": "q1"})
        call(client, "judge", keys={"question_id": "q1"})
        call(client, "plan", keys={"conversation_id": "c2", "question_id": "q2"})
    by_stage = ledger.totals_by_stage()
    assert by_stage["encode"].total_tokens == 220 and by_stage["plan"].calls == 2
    assert ledger.by_conversation()["c1"]["total"].calls == 4
    assert ledger.by_question()["q1"]["total"].total_tokens == 330
    assert ledger.by_question()["q2"]["plan"].prompt_tokens == 100


class RecordingLimiter(NoopRateLimiter):
    def __init__(self) -> None:
        super().__init__()
        self.acquired: list[int] = []
        self.reconciled: list[tuple[int, int]] = []

    async def acquire(self, estimated_tokens: int) -> Reservation:
        self.acquired.append(estimated_tokens)
        return await super().acquire(estimated_tokens)

    async def reconcile(self, reservation: Reservation, actual_tokens: int) -> int:
        self.reconciled.append((reservation.tokens, actual_tokens))
        return await super().reconcile(reservation, actual_tokens)


def test_limiter_acquire_and_reconcile_per_attempt():
    lim = RecordingLimiter()
    usage = {"prompt_tokens": 80, "completion_tokens": 20}
    with OpenAIServer([status(500), ok(GOOD, usage=usage)]) as srv, make_client(srv, limiter=lim) as client:
        call(client, max_completion_tokens=300)
    assert len(lim.acquired) == 2 and all(300 < t < 600 for t in lim.acquired)
    assert lim.reconciled[0][1] == 0  # the 500 used no tokens
    assert lim.reconciled[1] == (lim.acquired[1], 100)


def test_many_concurrent_calls():
    async def main(srv):
        async with make_client(srv) as client:
            res = await asyncio.gather(*[client.chat_json("plan", MSGS, Answer, keys={"question_id": f"q{i}"})
                                         for i in range(20)])
            return res, client.ledger

    with OpenAIServer(default=ok(GOOD), latency_s=0.3) as srv:
        t0 = time.monotonic()
        res, ledger = asyncio.run(main(srv))
        assert time.monotonic() - t0 < 0.3 * 20 / 2  # really concurrent (sequential would take 6 s)
    assert all(r.parsed.answer == "Paris" for r in res) and len(ledger) == 20


# ------------------------------------------------------------------------------------------------
# API details
# ------------------------------------------------------------------------------------------------


def test_argument_validation(server):
    with make_client(server) as client:
        with pytest.raises(ValueError, match="unknown stage"):
            call(client, stage="summarize")
        with pytest.raises(ValueError, match="unknown usage keys"):
            call(client, keys={"user": "x"})


def test_sync_api_refuses_running_loop(server):
    async def main():
        with make_client(server) as client:
            with pytest.raises(RuntimeError, match="running event loop"):
                call(client)

    asyncio.run(main())


def test_openai_client_has_no_own_retries(server):
    async def main():
        async with make_client(server) as client:
            return client._openai().max_retries

    assert asyncio.run(main()) == 0


def test_parse_retry_after():
    assert parse_retry_after({"retry-after": "2.5"}) == 2.5
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    assert parse_retry_after({}) is None and parse_retry_after({"retry-after": "soon"}) is None
    now = 1_700_000_000.0
    date = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now + 30))
    assert parse_retry_after({"retry-after": date}, now=now) == pytest.approx(30)
    past = time.strftime("%a, %d %b %Y %H:%M:%S GMT", time.gmtime(now - 30))
    assert parse_retry_after({"retry-after": past}, now=now) == 0.0


def test_client_needs_endpoint_or_key():
    with pytest.raises(ConfigError, match="base_url or an API key"):
        LLMClient(LLMConfig())


# ------------------------------------------------------------------------------------------------
# backend selection
# ------------------------------------------------------------------------------------------------


def test_resolve_backend(monkeypatch, caplog):
    monkeypatch.setattr(backend_mod, "_logged_rules", False)
    monkeypatch.delenv(backend_mod.NOTICE_ENV, raising=False)
    assert resolve_backend(LLMConfig(base_url="http://x/v1")) == "openai"
    assert resolve_backend(LLMConfig(api_key="sk-1")) == "openai"
    assert resolve_backend(LLMConfig(base_url="http://x/v1"), explicit="rules") == "rules"
    assert resolve_backend(LLMConfig(), explicit="openai") == "openai"
    assert resolve_backend(LLMConfig(backend="rules", base_url="http://x/v1")) == "rules"
    with caplog.at_level(logging.INFO, logger="lychee_ray.llm.backend"):
        assert resolve_backend(LLMConfig()) == "rules"
        assert resolve_backend(LLMConfig(), explicit="auto") == "rules"
    lines = [r.message for r in caplog.records if "rules" in r.message]
    assert len(lines) == 1 and "no endpoint configured" in lines[0] and len(lines[0]) <= 120  # a short notice
    with pytest.raises(ConfigError, match="unknown LLM backend"):
        resolve_backend(LLMConfig(), explicit="gpt")


def test_make_llm_client(server):
    cfg = LycheeConfig(llm=LLMConfig(base_url=server.base_url, api_key="k"))
    server.script(ok(GOOD))
    with make_llm_client(cfg) as client:
        assert isinstance(client, LLMClient) and client.config.base_url == server.base_url
        assert call(client).parsed == Answer(**GOOD)
