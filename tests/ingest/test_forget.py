"""Forgetting on request: one record, a slot's or an entity's records, or expired ones, removed from
every file of the store (the erasure byte scan), from queries, and kept out of later commits."""

from __future__ import annotations

import json
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from lychee_ray.config import load_config
from lychee_ray.core.records import MemoryRecord
from lychee_ray.ingest.forget import ForgetError, ForgetSelector, forget_records
from lychee_ray.io.store import StoreReader, StoreWriter
from lychee_ray.io.store.artifacts import ConversationDelta, TableDelta, TableVectors
from lychee_ray.io.store.forget import REDACTED
from lychee_ray.io.store.marker import BuildInfo
from lychee_ray.io.verify import verify_store
from lychee_ray.memory import MemoryStore
from tests.io.test_erase import GONE, KEPT, OTHER_USER, SECRET, built, snapshot, store, traces  # noqa: F401  # fixtures
from tests.stores import RECORDS, conversation_spec, make_store

OLD_ADDR = "The user's shipping address is 12 Zorblax Lane."
NEW_ADDR = "The user's shipping address is 99 Quimbly Road now."
ORDER = "Order Vantrope-77 shipped in a blue box."
SLOT = "user · shipping address"
HAND = [
    ("fact", OLD_ADDR, ["user"], ["address"], None, ["D1:1"]),
    ("fact", NEW_ADDR, ["user"], ["address"], None, ["D2:1"]),
    ("event", ORDER, ["Vantrope-77"], ["order"], None, ["D2:2"]),
    *RECORDS[:3],
]
EXTRA = {0: {"slot": SLOT, "slot_value": "12 zorblax lane"},
         1: {"slot": SLOT, "slot_value": "99 quimbly road"}}


@pytest.fixture
def hand(tmp_path, embedder) -> Path:
    """c-1 (user u1) with two records of one slot, an order record and three others; c-2 (user u2)."""
    c1 = {**conversation_spec("c-1", "u1", records=HAND), "extra": EXTRA}
    return make_store(tmp_path / "store", embedder, [c1, conversation_spec("c-2", "u2", records=RECORDS[:2])])


def _ids(root: Path, cid: str) -> dict[str, str]:
    return {r["text"]: r["record_id"] for r in StoreReader(root).load(cid).records.to_pylist()}


def test_forget_entity_with_redaction_leaves_no_trace(store, embedder):
    """The erasure fixture (rules build, compacted): every record mentioning the secret, and with
    ``redact_turns`` its source turns, leave no byte of it anywhere; other conversations unchanged."""
    assert any(h.startswith("records/") for h in traces(store, SECRET))
    others = snapshot(store, [KEPT, OTHER_USER])
    (store / "errors").exists() and [p.unlink() for p in (store / "errors").glob("*.parquet")]  # (erasure's concern)
    ms = MemoryStore(store, load_config(env={}), embedder=embedder, llm="rules")
    q = f"What is the code name {SECRET}?"
    assert SECRET in json.dumps(ms.search(None, q, "2024-01-01", user_id="u-a").model_dump()["evidence"])

    rep = ms.forget_records("u-a", entity=SECRET, redact_turns=True)
    assert rep.conversation_ids == [GONE] and rep.records_removed + rep.records_rewritten >= 1 and rep.turns_redacted >= 1
    assert rep.files_rewritten >= 1  # GONE's rows in the shared compacted files went
    assert traces(store, SECRET) == []
    v = verify_store(store)
    assert v["ok"], {k: x for k, x in v.items() if k not in ("nodes",)}
    assert snapshot(store, [KEPT, OTHER_USER]) == others
    res = ms.search(None, q, "2024-01-01", user_id="u-a").model_dump()
    assert SECRET not in json.dumps([res["evidence"], res["context"]])
    assert any(REDACTED in c for c in StoreReader(store).load(GONE).turns.column("content").to_pylist())
    (entry,) = json.loads((store / "manifest.json").read_text())["forgets"]
    assert entry["selector"] == "entity" and (entry["records"], entry["rewritten"]) == (rep.records_removed,
                                                                                        rep.records_rewritten)
    with pytest.raises(ForgetError) as ei:
        ms.forget_records("u-a", entity=SECRET)
    assert ei.value.kind == "no_records"
    ms.close()


def test_forget_record_and_slot_everywhere_and_for_good(hand, embedder):
    ids = _ids(hand, "c-1")
    rep = forget_records(hand, "u1", ForgetSelector(record_id=ids[ORDER]))
    assert (rep.records_removed, rep.record_ids, rep.selector) == (1, [ids[ORDER]], "record")
    assert traces(hand, ORDER) == [] and traces(hand, "Vantrope") == []  # records, its entity node, ids.json
    data = StoreReader(hand).load("c-1")
    assert ids[ORDER] not in data.records.column("record_id").to_pylist()
    assert all(ids[ORDER] not in (n or []) for n in data.nodes.column("record_ids").to_pylist())
    assert data.record_index.ntotal == data.records.num_rows == 5
    assert verify_store(hand)["ok"]

    rep = forget_records(hand, "u1", ForgetSelector(slot="User | Shipping Address"))
    assert sorted(rep.record_ids) == sorted([ids[OLD_ADDR], ids[NEW_ADDR]])
    for text in (OLD_ADDR, NEW_ADDR, "Zorblax", "Quimbly"):
        assert traces(hand, text) == [], text
    assert StoreReader(hand).load("c-1").records.num_rows == 3 and verify_store(hand)["ok"]

    # a rebuild that writes the forgotten records again (the same turns encoded the same way), and an
    # append's delta that upserts one: the commit drops them
    c1 = {**conversation_spec("c-1", "u1", records=HAND), "extra": EXTRA}
    make_store(hand, embedder, [c1])
    assert traces(hand, ORDER) == [] and traces(hand, OLD_ADDR) == []
    assert StoreReader(hand).load("c-1").records.num_rows == 3
    w = StoreWriter(hand)
    m = w.commit_marker("c-1")
    assert m is not None
    row = MemoryRecord(record_id=ids[NEW_ADDR], conversation_id="c-1", user_id="u1", session_id="s2",
                       segment_id="c-1#s9", ordinal=0, type="fact", text=NEW_ADDR, backend="rules", model="x").to_row()
    dim = embedder.dim
    recs = pa.Table.from_pylist([row], schema=StoreReader(hand).load("c-1").records.schema)
    w.commit_delta(ConversationDelta(conversation_id="c-1", user_id="u1", fingerprint=m.fingerprint,
                                     tables={"records": TableDelta(recs, TableVectors(np.zeros(1, np.int64),
                                                                                      np.ones((1, dim), np.float32)))},
                                     counts=m.counts, open_turns=0, info=BuildInfo(**{k: getattr(m, k) for k in BuildInfo.model_fields}), dim=dim))
    assert traces(hand, NEW_ADDR) == [] and StoreReader(hand).load("c-1").records.num_rows == 3


def test_forget_bad_input_is_typed_and_changes_nothing(hand):
    ids = _ids(hand, "c-1")
    before = snapshot(hand, ["c-1", "c-2"])
    other = _ids(hand, "c-2")
    cases = [
        (dict(user_id="u1", selector=ForgetSelector(record_id="r-nope")), "not_found"),
        (dict(user_id="u1", selector=ForgetSelector(record_id=next(iter(other.values())))), "not_found"),  # u2's
        (dict(user_id="u1", selector=ForgetSelector(slot="user · favourite colour")), "no_records"),
        (dict(user_id="u1", selector=ForgetSelector(slot="no separator")), "invalid_request"),
        (dict(user_id="u1", selector=ForgetSelector()), "invalid_request"),
        (dict(user_id="u1", selector=ForgetSelector(record_id=ids[ORDER], slot=SLOT)), "invalid_request"),
        (dict(user_id="u1", selector=ForgetSelector(retention_days={})), "invalid_request"),
        (dict(user_id="u1", selector=ForgetSelector(record_id=ids[ORDER]), conversation_id="c-2"), "not_found"),
    ]
    for kwargs, kind in cases:
        with pytest.raises(ForgetError) as ei:
            forget_records(hand, **kwargs)  # type: ignore[arg-type]
        assert ei.value.kind == kind, (kwargs, ei.value)
    # a conversation being built: files (its claim) but no commit yet
    StoreWriter(hand).claim("c-new", "run-1", "in.jsonl:1")
    with pytest.raises(ForgetError) as ei:
        forget_records(hand, "u1", ForgetSelector(record_id="r-x"), conversation_id="c-new")
    assert ei.value.kind == "conversation_building"
    assert snapshot(hand, ["c-1", "c-2"]) == before


def test_forget_expired_by_retention(hand, embedder):
    cfg = load_config(env={}, sets=["store.retention_days={event: 365}"])
    ms = MemoryStore(hand, cfg, embedder=embedder, llm="rules")
    before = StoreReader(hand).load("c-1").records.to_pylist()
    events = {r["record_id"] for r in before if r["type"] == "event"}
    with pytest.raises(ForgetError) as ei:  # 2023's events are not a year old on 2023-12-31
        ms.forget_records("u1", expired=True, now=datetime(2023, 12, 31, tzinfo=timezone.utc))
    assert ei.value.kind == "no_records"
    rep = ms.forget_records("u1", expired=True, now=datetime(2030, 1, 1, tzinfo=timezone.utc))
    assert set(rep.record_ids) == events and rep.selector == "expired"
    after = StoreReader(hand).load("c-1").records.to_pylist()
    assert {r["type"] for r in after} == {"fact"} and len(after) == len(before) - len(events)
    assert StoreReader(hand).load("c-2").records.num_rows == 2  # another user's records are not touched
    with pytest.raises(ForgetError) as ei:  # no retention configured
        MemoryStore(hand, load_config(env={}), embedder=embedder, llm="rules").forget_records("u1", expired=True)
    assert ei.value.kind == "invalid_request"
    ms.close()


def test_cli_forget(hand, monkeypatch, capsys):
    from lychee_ray.cli.main import main

    ids = _ids(hand, "c-1")
    monkeypatch.setattr("sys.stdin.isatty", lambda: True)
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert main(["forget", "--memory", str(hand), "--user", "u1", "--record", ids[ORDER]]) == 1
    assert "nothing was forgotten" in capsys.readouterr().err and traces(hand, ORDER)
    assert main(["forget", "--memory", str(hand), "--user", "u1", "--record", ids[ORDER], "--yes"]) == 0
    assert capsys.readouterr().out.startswith("forgot 1 record of user 'u1' (record)") and traces(hand, ORDER) == []
    assert main(["forget", "--memory", str(hand), "--user", "u1", "--record", ids[ORDER], "--yes"]) == 2
    assert "unknown record" in capsys.readouterr().err
    assert main(["forget", "--memory", str(hand), "--user", "u1", "--slot", SLOT, "--yes", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["records_removed"] == 2 and traces(hand, OLD_ADDR) == []
    assert main(["forget", "--memory", str(hand), "--user", "u1", "--expired", "--yes"]) == 2  # no retention set
    assert "store.retention_days" in capsys.readouterr().err
