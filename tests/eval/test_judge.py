"""The LLM judge: verdict parsing, prompt, accounting, against the OpenAI-compatible test server."""

from __future__ import annotations

import json

import pytest

from lychee_ray.config import load_config
from lychee_ray.eval.runners.judge import (
    ABSTENTION_NOTE,
    JudgeReply,
    LLMJudge,
    judge_config,
    judge_messages,
    parse_verdict,
    verdict_from_failure,
)
from lychee_ray.llm.backend import make_llm_client
from lychee_ray.llm.errors import LLMCallFailed
from lychee_ray.testing.fake_llm import judge_reply
from lychee_ray.testing import OpenAIServer, ok


@pytest.mark.parametrize("reply,expected", [
    ('{"verdict": "CORRECT", "reason": "same date"}', "CORRECT"),
    ('{"verdict": "wrong"}', "WRONG"),
    ('{"label": "Correct"}', "CORRECT"),
    ('{"correct": false}', "WRONG"),
    ('"CORRECT"', "CORRECT"),
    ("CORRECT", "CORRECT"),
    ("WRONG", "WRONG"),
    ("**Correct.**", "CORRECT"),
    ("INCORRECT", "WRONG"),
    ("Wrong - the gold answer is 2022.", "WRONG"),
    ("The answer is not correct.", "WRONG"),
    ('```json\n{"verdict": "CORRECT", "reason": "x"}\n```', "CORRECT"),
    ('{"verdict": "CORRECT", "reas', "CORRECT"),  # broken JSON with a readable label
    ("I am not sure", None),
    ("", None),
    (None, None),
    ({"verdict": "maybe"}, None),
])
def test_parse_verdict(reply, expected):
    assert parse_verdict(reply) == expected


def test_reply_model_is_lenient_but_rejects_missing_labels():
    assert JudgeReply.model_validate({"verdict": "correct", "reason": "r"}).verdict == "CORRECT"
    assert JudgeReply.model_validate("WRONG").verdict == "WRONG"
    assert JudgeReply.model_validate({"label": "Incorrect", "explanation": "e"}).reason == "e"
    with pytest.raises(ValueError):
        JudgeReply.model_validate({"verdict": "perhaps"})


def test_verdict_from_plain_text_failure():
    e = LLMCallFailed("judge", 1, "invalid_json", "Expecting value at char 0: 'CORRECT'")
    assert verdict_from_failure(e) == "CORRECT"
    e = LLMCallFailed("judge", 1, "invalid_json", "Expecting value at char 0: 'WRONG, the date differs'")
    assert verdict_from_failure(e) == "WRONG"
    assert verdict_from_failure(LLMCallFailed("judge", 4, "server_error", "HTTP 503: x")) is None


def test_prompt_is_lenient_and_marks_abstention():
    msgs = judge_messages("When did she go?", "7 May 2023", "May 7th, 2023")
    system = msgs[0]["content"]
    assert "generous" in system.lower() and "same date" in system and "CORRECT" in system and "WRONG" in system
    assert "Gold answer: 7 May 2023" in msgs[1]["content"] and ABSTENTION_NOTE not in msgs[1]["content"]
    abs_msgs = judge_messages("What is my cat's name?", "You did not mention a cat.", "I don't know.", abstention=True)
    assert ABSTENTION_NOTE in abs_msgs[1]["content"]
    tr = judge_messages("How many days?", "3 days", "4 days", category="temporal-reasoning")
    assert "off by one" in tr[1]["content"]


def _client(srv: OpenAIServer, **sets):
    cfg = load_config(sets=[f"llm.base_url={srv.base_url}", "llm.api_key=test", "llm.max_attempts=1",
                            "llm.temperature=0.7", *[f"{k}={v}" for k, v in sets.items()]], env={})
    jcfg = judge_config(cfg, "judge-model-x")
    assert jcfg.llm.temperature == 0.0 and jcfg.llm.model == "judge-model-x"
    return make_llm_client(jcfg)


def test_judge_against_server_counts_tokens_on_the_judge_stage():
    with OpenAIServer(handler=judge_reply) as srv:
        client = _client(srv)
        judge = LLMJudge(client, max_completion_tokens=100)
        good = judge.judge("When did Caroline go?", "7 May 2023", "On 7 May 2023.", question_id="q1")
        bad = judge.judge("When did Caroline go?", "7 May 2023", "In June.", question_id="q2")
        assert good.verdict == "CORRECT" and good.correct is True
        assert bad.verdict == "WRONG" and bad.correct is False
        assert good.prompt_tokens > 50 and good.completion_tokens > 0 and good.calls == 1 and good.error is None
        body = srv.chat_requests()[0].body
        assert body["model"] == "judge-model-x" and body["temperature"] == 0.0
        assert body["response_format"]["json_schema"]["name"] == "judge_verdict"
        stages = {u.stage for u in client.ledger}
        assert stages == {"judge"} and {u.question_id for u in client.ledger} == {"q1", "q2"}
        client.close()


def test_judge_tolerates_plain_text_and_reports_failures():
    with OpenAIServer([ok("CORRECT"), ok("Wrong."), ok("no idea")]) as srv:
        client = _client(srv)
        judge = LLMJudge(client)
        a = judge.judge("q", "gold", "answer", question_id="a")
        b = judge.judge("q", "gold", "answer", question_id="b")
        c = judge.judge("q", "gold", "answer", question_id="c")
        assert a.verdict == "CORRECT" and a.calls == 1 and a.prompt_tokens > 0
        assert b.verdict == "WRONG"
        assert c.verdict is None and c.correct is None and c.error and c.calls == 1
        client.close()


def test_fake_judge_reply_is_valid_json():
    body = {"messages": judge_messages("q", "Business Administration", "a degree in business administration")}
    got = judge_reply(body)
    assert JudgeReply.model_validate(json.loads(json.dumps(got))).verdict == "CORRECT"
