"""One query request: the model, the engine's two call forms, and the same request over HTTP and the client."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from pydantic import ValidationError

from lychee_ray.query.request import QueryRequest, RecentTurn, as_request
from tests.stores import conversation_spec, make_store

Q = "When did Caroline go to the LGBTQ support group?"


def test_the_request_checks_what_it_carries():
    r = QueryRequest(question=Q, conversation_id="c-1", recent_turns=["my order is 123", {"role": "assistant", "content": "ok"}])
    assert r.scope == "conversation" and r.recent_turns == [RecentTurn(content="my order is 123"),
                                                           RecentTurn(role="assistant", content="ok")]
    assert QueryRequest(question=Q, user_id="u-1").scope == "user"
    for bad in ({"question": Q}, {"question": "  ", "conversation_id": "c-1"}, {"question": Q, "user_id": "u", "budget_tokens": -1},
                {"question": Q, "user_id": "u", "llm": "gpt"}, {"question": Q, "user_id": "u", "limit": 3}):
        with pytest.raises(ValidationError):
            QueryRequest.model_validate(bad)


def test_the_body_holds_set_fields_without_this_process_choices():
    r = QueryRequest(question=Q, conversation_id="c-1", budget_tokens=300, llm="rules", question_id="q-7",
                     recent_turns=["hi"])
    assert r.body() == {"conversation_id": "c-1", "question": Q, "budget_tokens": 300, "recent_turns": [{"content": "hi"}]}


def test_a_request_comes_alone_and_the_keyword_form_makes_the_same():
    r = QueryRequest(question=Q, conversation_id="c-1", question_date="2023-08-01", budget_tokens=200, llm="rules")
    assert as_request(r) is r
    assert as_request("c-1", Q, "2023-08-01", 200, llm="rules", user_id=None, recent_turns=None, explain=False) == r
    with pytest.raises(TypeError, match="budget_tokens"):
        as_request(r, budget_tokens=100)
    with pytest.raises(TypeError):
        as_request("c-1")  # no question


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory, embedder) -> Path:
    return make_store(tmp_path_factory.mktemp("request_store"), embedder,
                      [conversation_spec("c-1", "u-1"), conversation_spec("c-2", "u-2")])


def test_the_engine_answers_a_request_as_it_answers_the_keyword_call(store_dir, embedder):
    from lychee_ray.config import load_config
    from lychee_ray.memory import MemoryStore

    with MemoryStore.open(store_dir, load_config(env={}), embedder=embedder) as store:
        req = QueryRequest(question=Q, conversation_id="c-1", question_date="2023-08-01", budget_tokens=250, llm="rules",
                           question_id="q-1", explain=True)
        a = store.search(req)
        b = store.search("c-1", Q, "2023-08-01", 250, llm="rules", question_id="q-1", explain=True)
        assert a.evidence == b.evidence and a.context == b.context and a.budget_tokens == 250 == b.budget_tokens
        assert a.explain is not None and a.question_id == "q-1"
        q = store.query(req.model_copy(update={"explain": False}))
        assert "support group" in q.answer and q.explain is None
        with pytest.raises(TypeError):
            store.search(req, Q)


def test_the_service_and_its_client_carry_the_same_request(store_dir, embedder):
    from lychee_ray.config import load_config
    from lychee_ray.serve import MemoryClient, MemoryService, create_app
    from lychee_ray.serve.schemas import QueryRequest as HttpQueryRequest

    # the HTTP body: the request's fields, less the backend and the question id the service decides
    assert list(HttpQueryRequest.model_json_schema()["properties"]) == [
        "conversation_id", "user_id", "question", "question_date", "budget_tokens", "recent_turns", "explain"]
    svc = MemoryService(store_dir, load_config(env={}), embedder=embedder, llm="rules")
    with TestClient(create_app(svc)) as http:
        r = http.post("/v1/search", json={"conversation_id": "c-1", "question": Q, "llm": "openai"})
        assert r.status_code == 422 and "llm" in r.text
        mc = MemoryClient("http://testserver/", http=http)
        req = QueryRequest(question=Q, conversation_id="c-1", question_date="2023-08-01", budget_tokens=250)
        by_object, by_keywords = mc.search(req), mc.search(Q, conversation_id="c-1", question_date="2023-08-01",
                                                           budget_tokens=250)
        assert by_object.evidence == by_keywords.evidence and by_object.budget_tokens == 250
        with pytest.raises(ValueError, match="backend"):
            mc.search(req.model_copy(update={"llm": "rules"}))  # the service decides it
    svc.close()
