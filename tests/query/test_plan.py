"""Query planner: rules routes and time constraints; openai planner via the test server (incl. fallback)."""

from __future__ import annotations

from datetime import datetime

import pytest

from lychee_ray.config import LLMConfig, PlannerConfig
from lychee_ray.llm.client import LLMClient
from lychee_ray.query.plan import OpenAIPlanner, PlanContext, RulesPlanner, match_keys
from lychee_ray.testing import OpenAIServer, malformed_content, ok, schema_violation, status, truncated

CTX = PlanContext(
    entities={"caroline": ("Caroline", 40), "melanie": ("Melanie", 38), "sweden": ("Sweden", 2), "new york": ("New York", 1),
              "york": ("York", 1)},
    topics={"pottery", "adoption", "camping"},
    speakers=["Caroline", "Melanie"],
)
QDATE = datetime(2023, 6, 9, 12, 0)  # a Friday


def rules(**kw) -> RulesPlanner:
    return RulesPlanner(PlannerConfig(**kw))


@pytest.mark.parametrize(
    "question, start, end",
    [
        ("What did Melanie do in May 2023?", "2023-05-01", "2023-05-31"),
        ("What did Caroline do on 7 May 2023?", "2023-05-07", "2023-05-07"),
        ("What did Caroline do last week?", "2023-05-29", "2023-06-04"),
        ("What happened yesterday?", "2023-06-08", "2023-06-08"),
        ("Which books did Melanie read in 2022?", "2022-01-01", "2022-12-31"),
        ("What did Caroline do two weeks ago?", "2023-05-22", "2023-05-28"),
    ],
)
def test_rules_planner_time_constraint(question, start, end):
    plan = rules().plan(question, QDATE, CTX).plan
    t = plan.routes[0].time
    assert t is not None and (t.start, t.end) == (start, end)
    assert all(r.time == t for r in plan.routes)  # entity routes share the question's constraint
    assert plan.question_type == "temporal"


def test_rules_planner_no_time_and_open_ranges():
    p = rules().plan("What does Caroline like to read?", QDATE, CTX).plan
    assert p.routes[0].time is None
    assert len(p.routes) == 1 and p.routes[0].entities == ["Caroline"]  # one entity: no duplicate route
    before = rules().plan("What did Melanie paint before 2023?", QDATE, CTX).plan.routes[0].time
    assert before is not None and before.start is None and before.end == "2022-12-31"


def test_rules_planner_routes_per_entity():
    out = rules().plan("What do Caroline and Melanie both like about camping?", QDATE, CTX)
    plan = out.plan
    assert [r.origin for r in plan.routes] == ["question", "entity", "entity"]
    assert plan.routes[0].search_texts == ["What do Caroline and Melanie both like about camping?"]
    assert plan.routes[0].entities == ["Caroline", "Melanie"] and plan.routes[0].topics == ["camping"]
    caro = plan.routes[1]
    assert caro.entities == ["Caroline"] and "Melanie" not in caro.search_texts[0] and "Caroline" in caro.search_texts[0]
    assert plan.backend == "rules" and not plan.fallback
    assert out.prompt_tokens > 50 and out.calls == 0  # the openai prompt it would send, counted offline
    # caps
    assert len(rules(max_entity_routes=1).plan("Caroline and Melanie?", QDATE, CTX).plan.routes) == 2
    assert len(rules(max_routes=1).plan("Caroline and Melanie?", QDATE, CTX).plan.routes) == 1


def test_match_keys_longest_first_and_possessives():
    assert match_keys("Did Caroline's friend move to New York?", CTX.entities) == ["caroline", "new york"]
    assert match_keys("what is new?", {"new": 1, "what": 1}) == []  # stop words never match alone


def client(srv: OpenAIServer, **kw) -> LLMClient:
    kw.setdefault("max_attempts", 2)
    cfg = LLMConfig(base_url=srv.base_url, api_key="test", backoff_initial_s=0, backoff_max_s=0, **kw)
    return LLMClient(cfg)


def test_openai_planner_parses_and_resolves_time():
    reply = {
        "routes": [
            {"search_texts": ["Caroline gave a speech at a school", " "],
             "entities": ["Caroline"], "topics": ["speech"], "record_types": ["event", "Activity", "bogus"],
             "time": "last week"},
            {"search_texts": [], "entities": [], "topics": [], "record_types": [], "time": None},
            {"search_texts": ["Melanie pottery"], "entities": [], "topics": [], "record_types": [],
             "time": "2023-05.."},
        ],
    }
    with OpenAIServer([ok(reply)]) as srv:
        c = client(srv)
        out = OpenAIPlanner(c, PlannerConfig()).plan("When did Caroline give her speech last week?", QDATE, CTX, question_id="q1")
        body = srv.chat_requests()[0].body
    plan = out.plan
    assert not plan.fallback and plan.backend == "openai" and plan.question_type == "temporal"
    assert [r.search_texts for r in plan.routes] == [["Caroline gave a speech at a school"], ["Melanie pottery"]]
    assert plan.routes[0].record_types == ["event"]  # alias mapped, unknown dropped
    assert (plan.routes[0].time.start, plan.routes[0].time.end) == ("2023-05-29", "2023-06-04")
    assert plan.routes[1].time.start == "2023-05-01" and plan.routes[1].time.end is None
    assert out.calls == 1 and out.prompt_tokens > 0 and out.completion_tokens > 0
    assert body["response_format"]["type"] == "json_schema" and body["response_format"]["json_schema"]["name"] == "query_plan"
    user = body["messages"][-1]["content"]
    assert "Question date: 2023-06-09" in user and "Known names: Caroline, Melanie" in user


@pytest.mark.parametrize("broken", [malformed_content(), schema_violation({"routes": "nope"}), truncated()])
@pytest.mark.parametrize("invalid_attempts", [1, 2])
def test_openai_planner_falls_back_on_broken_reply(broken, invalid_attempts):
    with OpenAIServer([broken, broken]) as srv:
        cfg = PlannerConfig(max_invalid_attempts=invalid_attempts)
        out = OpenAIPlanner(client(srv), cfg).plan("What did Melanie do in May 2023?", QDATE, CTX, question_id="q2")
        # an unusable reply is tried planner.max_invalid_attempts times (default 1), within llm.max_attempts (2 here)
        assert len(srv.chat_requests()) == invalid_attempts
    assert PlannerConfig().max_invalid_attempts == 1
    plan = out.plan
    assert plan.fallback and "llm call failed" in plan.fallback_reason
    assert len(plan.routes) == 1 and plan.routes[0].origin == "fallback"
    assert plan.routes[0].search_texts == ["What did Melanie do in May 2023?"]
    assert plan.routes[0].time.start == "2023-05-01"
    assert out.calls == 1 and out.prompt_tokens > 0  # the failed attempts were billed


def test_openai_planner_retries_transport_errors_but_not_bad_replies():
    good = {"routes": [{"search_texts": ["Melanie in May"], "entities": [], "topics": [], "record_types": [], "time": None}]}
    with OpenAIServer([status(503), ok(good)]) as srv:  # a 5xx is retried even with one try for bad replies
        out = OpenAIPlanner(client(srv), PlannerConfig(max_invalid_attempts=1)).plan("What did Melanie do?", QDATE, CTX)
        assert len(srv.chat_requests()) == 2
    assert not out.plan.fallback and out.plan.routes[0].search_texts == ["Melanie in May"]
    with OpenAIServer([status(503), truncated()]) as srv:  # ... and the bad reply after it ends the call
        out = OpenAIPlanner(client(srv, max_attempts=4), PlannerConfig(max_invalid_attempts=1)).plan("What did Melanie do?",
                                                                                                     QDATE, CTX)
        assert len(srv.chat_requests()) == 2
    assert out.plan.fallback and out.plan.fallback_kind == "truncated"


def test_openai_planner_falls_back_on_unusable_plan():
    reply = {"routes": [{"search_texts": ["  "], "entities": [], "topics": [],
                                              "record_types": [], "time": None}]}
    with OpenAIServer([ok(reply)]) as srv:
        out = OpenAIPlanner(client(srv), PlannerConfig()).plan("Where did Caroline move from?", QDATE, CTX)
    assert out.plan.fallback and out.plan.fallback_kind == "invalid_plan" and "invalid plan" in out.plan.fallback_reason
    assert out.plan.routes[0].search_texts == ["Where did Caroline move from?"]


def test_openai_planner_caps_routes():
    route = {"search_texts": ["a", "b", "c", "d"], "entities": [], "topics": [], "record_types": [], "time": None}
    with OpenAIServer([ok({"routes": [route] * 6})]) as srv:
        plan = OpenAIPlanner(client(srv), PlannerConfig(max_routes=3, max_search_texts=2)).plan("q?", QDATE, CTX).plan
    assert len(plan.routes) == 3 and all(len(r.search_texts) == 2 for r in plan.routes)


@pytest.mark.parametrize("text, expected", [
    ("2023-05-01..2023-05-31", ("2023-05-01", "2023-05-31", None)),
    ("2023-05..", ("2023-05", None, None)),
    ("..2022-12-31", (None, "2022-12-31", None)),
    ("2023-05", ("2023-05", "2023-05", None)),
    ("last week", (None, None, "last week")),
    ("", None), (None, None), ("null", None), ("..", None),
])
def test_plan_time_text(text, expected):
    """The planner's one-string time constraint: an ISO range, one period, or wording for the code."""
    from lychee_ray.query.plan.prompt import parse_time_text

    got = parse_time_text(text)
    assert (None if got is None else (got.start, got.end, got.expression)) == expected
