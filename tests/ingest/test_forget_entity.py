"""Forgetting an entity at the granularity a user means: a record that also holds another fact is
rewritten without the entity's clauses (the other fact stays findable), ``redact_turns`` redacts
the turns naming it on its own and after the records are gone, and only a forget that finds nothing
at all says so. Every step is checked with erasure's byte scan, in any letter case."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from lychee_ray.config import load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.forget import ForgetError, ForgetSelector, forget_records
from lychee_ray.ingest.runner import run_local_build_items
from lychee_ray.io.adapters import read_objects
from lychee_ray.io.store import StoreReader
from lychee_ray.io.store.forget import REDACTED
from lychee_ray.io.store.tombstones import read_tombstones
from lychee_ray.io.store.layout import StoreLayout
from lychee_ray.io.verify import verify_store
from lychee_ray.memory import MemoryStore
from tests.io.test_erase import snapshot, traces

PET = "Biscuit"
MIXED = "My beagle Biscuit loves the park and I have a severe peanut allergy."
# a long user turn (cut into passages) naming the pet in one sentence among others
LONG = " ".join(
    [f"On day {i} of the trip we hiked past the old mill and counted {i + 3} herons by the reservoir." for i in range(14)]
    + ["Biscuit chased a heron into the reeds that evening."]
    + [f"Afterwards the ranger logged sighting number {i} in the visitor book." for i in range(8)])
CONVERSATION = {
    "conversation_id": "dana-1", "user_id": "dana",
    "sessions": [{"session_id": "s1", "started_at": "2024-03-04T10:00:00", "turns": [
        {"turn_id": "1", "role": "user", "content": MIXED},
        {"turn_id": "2", "role": "assistant", "content": "Noted: I will keep peanuts out of every recipe I suggest."},
        {"turn_id": "3", "role": "user", "content": "My sister Marguerite teaches cello at a conservatory in Lisbon."},
        {"turn_id": "4", "role": "assistant", "content": "Lisbon is a lovely city for music."},
        {"turn_id": "5", "role": "user", "content": LONG},
        {"turn_id": "6", "role": "assistant", "content": "Herons are shy birds; the reservoir sounds peaceful."},
    ]}],
}
ALLERGY_Q = "What is the user allergic to?"


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder) -> Path:
    """The conversation built with the offline rules backend (and compacted, as every build ends)."""
    root = tmp_path_factory.mktemp("forget-entity") / "store"
    cfg = load_config(env={})
    conv = Conversation.model_validate(CONVERSATION)
    s = run_local_build_items(cfg, read_objects([conv]), root, backend="rules", ctx=make_context(cfg, "rules", embedder))
    assert s.built == 1
    return root


@pytest.fixture
def store(built, tmp_path) -> Path:
    return Path(shutil.copytree(built, tmp_path / "store"))


def _anywhere(root: Path, name: str) -> list[str]:
    """The byte scan of erasure, for the name in any of its usual letter cases."""
    return sorted({h for v in {name, name.lower(), name.upper()} for h in traces(root, v)})


def _records(root: Path) -> list[dict]:
    return StoreReader(root).load("dana-1").records.to_pylist()


def _allergy_found(ms: MemoryStore) -> bool:
    res = ms.search(None, ALLERGY_Q, "2024-03-05", user_id="dana").model_dump()
    return "peanut allergy" in json.dumps([res["evidence"], res["context"]])


def test_entity_forget_rewrites_the_shared_record_and_keeps_the_other_fact(store, embedder):
    before = [r for r in _records(store) if PET in r["text"]]
    mixed = next(r for r in before if "peanut allergy" in r["text"])
    ms = MemoryStore(store, load_config(env={}), embedder=embedder, llm="rules")
    assert _allergy_found(ms)

    rep = ms.forget_records("dana", entity=PET)
    assert rep.records_rewritten == 1 and rep.conversation_ids == ["dana-1"] and rep.turns_redacted == 0
    new_id = rep.rewritten_ids[mixed["record_id"]]
    after = {r["record_id"]: r for r in _records(store)}
    kept = after[new_id]
    assert PET not in kept["text"] and "peanut allergy" in kept["text"] and PET not in kept["entities"]
    assert (kept["segment_id"], kept["source_turn_ids"], kept["type"]) == (mixed["segment_id"], mixed["source_turn_ids"],
                                                                           mixed["type"])
    assert len(after) == len(_records(store)) and mixed["record_id"] not in after
    assert not any(PET.lower() in r["text"].lower() for r in after.values())
    data = StoreReader(store).load("dana-1")
    assert data.record_index.ntotal == data.records.num_rows
    # re-embedded and re-indexed: its own text finds it first in the record index
    _, rows = data.record_index.search(embedder.encode([kept["text"]]).astype("float32"), 1)
    assert data.records.column("record_id").to_pylist()[int(rows[0][0])] == new_id
    assert all(mixed["record_id"] not in (ids or []) for ids in data.nodes.column("record_ids").to_pylist())
    assert any(new_id in (ids or []) for ids in data.nodes.column("record_ids").to_pylist())
    assert mixed["record_id"] in read_tombstones(StoreLayout(store), next(iter(StoreReader(store).markers.values())).key
                                                 ).record_ids
    # the name is left only in the user's own turns (no --redact-turns); the surviving fact is found
    assert {h.split("/")[0] for h in _anywhere(store, PET)} == {"turns"}
    assert _allergy_found(ms)
    assert verify_store(store)["ok"]
    ms.close()


def test_redact_turns_alone_leaves_no_trace(store, embedder):
    ms = MemoryStore(store, load_config(env={}), embedder=embedder, llm="rules")
    rep = ms.forget_records("dana", entity=PET, redact_turns=True)
    assert rep.records_removed + rep.records_rewritten >= 2 and rep.turns_redacted == 2  # MIXED and LONG
    assert _anywhere(store, PET) == []
    turns = {r["turn_id"]: r["content"] for r in StoreReader(store).load("dana-1").turns.to_pylist()}
    assert turns["1"] == f"{REDACTED} and I have a severe peanut allergy."
    assert REDACTED in turns["5"] and "counted 3 herons" in turns["5"] and "visitor book" in turns["5"]
    passages = StoreReader(store).load("dana-1").tables["passages"].to_pylist()
    assert any(p["turn_id"] == "5" for p in passages)  # the long turn is cut again from its new text
    assert all(p["char_end"] <= len(turns[p["turn_id"]]) for p in passages)
    assert _allergy_found(ms)
    assert verify_store(store)["ok"]
    ms.close()


def test_redact_turns_after_a_prior_entity_forget(store, embedder):
    forget_records(store, "dana", ForgetSelector(entity=PET), embedder=embedder)
    assert _anywhere(store, PET) != []
    # the records are gone: the turns (and their passages, vectors) are what is left to redact
    rep = forget_records(store, "dana", ForgetSelector(entity=PET.upper()), redact_turns=True, embedder=embedder)
    assert (rep.records_removed, rep.records_rewritten, rep.turns_redacted) == (0, 0, 2)
    assert rep.conversation_ids == ["dana-1"]
    assert _anywhere(store, PET) == []
    assert verify_store(store)["ok"]
    log = json.loads((store / "manifest.json").read_text())["forgets"]
    assert [(e["records"], e["rewritten"], e["turns"]) for e in log] == [(1, 1, 0), (0, 0, 2)]  # "Biscuit chased…" went
    with pytest.raises(ForgetError) as ei:  # now nothing at all names it
        forget_records(store, "dana", ForgetSelector(entity=PET), redact_turns=True, embedder=embedder)
    assert ei.value.kind == "no_records" and "no record or turn" in str(ei.value)


def test_nothing_matching_changes_nothing_and_says_so(store, embedder, capsys):
    from lychee_ray.cli.main import main

    before = snapshot(store, ["dana-1"])
    for redact in (False, True):
        with pytest.raises(ForgetError) as ei:
            forget_records(store, "dana", ForgetSelector(entity="Zanzibarella"), redact_turns=redact, embedder=embedder)
        assert ei.value.kind == "no_records"
    args = ["forget", "--memory", str(store), "--user", "dana", "--entity", "Zanzibarella", "--yes"]
    assert main(args + ["--redact-turns"]) == 2
    assert "nothing forgotten" in capsys.readouterr().err
    assert snapshot(store, ["dana-1"]) == before
    # and through the CLI, the rewrite is reported
    assert main(["forget", "--memory", str(store), "--user", "dana", "--entity", PET, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "rewrote 1 record without it" in out
