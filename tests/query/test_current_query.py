"""Memory that stays current on the query path (query/currency.py, query/marks.py, query/plan/history.py):
the value that holds now is in the context, a line that shows a replaced value says so, evidence
items carry status / valid_until / superseded_by, the marked context stays within the budget and
counts exactly, history questions show the chain, and a user's conversations are read together."""

from __future__ import annotations

import pytest

from lychee_ray.config import load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.ingest.context import make_context
from lychee_ray.memory import MemoryStore
from lychee_ray.query.plan.history import asks_history
from lychee_ray.text.tokens import count_tokens
from tests.ingest.test_current_memory import RES, _exchange, agent_log
from tests.ingest.test_incremental import build
from tests.reliability.test_bad_input import HashEmbedder

QUESTION = "What are the flights of reservation M05KNL now?"


def _later_trip(cid: str, started: str, user: str = "ana_1") -> Conversation:
    """The same user, another conversation: M05KNL looked up again, now on other flights."""
    moved = {**RES, "flights": [{"flight_number": "HAT999", "date": "2024-07-01", "origin": "ATL", "destination": "PHL"}]}
    if "same" in cid:  # May's instant, other flights than tau-cur's change: neither can replace the other
        moved = {**RES, "flights": [{"flight_number": "HAT555", "date": "2024-05-30"}]}
    turns = _exchange(1, "What is on reservation M05KNL?", "get_reservation_details", {"reservation_id": "M05KNL"}, moved)
    return Conversation.model_validate({"conversation_id": cid, "user_id": user, "sessions": [
        {"session_id": "s1", "started_at": started, "turns": turns}]})


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    cfg = load_config(env={})
    out = tmp_path_factory.mktemp("current")
    ctx = make_context(cfg, "rules", HashEmbedder())
    s = build(ctx, out, agent_log(), _later_trip("tau-later", "2024-06-20T09:00:00"),
              _later_trip("tau-same-time", "2024-05-15T15:00:00"),
              _later_trip("bob-a", "2024-05-15T15:00:00", "bob"), _later_trip("bob-same-a", "2024-05-15T15:00:00", "bob"))
    assert s.built == 5, s.errors
    return out


def _store(root, **sets):
    cfg = load_config(sets=[f"{k}={v}" for k, v in sets.items()], env={})
    return MemoryStore.open(root, cfg, embedder=HashEmbedder(), llm="rules")


@pytest.mark.parametrize("budget", [300, 700, 1500])
def test_the_current_value_is_shown_and_a_replaced_one_is_marked(root, budget):
    with _store(root) as store:
        res = store.search("tau-cur", QUESTION, budget_tokens=budget)
    assert not res.plan.history
    assert count_tokens(res.context) == res.usage.context_tokens <= budget  # marks counted, never over
    assert "HAT110" in res.context
    for e in res.evidence:  # every item that shows the replaced flight says it no longer holds
        if "HAT227" in e.text:
            assert e.status == "superseded" and e.valid_until and e.superseded_by, e
    old = [e for e in res.evidence if e.kind == "record" and "HAT227" in e.text]
    if old:
        line = next(x for x in res.context.splitlines() if "HAT227" in x)
        assert "[superseded on 2024-05-15 by: flights: HAT110]" in line


def test_marks_off_shows_records_as_stored(root):
    with _store(root, **{"query.current.enabled": "false"}) as store:
        res = store.search("tau-cur", QUESTION, budget_tokens=1500)
    assert "[superseded" not in res.context and all(e.status == "current" for e in res.evidence)


def test_a_cancelled_reservation_is_marked_as_ended(root):
    with _store(root) as store:
        res = store.search("tau-cur", "What is on reservation UHDAHF now?", budget_tokens=1500)
    looked_up = [e for e in res.evidence if e.kind == "record" and e.source_turn_ids == ["a4", "t4"]]
    assert looked_up and all(e.status == "superseded" for e in looked_up)
    assert "cancel_reservation(reservation_id=UHDAHF" in res.context


def test_history_questions_show_the_chain_with_dates(root):
    q = "What were the flights of reservation M05KNL before it changed?"
    assert asks_history(q) and not asks_history(QUESTION) and not asks_history("What did Ana do before the trip?")
    with _store(root) as store:
        res = store.search("tau-cur", q, budget_tokens=1500)
    assert res.plan.history
    assert "HAT227" in res.context and "HAT110" in res.context
    lines = res.context.splitlines()
    old = next(i for i, x in enumerate(lines) if "HAT227" in x)
    new = next(i for i, x in enumerate(lines) if "performed update_reservation_flights" in x)
    assert old < new and "[superseded on 2024-05-15 by: flights: HAT110]" in lines[old]  # in time order, dated
    assert {e.status for e in res.evidence if "HAT227" in e.text and e.kind == "record"} == {"history"}
    assert "[current since 2024-05-15" in res.context


def test_a_users_conversations_are_read_in_time_order(root):
    with _store(root) as store:
        res = store.search(None, QUESTION, budget_tokens=1500, user_id="ana_1")
    assert "HAT999" in res.context
    by_conv: dict[str, set[str]] = {}
    for e in res.evidence:
        if e.kind == "record" and "flight number" in e.text and "M05KNL" in e.text and "used the tool" not in e.text:
            by_conv.setdefault(e.conversation_id, set()).add(e.status)
    # the June lookup replaces May's flights, in both conversations of May's instant
    assert by_conv["tau-cur"] == {"superseded"}
    assert by_conv.keys() & {"tau-later", "tau-same-time"}
    assert by_conv.get("tau-later", {"current"}) == {"current"}
    assert by_conv.get("tau-same-time", {"superseded"}) == {"superseded"}  # June's value replaces it too


def test_statements_of_one_instant_that_disagree_are_both_shown_and_marked(root):
    with _store(root) as store:
        res = store.search(None, QUESTION, budget_tokens=1500, user_id="bob")
    flights = [e for e in res.evidence if e.kind == "record" and "flight number" in e.text]
    assert {e.conversation_id for e in flights} == {"bob-a", "bob-same-a"}
    assert {e.status for e in flights} == {"conflicting"}
    marked = [x for x in res.context.splitlines() if "[conflicts with:" in x]
    assert len(marked) == 2 and any("HAT999" in x and "HAT555" in x for x in marked)


def test_history_in_the_api_over_http_and_on_the_command_line(root, capsys):
    from fastapi.testclient import TestClient

    from lychee_ray.cli.main import main
    from lychee_ray.query.history import HistoryQueryError
    from lychee_ray.serve import MemoryService, create_app

    with _store(root) as store:
        h = store.history("tau-cur", slot="Reservation M05KNL · Flights")  # written as a person would
        assert [e.status for e in h.entries] == ["superseded", "current"] and h.slots == ["reservation m05knl · flights"]
        old, new = h.entries
        assert old.valid_until == new.valid_from and old.superseded_by == [new.record_id] and "HAT227" in old.text
        assert store.history("tau-cur", record_id=new.record_id).entries == h.entries
        ended = store.history("tau-cur", subject="reservation UHDAHF")
        assert {e.status for e in ended.entries if "t4" in e.source_turn_ids} == {"superseded"}
        mine = store.history(user_id="ana_1", slot="reservation m05knl · flights")
        assert mine.entries[-1].conversation_id == "tau-later" and mine.entries[-1].status == "current"
        assert {e.conversation_id for e in mine.entries} <= {"tau-cur", "tau-later", "tau-same-time"}
        for bad in ({}, {"slot": "flights"}, {"slot": "a · b", "subject": "a"}):
            with pytest.raises(HistoryQueryError):
                store.history("tau-cur", **bad)
        with pytest.raises(HistoryQueryError, match="unknown record"):
            store.history("tau-cur", record_id="r-nope")

    cfg = load_config(env={})
    svc = MemoryService(root, cfg, embedder=HashEmbedder(), llm="rules")
    with TestClient(create_app(svc)) as c:
        r = c.get("/v1/history", params={"conversation_id": "tau-cur", "slot": "reservation m05knl · flights"})
        assert r.status_code == 200 and [e["status"] for e in r.json()["entries"]] == ["superseded", "current"]
        assert c.get("/v1/history", params={"conversation_id": "tau-cur"}).status_code == 422
        assert c.get("/v1/history", params={"slot": "a · b"}).status_code == 422
        assert c.get("/v1/history", params={"conversation_id": "tau-cur", "record_id": "r-nope"}).status_code == 404
        assert c.get("/v1/history", params={"conversation_id": "nope", "subject": "x"}).status_code == 404
    svc.close()

    assert main(["history", "--memory", str(root), "--conversation", "tau-cur", "--slot", "reservation M05KNL · flights"]) == 0
    out = capsys.readouterr().out
    assert "reservation m05knl · flights:" in out and "superseded" in out and "HAT110" in out
    assert main(["history", "--memory", str(root), "--conversation", "tau-cur", "--slot", "flights"]) == 2
