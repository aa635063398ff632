"""``POST /v1/users/{user_id}/forget`` without Ray (docs/erasure.md, "Forgetting"): the library's
forget over HTTP, each ForgetError kind's status, and no replica answering from a forgotten record.
Tenancy (a key names only its users) is in the matrix of tests/serve/test_tenancy.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from lychee_ray.config import load_config
from lychee_ray.io.store import StoreReader, StoreWriter
from lychee_ray.serve import MemoryClient, MemoryService, RemoteError, create_app
from tests.ingest.test_forget import EXTRA, HAND, NEW_ADDR, OLD_ADDR, ORDER, SLOT
from tests.stores import RECORDS, conversation_spec, make_store

QUESTION = {"user_id": "u1", "question": "What is the user's shipping address?", "question_date": "2024-01-01"}


@pytest.fixture
def root(tmp_path, embedder) -> Path:
    """c-1 (user u1): two records of one slot, an order record and three others; c-2 (user u2)."""
    c1 = {**conversation_spec("c-1", "u1", records=HAND), "extra": EXTRA}
    return make_store(tmp_path / "store", embedder, [c1, conversation_spec("c-2", "u2", records=RECORDS[:2])])


def service(root: Path, embedder, *sets: str) -> MemoryService:
    return MemoryService(root, load_config(env={}, sets=["serve.reload_interval_s=0", *sets]), embedder=embedder,
                         llm="rules")


def evidence(c: TestClient) -> str:
    r = c.post("/v1/search", json=QUESTION)
    assert r.status_code == 200, r.text
    return json.dumps(r.json()["evidence"])


def test_forget_a_slot_over_http_leaves_no_replica_answering_from_it(root, embedder):
    """Two replicas have the conversation cached; a forget through one: neither shows the slot's records again."""
    one, two = service(root, embedder), service(root, embedder)
    with TestClient(create_app(one)) as c1, TestClient(create_app(two)) as c2:
        for c in (c1, c2):
            shown = evidence(c)
            assert OLD_ADDR in shown and NEW_ADDR in shown
        rep = MemoryClient("http://testserver", http=c1).forget("u1", slot=SLOT)
        assert (rep.user_id, rep.selector, rep.records_removed, rep.conversation_ids) == ("u1", "slot", 2, ["c-1"])
        assert len(rep.record_ids) == 2
        assert "c-1" not in one.store.cache and "c-1" in two.store.cache  # the old commit's view dropped at once
        assert one.store.reader.markers["c-1"].counts.records == len(HAND) - 2
        for c in (c1, c2):  # this replica dropped its view at once; the other re-reads the changed marker
            shown = evidence(c)
            assert OLD_ADDR not in shown and NEW_ADDR not in shown
        assert c1.get("/v1/conversations/c-1").json()["records"] == len(HAND) - 2
        # the same again: nothing left to forget
        r = c1.post("/v1/users/u1/forget", json={"slot": SLOT})
        assert r.status_code == 404 and r.json()["error"] == "not_found"
        # with redaction the source turn loses its text too
        r = c2.post("/v1/users/u1/forget", json={"entity": "Vantrope-77", "redact_turns": True,
                                                  "conversation_id": "c-1"})
        assert r.status_code == 200 and r.json()["records_removed"] == 1 and r.json()["turns_redacted"] == 1
        assert ORDER not in evidence(c1)
    one.close()
    two.close()
    assert StoreReader(root).markers["c-2"].counts.records == 2


@pytest.mark.parametrize(("body", "status", "error"), [
    ({"record_id": "r-nope"}, 404, "not_found"),  # no such record of this user
    ({"entity": "Zanzibar Quux"}, 404, "not_found"),  # an entity matching nothing
    ({}, 422, "invalid_request"),  # no selector
    ({"slot": SLOT, "entity": "user"}, 422, "invalid_request"),  # two
    ({"slot": "no separator"}, 422, "invalid_request"),
    ({"expired": True}, 422, "invalid_request"),  # no store.retention_days configured
    ({"slot": SLOT, "conversation_id": "c-2"}, 404, "not_found"),  # u2's conversation
    ({"slot": SLOT, "conversation_id": "c-new"}, 409, "conversation_building"),  # files, no commit yet
    ({"slot": SLOT, "everything": True}, 422, None),  # an unknown field (FastAPI's 422)
])
def test_forget_refusals_change_nothing(root, embedder, body, status, error):
    StoreWriter(root).claim("c-new", "run-1", "in.jsonl:1")
    before = StoreReader(root).markers
    svc = service(root, embedder)
    with TestClient(create_app(svc)) as c:
        r = c.post("/v1/users/u1/forget", json=body)
        assert r.status_code == status, r.text
        if error is not None:
            assert r.json()["error"] == error, r.json()
        if body.get("conversation_id") == "c-2":
            assert r.json()["detail"] == "conversation 'c-2' not found for user 'u1'"
        if error is not None and "conversation_id" not in body:
            # an unknown user: the 404 every unknown user gets, before the selector is looked at
            r = c.post("/v1/users/nobody/forget", json=body)
            assert (r.status_code, r.json()) == (404, {"detail": "unknown user 'nobody'", "error": "not_found"})
        with pytest.raises(RemoteError) as ei:
            MemoryClient("http://testserver", http=c).forget("u1", record_id="r-nope")
        assert (ei.value.status, ei.value.code) == (404, "not_found")
    svc.close()
    assert StoreReader(root).markers == before
