"""Agent logs from segments to records to queries (issue 35), plain Python.

Segments follow the agent's work (the system prompt is a context unit of its own, a tool call and
its result stay in the exchange of the request), the rules backend writes all seven record types
from tool traffic with the specifics verbatim and attributed by role, a system prompt is encoded
once per distinct text, the planner reads the agent's recent turns, and identifiers are whole
lexical terms.
"""

from __future__ import annotations

import asyncio
import json

import numpy as np

from lychee_ray.ingest.encode.base import EncodeOutput, EncodeRequest, EncodeResult, RecordDraft, SegmentTurn
from lychee_ray.ingest.encode.rules import RulesEncoder
from lychee_ray.ingest.encode.rules.tool_results import result_chunks
from lychee_ray.ingest.encode.system_prompt import SystemPromptOnce
from lychee_ray.ingest.pipeline import encode_turns
from lychee_ray.ingest.segment import conversation_turn_inputs, segment_stream
from lychee_ray.config import SegmenterConfig
from lychee_ray.core.conversation import Conversation
from lychee_ray.core.tools import ToolCall
from lychee_ray.eval.metrics.locomo import locomo_normalize
from lychee_ray.eval.setup.agentlog_questions import QuestionLimits, derive_questions
from lychee_ray.query.plan.model import PlanContext, recent_lines
from lychee_ray.query.plan.rules import RulesPlanner
from lychee_ray.config import load_config
from lychee_ray.query.bm25 import BM25Index
from lychee_ray.text.lexical import identifier_terms

POLICY = ("# Airline policy\n- The agent must verify the user id before any change.\n"
          "- Each reservation can have at most five passengers.\nHave a nice day.")


def _call(cid: str, name: str, args: dict) -> dict:
    return {"call_id": cid, "name": name, "arguments": json.dumps(args)}


def agent_conversation() -> Conversation:
    turns = [
        {"turn_id": "m1", "role": "system", "content": POLICY},
        {"turn_id": "m2", "role": "user", "content": "Please cancel my reservation ABC123, my user id is jo_smith_42."},
        {"turn_id": "m3", "role": "assistant", "content": "", "tool_calls": [_call("c1", "get_reservation_details",
                                                                                    {"reservation_id": "ABC123"})]},
        {"turn_id": "m4", "role": "tool", "tool_call_id": "c1", "tool_name": "get_reservation_details",
         "content": json.dumps({"reservation_id": "ABC123", "cabin": "economy", "total": 305,
                                "email": "jo.smith@example.com"})},
        {"turn_id": "m5", "role": "assistant", "content": "", "tool_calls": [_call("c2", "cancel_reservation",
                                                                                    {"reservation_id": "ABC123"})]},
        {"turn_id": "m6", "role": "tool", "tool_call_id": "c2", "tool_name": "cancel_reservation",
         "content": json.dumps({"reservation_id": "ABC123", "status": "cancelled"})},
        {"turn_id": "m7", "role": "assistant", "content": "Reservation ABC123 is cancelled."},
        {"turn_id": "m8", "role": "user", "content": "No, that is wrong, I wanted a refund too."},
        {"turn_id": "m9", "role": "assistant", "content": "", "tool_calls": [_call("c3", "issue_refund",
                                                                                    {"reservation_id": "ABC123"})]},
        {"turn_id": "m10", "role": "tool", "tool_call_id": "c3", "tool_name": "issue_refund",
         "content": "Error: refunds need a supervisor"},
        {"turn_id": "m11", "role": "assistant", "content": "I'm sorry, I cannot issue that refund myself."},
        {"turn_id": "m12", "role": "assistant", "content": "", "tool_calls": [_call("c4", "transfer_to_human_agents",
                                                                                     {"summary": "refund ABC123"})]},
        {"turn_id": "m13", "role": "tool", "tool_call_id": "c4", "tool_name": "transfer_to_human_agents",
         "content": "Transfer successful"},
    ]
    return Conversation.model_validate({"conversation_id": "tau-x", "user_id": "jo_smith_42", "sessions": [
        {"session_id": "s1", "started_at": "2024-05-15T15:00:00", "turns": turns}]})


def _vectors(conv: Conversation, dim: int = 8) -> np.ndarray:
    rng = np.random.default_rng(0)
    v = rng.normal(size=(conv.num_turns, dim))
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def test_system_prompt_is_its_own_unit_and_tool_traffic_stays_with_its_request():
    conv = agent_conversation()
    cfg = SegmenterConfig()
    stream = segment_stream(conversation_turn_inputs(conv, _vectors(conv)), cfg)
    segs = stream.segments
    assert segs[0].turn_ids == ["m1"] and segs[0].reason == "system_prompt"
    assert all("m1" not in s.turn_ids for s in segs[1:])
    owner = {t: s.segment_index for s in segs for t in s.turn_ids}
    # a call and its result are in the same segment as the request that caused them
    assert owner["m3"] == owner["m4"] == owner["m2"]
    assert owner["m9"] == owner["m10"] == owner["m8"]
    assert sorted(owner) == sorted(t.turn_id for *_, t in conv.iter_turns())  # every turn in one segment


def test_a_resumed_segmenter_keeps_the_context_unit_rule():
    conv = agent_conversation()
    vecs = _vectors(conv)
    inputs = conversation_turn_inputs(conv, vecs)
    whole = segment_stream(inputs, SegmenterConfig())
    part = segment_stream(inputs[:5], SegmenterConfig(), finish=False)
    rest = segment_stream(inputs[5:], SegmenterConfig(), state=part.state)
    assert [s.turn_ids for s in part.closed + rest.segments] == [s.turn_ids for s in whole.segments]


def _request(conv: Conversation, seg, kind: str = "dialogue") -> EncodeRequest:
    return EncodeRequest(conversation_id=conv.conversation_id, user_id=conv.user_id, segment_id=f"s{seg.segment_index}",
                         segment_index=seg.segment_index, kind=kind, turns=encode_turns(conv, seg))


def _rules_records(conv: Conversation) -> list[RecordDraft]:
    enc = RulesEncoder()
    segs = segment_stream(conversation_turn_inputs(conv, _vectors(conv)), SegmenterConfig()).segments
    out = []
    for s in segs:
        kind = "system_prompt" if s.reason == "system_prompt" else "dialogue"
        out += enc.encode_sync(_request(conv, s, kind)).records
    return out


def test_rules_records_from_agent_work_cover_every_type_and_keep_specifics():
    recs = _rules_records(agent_conversation())
    by_type: dict[str, list[str]] = {}
    for r in recs:
        by_type.setdefault(r.type, []).append(r.text)
    assert set(by_type) == {"fact", "event", "constraint", "procedure", "failure_pattern", "tool_affordance"} | (
        {"preference"} & set(by_type))
    facts = " ".join(by_type["fact"])
    assert "jo.smith@example.com" in facts and "305" in facts and "ABC123" in facts
    assert any("cancel_reservation(reservation_id=ABC123)" in t and "cancelled" in t for t in by_type["event"])
    failures = " ".join(by_type["failure_pattern"])
    assert "refunds need a supervisor" in failures  # the tool error
    assert "human agent" in failures  # the hand-over
    assert "cannot issue that refund" in failures  # the refusal
    assert "corrected" in failures and "jo_smith_42" in failures  # the user correcting the agent
    assert any("at most five passengers" in t for t in by_type["constraint"])
    assert not any("nice day" in t for t in by_type["constraint"])  # not a rule
    assert any("get_reservation_details" in t and "cancel_reservation" in t for t in by_type["procedure"])


def test_records_attribute_agent_work_to_the_agent():
    recs = _rules_records(agent_conversation())
    tool_recs = [r for r in recs if r.type in ("event", "tool_affordance", "failure_pattern") and "agent" in r.text.lower()]
    assert tool_recs and not any(r.text.startswith("User") for r in tool_recs)
    # nothing the assistant said becomes the user's ("User said" only for user turns)
    said = [r for r in recs if r.text.startswith("User said") or r.text.startswith("User asked")]
    assert all("cancelled" not in r.text for r in said)


def test_result_chunks_split_json_and_bound_each_record():
    value = {"a": "x" * 50, "items": [{"id": f"F{i}", "price": i} for i in range(30)], "email": "a@b.co"}
    chunks = result_chunks(json.dumps(value), 120, 5)
    assert len(chunks) == 5 and all(len(c) <= 140 for c in chunks)
    assert "more)" in chunks[-1]  # what did not fit is said, not silently dropped
    assert result_chunks("Error: nope. Second sentence here.", 200, 3) == ["Error: nope.; Second sentence here."]


class _CountingEncoder:
    backend, model = "fake", "fake-1"

    def __init__(self) -> None:
        self.calls = 0

    async def encode(self, request: EncodeRequest) -> EncodeResult:
        self.calls += 1
        await asyncio.sleep(0.01)
        return EncodeResult(output=EncodeOutput(records=[RecordDraft(type="constraint", text="Policy: x.",
                                                                     source_turns=[0])]), model=self.model)


def test_a_system_prompt_is_encoded_once_per_distinct_text():
    inner = _CountingEncoder()
    enc = SystemPromptOnce(inner, max_prompts=4)

    def req(cid: str, text: str, kind: str = "system_prompt") -> EncodeRequest:
        turn = SegmentTurn(index=0, turn_id="m1", session_id="s1", session_date=None, speaker="system", role="system",
                           content=text)
        return EncodeRequest(conversation_id=cid, user_id="u", segment_id=f"{cid}#s0", segment_index=0, kind=kind,
                             turns=[turn])

    async def run() -> list[EncodeResult]:
        same = await asyncio.gather(*(enc.encode(req(f"c{i}", POLICY)) for i in range(5)))  # concurrent: one call
        other = await enc.encode(req("c9", "Another prompt."))
        dialogue = [await enc.encode(req(f"d{i}", POLICY, "dialogue")) for i in range(2)]  # never cached
        return [*same, other, *dialogue]

    results = asyncio.run(run())
    assert inner.calls == 1 + 1 + 2
    assert enc.hits == 4 and sum(r.attempts == 0 for r in results) == 4


def test_recent_turns_reach_the_rules_planner_within_their_budget():
    turns = [{"role": "user", "content": "My reservation is ABC123."}, {"role": "assistant", "content": "x " * 500},
             "What about it?"]
    assert recent_lines(turns, max_tokens=40) == ["user: What about it?"]  # newest first; the walk stops at the long one
    assert recent_lines(turns[:1] + turns[2:], max_tokens=40) == ["user: My reservation is ABC123.", "user: What about it?"]
    cut = recent_lines(turns[:2], max_tokens=40)
    assert len(cut) == 1 and cut[0].startswith("assistant: x x") and len(cut[0]) < 200  # a lone long turn: its head
    assert recent_lines(turns, max_tokens=0) == []
    ctx = PlanContext(entities={"abc123": ("ABC123", 3), "paris": ("Paris", 1)},
                      recent=["user: My reservation is ABC123."])
    plan = RulesPlanner(load_config().query.planner).plan("Is it still valid?", None, ctx).plan
    assert "ABC123" in plan.routes[0].entities
    assert any("ABC123" in t for t in plan.routes[0].search_texts)


def test_identifiers_are_whole_lexical_terms():
    assert identifier_terms("Mail jo.smith@example.com about FQ8APE and gift_card_8190333, flight HAT136.") == [
        "jo.smith@example.com", "fq8ape", "gift_card_8190333", "hat136"]
    docs = ["reservation FQ8APE for jo.smith@example.com", "reservation FQ8APX", "user jo_smith_42 paid"]
    idx = BM25Index(docs, ["turn"] * 3, ["a", "b", "c"], 1.2, 0.75)
    assert [h.id for h in idx.search("jo.smith@example.com", 3)][0] == "a"
    assert [h.id for h in idx.search("FQ8APE", 3)] == ["a"]
    assert [h.id for h in idx.search("jo_smith_42", 3)][0] == "c"


def test_questions_derived_from_tool_traffic():
    qs = derive_questions(agent_conversation(), QuestionLimits(lookup_per_result=4, per_kind=4, max_answer_occurrences=3),
                          locomo_normalize)
    kinds = {q.category for q in qs}
    assert kinds == {"lookup", "change", "failure"}
    for q in qs:
        assert q.answer and q.answer.lower() not in q.question.lower()
        assert q.evidence
    failure = next(q for q in qs if q.category == "failure")
    assert failure.answer == "refunds need a supervisor" and failure.evidence == ["m10"]
    change = next(q for q in qs if q.category == "change")
    assert change.answer == "ABC123" and change.evidence == ["m5", "m6"]
    assert any(q.answer == "jo.smith@example.com" for q in qs if q.category == "lookup")


def test_tool_call_signature_keeps_values_verbatim():
    c = ToolCall(call_id="x", name="book", arguments='{"flights": [{"n": "HAT1"}], "user_id": "jo_1"}')
    assert c.signature() == 'book(flights=[{"n":"HAT1"}], user_id=jo_1)'
    assert ToolCall(call_id="y", name="f", arguments="not json").signature() == "f(not json)"


def test_a_reused_call_id_links_each_result_to_its_own_call():
    turns = [
        {"turn_id": "m1", "role": "user", "content": "Show me reservations AAA111 and BBB222."},
        {"turn_id": "m2", "role": "assistant", "content": "", "tool_calls": [_call("same", "get_reservation", {"id": "AAA111"})]},
        {"turn_id": "m3", "role": "tool", "tool_call_id": "same", "content": json.dumps({"id": "AAA111", "cabin": "business"})},
        {"turn_id": "m4", "role": "assistant", "content": "", "tool_calls": [_call("same", "get_reservation", {"id": "BBB222"})]},
        {"turn_id": "m5", "role": "tool", "tool_call_id": "same", "content": json.dumps({"id": "BBB222", "cabin": "economy"})},
    ]
    conv = Conversation.model_validate({"conversation_id": "r", "sessions": [{"session_id": "s", "turns": turns}]})
    facts = [r.text for r in _rules_records(conv) if r.type == "fact"]
    assert any("id=AAA111" in t and "business" in t for t in facts)
    assert any("id=BBB222" in t and "economy" in t for t in facts)
    assert not any("id=AAA111" in t and "BBB222" in t for t in facts)


def test_a_long_tool_output_does_not_split_its_exchange_below_the_cap():
    big = json.dumps([{"flight": f"HAT{i:03d}", "price": i, "status": "available"} for i in range(80)])  # ~1,600 tokens
    conv = agent_conversation()
    turns = [t.model_dump() for *_, t in conv.iter_turns()]
    turns[3]["content"] = big
    conv = Conversation.model_validate({"conversation_id": "big", "user_id": "u", "sessions": [
        {"session_id": "s1", "started_at": "2024-05-15T15:00:00", "turns": turns}]})
    cfg = SegmenterConfig()
    inputs = conversation_turn_inputs(conv, _vectors(conv))
    assert inputs[3].tokens < cfg.max_segment_tokens
    segs = segment_stream(inputs, cfg).segments
    owner = {t: s.segment_index for s in segs for t in s.turn_ids}
    assert owner["m2"] == owner["m3"] == owner["m4"]  # request, call and its long result stay together
