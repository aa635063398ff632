"""The README's example of memory that stays current, as a new user runs it on the defaults: a
shipping address and a rent change in a chat; ``lychee-ray query`` shows the current value first
and the older statements marked, ``lychee-ray history`` by slot or subject shows the chain, and the
inspector's conversation page shows the statements and the chain. Sentences written for the test."""

from __future__ import annotations

import json

import pytest

from lychee_ray.cli.main import main

CHAT = {"conversation_id": "moving", "user_id": "u", "sessions": [
    {"session_id": "s1", "started_at": "2024-03-01T10:00:00", "turns": [
        {"turn_id": "u1", "role": "user", "content": "My shipping address is 12 Elm Street. My rent is 1,200 dollars a month."},
        {"turn_id": "a1", "role": "assistant", "content": "Noted: your rent is $1,200 a month. I'll ship to 12 Elm Street."}]},
    {"session_id": "s2", "started_at": "2024-04-10T10:00:00", "turns": [
        {"turn_id": "u2", "role": "user", "content": "I moved, my shipping address is now 48 Oak Avenue. The rent went up to 1,450 dollars."},
        {"turn_id": "a2", "role": "assistant", "content": "Updated, thanks."}]}]}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("readme-currency")
    src = root / "chat.jsonl"
    src.write_text(json.dumps(CHAT) + "\n", encoding="utf-8")
    assert main(["build", "--input", str(src), "--out", str(root / "st"), "--llm", "rules", "--local"]) == 0
    return root / "st"


@pytest.mark.heavy
def test_query_shows_the_current_value_first_and_marks_the_older_ones(store, capsys):
    capsys.readouterr()
    assert main(["query", "--memory", str(store), "--conversation", "moving", "What is my rent?", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    ev = res["evidence"]
    assert "1,450" in ev[0]["text"] and ev[0]["status"] == "current", res["context"]
    old = [e for e in ev if "1,200" in e["text"]]
    assert old and all(e["status"] == "superseded" for e in old), res["context"]
    assert all("superseded on 2024-04-10" in line for line in res["context"].splitlines() if "1,200" in line)
    assert "1,450" in res["answer"] and "1,200" not in res["answer"]  # the rules answer quotes what holds


@pytest.mark.heavy
def test_history_by_slot_and_by_subject_shows_the_chain(store, capsys):
    capsys.readouterr()
    assert main(["history", "--memory", str(store), "--conversation", "moving", "--slot", "user · shipping address",
                 "--json"]) == 0
    chain = json.loads(capsys.readouterr().out)
    assert [(e["value"], e["status"]) for e in chain["entries"]] == [("12 elm street", "superseded"),
                                                                    ("48 oak avenue", "current")]
    assert main(["history", "--memory", str(store), "--conversation", "moving", "--subject", "rent", "--json"]) == 0
    rent = json.loads(capsys.readouterr().out)
    assert [e["status"] for e in rent["entries"]][-1] == "current" and "1,450" in rent["entries"][-1]["text"]
    assert {"u1", "a1"} <= {t for e in rent["entries"] if e["status"] == "superseded" for t in e["source_turn_ids"]}


@pytest.mark.heavy
def test_the_inspector_shows_the_statements_and_the_chain(store, embedder):
    from lychee_ray.config import load_config
    from lychee_ray.inspector.conversation import conversation_detail
    from lychee_ray.io.store import StoreWriter, iter_markers
    from lychee_ray.query.engine import QueryEngine

    w = StoreWriter(store)
    marker = next(m for m in iter_markers(store) if m.conversation_id == "moving")
    engine = QueryEngine.open(store, load_config(env={}), embedder=embedder, llm="rules")
    try:
        d = conversation_detail(w.layout, marker, engine)
    finally:
        engine.close()
    said = {st["said"] for r in d.records for st in (r.get("statements") or [])}
    assert {"12 Elm Street", "48 Oak Avenue", "1,450 dollars"} <= said
    slots = {c.slot: [e.status for e in c.entries] for c in d.slots}
    assert slots["user · shipping address"] == ["superseded", "current"]
