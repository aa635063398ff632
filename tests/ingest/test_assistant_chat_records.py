"""Records that follow what matters in an assistant chat (both backends): the user's statements out
of their questions, assistant answers condensed, one artifact record per code block / table / drafted
document, perspective rewritten in narrative text only, near-duplicates folded with their sources.
Synthetic fixtures written here (no benchmark text)."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

from lychee_ray.config import load_config
from lychee_ray.core.tools import ToolCall
from lychee_ray.ingest.encode.base import EncodeOutput, EncodeRequest, RecordDraft, SegmentTurn, TimeDraft
from lychee_ray.ingest.encode.checked import encode_checked
from lychee_ray.ingest.encode.dedup import fold_near_duplicates, near_duplicates
from lychee_ray.ingest.encode.guard import ConversationMemory, RecordGuard
from lychee_ray.ingest.encode.openai import ASSISTANT_RULES, OpenAIEncoder, build_messages
from lychee_ray.ingest.encode.rules import RulesEncoder
from lychee_ray.ingest.encode.rules.blocks import split_blocks
from lychee_ray.ingest.encode.rules.requests import split_requests
from lychee_ray.llm.backend import make_llm_client
from lychee_ray.llm.schema import schema_for
from lychee_ray.query.answer import RulesAnswerer
from lychee_ray.query.evidence import Evidence
from lychee_ray.testing import OpenAIServer
from lychee_ray.testing.fake_llm import prompt_text
from lychee_ray.text.time.normalise import make_resolver
from tests.reliability.test_llm_faults import llm_sets

DATE = "2024-03-15T10:00:00"

CODE_ANSWER = """Sure! Here is how you can set up your database.

### Step 1: Create the model
Define your table like this:

```python
import sqlite3

DB_PATH = "sqlite:///my_budget_tracker.db"

class Transaction:
    def __init__(self, amount):
        self.amount = amount

def add_transaction(conn, amount):
    conn.execute("INSERT INTO transactions (amount) VALUES (?)", (amount,))
    conn.commit()  # I always commit here so you never lose data
```

This keeps your data safe and uses non-blocking I/O when you need it.
"""

LETTER_ANSWER = """Here's a sample cover letter you can adapt:

---

Dear Ms. Rivera,

I am eager to bring my extensive experience in documentary production to Harbor Films. Over 12 years I
led a team of 15 people and grew viewership by 35%.

Sincerely,
Dana Okafor

---

Let me know if you want to adjust the tone."""

WILL_ANSWER = """Here is a simple draft of the will you asked for:

---

Last Will and Testament

I, Crystal Moreno, hereby declare this to be my last will. I leave my house on 4 Elm Road to my son Leo.

---

Please have it reviewed by a lawyer."""


# A long answer (over encoder.rules.assistant.condense_min_chars of prose): condensed into one record.
LONG_ANSWER = "Great question! Here is a plan that works for most people in your situation.\n\n" + "\n\n".join(
    f"### {i}. {head}\nSpend some quiet time on this part every single day and keep short notes about what you learn, so "
    "that you can look back at them later and see how far you have come since the start of the whole plan."
    for i, head in enumerate(["List what you know", "Write each step down", "Check every result twice",
                              "Compare the outcome with a friend", "Review your notes weekly"], 1))


def chat(*turns: tuple[str, str], date: str = DATE) -> EncodeRequest:
    ts = [SegmentTurn(index=i, turn_id=f"m{i}", session_id="s1", session_date=date, speaker=role, role=role, content=c)
          for i, (role, c) in enumerate(turns)]
    return EncodeRequest(conversation_id="c1", user_id="u1", segment_id="c1#s00000", segment_index=0, turns=ts,
                         speakers=["user", "assistant"])


def rules(req: EncodeRequest) -> list[RecordDraft]:
    return RulesEncoder().encode_sync(req).records


def by_turn(records: list[RecordDraft], i: int) -> list[RecordDraft]:
    """The records citing only turn ``i`` (an answer record cites the question's turn too)."""
    return [r for r in records if r.source_turns == [i]]


# -------------------------------------------------------------------------------------------------
# rules backend
# -------------------------------------------------------------------------------------------------


def test_code_block_is_one_artifact_record_with_identifiers_verbatim():
    recs = rules(chat(("user", "How should I store my transactions?"), ("assistant", CODE_ANSWER)))
    code = [r for r in recs if r.artifact == "code"]
    assert len(code) == 1, [r.text for r in recs]
    text = code[0].text
    assert text.startswith("The assistant wrote Python code for the user")
    for ident in ("Transaction", "add_transaction()", "sqlite3", "'sqlite:///my_budget_tracker.db'"):
        assert ident in text
    assert code[0].type == "event" and code[0].source_turns == [1]
    # nothing inside the code is rewritten or becomes a record of its own
    joined = " ".join(r.text for r in recs)
    assert "User's_budget" not in joined and "self.amount = amount" not in joined and "conn.commit" not in joined
    # the answer itself is condensed into one record, not one per sentence
    assistant_records = [r for r in recs if 1 in r.source_turns]
    assert len(assistant_records) == 2
    answer = next(r for r in assistant_records if r.artifact is None)
    assert "Create the model" in answer.text and answer.source_turns == [0, 1]


def test_perspective_is_rewritten_in_narrative_text_only():
    turns = ("user", "I moved my app to sqlite:///my_budget.db and I think non-blocking I/O helps me. "
                     'My motto is "I never give up" and I keep it on my desk.')
    texts = [r.text for r in rules(chat(turns, ("assistant", "Nice.")))]
    joined = " ".join(texts)
    assert "sqlite:///my_budget.db" in joined and "non-blocking I/O" in joined and '"I never give up"' in joined
    assert "User/O" not in joined and "User moved User's app" in joined


def test_drafted_letter_is_recorded_as_drafted_for_the_user():
    recs = rules(chat(("user", "Can you write a cover letter for my application to Harbor Films?"),
                      ("assistant", LETTER_ANSWER)))
    docs = [r for r in recs if r.artifact == "document"]
    assert len(docs) == 1
    text = docs[0].text
    assert text.startswith("The assistant drafted a cover letter for the user, addressed to Ms. Rivera")
    for specific in ("Harbor Films", "12 years", "15", "35%", "Dana Okafor"):
        assert specific in text
    joined = " ".join(r.text for r in recs)
    assert "Assistant is eager" not in joined and "the assistant's extensive experience" not in joined.lower()


def test_drafted_will_is_not_the_assistants_declaration():
    recs = rules(chat(("user", "Please draft a simple will for me."), ("assistant", WILL_ANSWER)))
    docs = [r for r in recs if r.artifact == "document"]
    assert len(docs) == 1 and docs[0].text.startswith("The assistant drafted a will for the user")
    assert "Crystal Moreno" in docs[0].text and "Assistant, Crystal" not in " ".join(r.text for r in recs)


def test_table_is_one_artifact_record():
    table = "Here is your plan:\n\n| Day | Task | Hours |\n|---|---|---|\n| Monday | Outline | 2 |\n| Tuesday | Draft | 3 |\n"
    recs = rules(chat(("user", "Plan my week please."), ("assistant", table)))
    tables = [r for r in recs if r.artifact == "table"]
    assert len(tables) == 1 and "Day | Task | Hours" in tables[0].text and "Monday | Outline | 2" in tables[0].text


def test_user_update_inside_a_question_is_its_own_record():
    recs = rules(chat(("user", "I secured 5 interviews — how can I prepare for them?"), ("assistant", LONG_ANSWER)))
    user = by_turn(recs, 0)
    statement = [r for r in user if "secured 5 interviews" in r.text]
    assert len(statement) == 1 and "?" not in statement[0].text and "prepare" not in statement[0].text
    assert all(r.type not in ("fact", "preference") for r in user if "?" in r.text)
    answer = [r for r in recs if 1 in r.source_turns]
    assert len(answer) == 1 and answer[0].source_turns == [0, 1] and "secured 5 interviews" in answer[0].text


def test_pure_question_is_no_fact_or_preference():
    recs = rules(chat(("user", "How do I calculate the probability of rolling two sixes with my dice?"),
                      ("assistant", LONG_ANSWER)))
    user = by_turn(recs, 0)
    assert user and all(r.type not in ("fact", "preference") for r in user)


def test_statements_split_out_of_a_long_request():
    text = split_requests("I'm thinking of joining the mixer on May 10, Laura recommended it, can you help me "
                          "figure out what to expect, I met her on set in 2019?", set())
    assert text == ("I'm thinking of joining the mixer on May 10, Laura recommended it. I met her on set in 2019. "
                    "Can you help me figure out what to expect?")
    # a relative clause is not a question; a sentence that asks nothing stays whole
    same = "I'm reaching out to Leslie, who I met at the festival in 2004, for advice."
    assert split_requests(same, set()) == same


def test_short_assistant_turns_keep_sentence_records():
    recs = rules(chat(("user", "Is the meeting on Friday?"), ("assistant", "Yes, the meeting is on Friday at 3 PM.")))
    assert any("3 PM" in r.text for r in recs)


def test_blocks_ignore_a_salutation_without_a_closing():
    blocks = split_blocks('Open with a line such as:\n\nDear hiring team, I admire your work.\n\nThen add detail.')
    assert [b.kind for b in blocks] == ["prose"]


def test_two_human_chat_is_untouched_by_the_assistant_rules():
    ts = [SegmentTurn(index=i, turn_id=f"D1:{i}", session_id="s1", session_date=DATE, speaker=sp, role="user", content=c)
          for i, (sp, c) in enumerate([("Ana", "I adopted a cat named Pixel. Can you believe it?"),
                                       ("Ben", "Wow, how is Pixel doing?")])]
    req = EncodeRequest(conversation_id="c", user_id="u", segment_id="c#s0", segment_index=0, turns=ts,
                        speakers=["Ana", "Ben"])
    texts = [r.text for r in RulesEncoder().encode_sync(req).records]
    assert "Ana adopted a cat named Pixel." in texts and not any(r.artifact for r in RulesEncoder().encode_sync(req).records)


# -------------------------------------------------------------------------------------------------
# the first hour's rough edges (rules-backend text)
# -------------------------------------------------------------------------------------------------


def _agent_request(*turns: SegmentTurn) -> EncodeRequest:
    return EncodeRequest(conversation_id="c", user_id="u7", segment_id="c#s0", segment_index=0, turns=list(turns),
                         speakers=["user", "assistant", "tool"])


def test_tool_names_keep_their_case():
    call = ToolCall(call_id="k1", name="get_order_details", arguments=json.dumps({"order_id": "#W123"}))
    req = _agent_request(
        SegmentTurn(index=0, turn_id="m0", session_id="s", session_date=DATE, speaker="user", role="user",
                    content="Where is my order #W123?"),
        SegmentTurn(index=1, turn_id="m1", session_id="s", session_date=DATE, speaker="assistant", role="assistant",
                    content="→ get_order_details(order_id=#W123)", tool_calls=[call]),
        SegmentTurn(index=2, turn_id="m2", session_id="s", session_date=DATE, speaker="tool", role="tool",
                    content='get_order_details result: {"status": "shipped"}', tool_call_id="k1",
                    tool_name="get_order_details"))
    texts = [r.text for r in RulesEncoder().encode_sync(req).records]
    assert any(t.startswith("get_order_details(order_id=#W123) returned") for t in texts), texts
    assert not any("Get_order_details" in t for t in texts)


def test_an_added_request_is_not_a_correction():
    req = _agent_request(
        SegmentTurn(index=0, turn_id="m0", session_id="s", session_date=DATE, speaker="assistant", role="assistant",
                    content="I have cancelled the tent order."),
        SegmentTurn(index=1, turn_id="m1", session_id="s", session_date=DATE, speaker="user", role="user",
                    content="Actually, I'd also like to return the sleeping bag."),
        SegmentTurn(index=2, turn_id="m2", session_id="s", session_date=DATE, speaker="assistant", role="assistant",
                    content="Sure."),
        SegmentTurn(index=3, turn_id="m3", session_id="s", session_date=DATE, speaker="user", role="user",
                    content="Actually, I meant the blue one, not the red one."))
    recs = RulesEncoder().encode_sync(req).records
    corrections = [r for r in recs if r.type == "failure_pattern"]
    assert len(corrections) == 1 and corrections[0].source_turns == [3]


def test_a_question_record_is_never_the_extractive_answer():
    ev = [Evidence(key=("record", 0), kind="record", conversation_id="c", id="r1",
                   text="Melanie asked: What did Caroline paint? Caroline answered: A sunset.", type="fact", time=None,
                   session_date=None, turn_ids=["D1:1"], score=1.0, channels=[], routes=[])]
    cfg = load_config(env={}).query.answer
    out = RulesAnswerer(cfg).answer("What did Caroline paint?", None, ev, "")
    assert out.answer == "Caroline answered: A sunset."


# -------------------------------------------------------------------------------------------------
# near-duplicates
# -------------------------------------------------------------------------------------------------


def _d(text: str, src: list[int], rtype: str = "fact", time: TimeDraft | None = None) -> RecordDraft:
    return RecordDraft(type=rtype, text=text, entities=[], topics=[], time=time, source_turns=src)


def test_near_duplicates_collapse_with_both_sources():
    a = _d("The user's project deadline is March 15 at the Lisbon office.", [0])
    b = _d("The user's project deadline is March 15 at the Lisbon office, as planned.", [2])
    kept, n = fold_near_duplicates([a, b], 0.8)
    assert n == 1 and len(kept) == 1 and kept[0].source_turns == [0, 2] and kept[0].text == a.text


def test_different_numbers_names_or_dates_never_collapse():
    a = _d("The team meeting with the design group is at 3 PM.", [0])
    assert not near_duplicates(a, _d("The team meeting with the design group is at 4 PM.", [2]), 0.5)
    assert not near_duplicates(a, _d("The team meeting with the Oslo design group is at 3 PM.", [2]), 0.5)
    t1, t2 = TimeDraft(start="2024-03-15", end="2024-03-15"), TimeDraft(start="2024-03-22", end="2024-03-22")
    assert not near_duplicates(_d("The user has a dentist visit.", [0], "event", t1),
                               _d("The user has a dentist visit.", [1], "event", t2), 0.5)
    assert not near_duplicates(a, _d("The team meeting with the design group is at 3 PM.", [1], "event"), 0.5)


def _checked(output: EncodeOutput, req: EncodeRequest, *sets: str):
    cfg = load_config(sets=list(sets), env={})

    class Scripted:
        backend, model, supports_repair = "openai", "scripted", False

        async def encode(self, request: EncodeRequest) -> Any:
            from lychee_ray.ingest.encode.base import EncodeResult
            return EncodeResult(output=output, model="scripted")

    return asyncio.run(encode_checked(Scripted(), req, RecordGuard(cfg.encoder.guard), ConversationMemory(),
                                      make_resolver(), cfg.encoder, 1))


def test_encode_step_folds_near_duplicates_and_counts_them():
    req = chat(("user", "My project deadline is March 15 at the Lisbon office."), ("assistant", "Noted."),
               ("user", "Again: my project deadline is March 15 at the Lisbon office."))
    out = EncodeOutput(records=[_d("The user's project deadline is March 15 at the Lisbon office.", [0]),
                                _d("Again, the user's project deadline is March 15 at the Lisbon office.", [2])])
    done = _checked(out, req)
    assert len(done.records) == 1 and done.records[0].source_turn_ids == ["m0", "m2"]
    q = done.quality
    assert q.rejected == {"merged_duplicate": 1} and q.drafts == q.records + q.rejected_total
    assert len(_checked(out, req, "encoder.dedup.enabled=false").records) == 2
    # an exact copy is a structural duplicate (counted so, with dedup on or off); its turns still become sources
    same = EncodeOutput(records=[out.records[0], out.records[0].model_copy(update={"source_turns": [2]})])
    for sets in ((), ("encoder.dedup.enabled=false",)):
        exact = _checked(same, req, *sets)
        assert exact.records[0].source_turn_ids == ["m0", "m2"] and exact.quality.rejected == {"duplicate_in_reply": 1}


# -------------------------------------------------------------------------------------------------
# openai backend: prompt, schema and validation against the scripted server
# -------------------------------------------------------------------------------------------------


def test_prompt_and_schema_say_the_same_rules():
    cfg = load_config(env={})
    msgs = build_messages(chat(("user", "I secured 5 interviews, how do I prepare?"), ("assistant", CODE_ANSWER)),
                          cfg.encoder, cfg.tokenizer)
    system = msgs[0]["content"]
    assert ASSISTANT_RULES in system
    for phrase in ("also when it\n  is said inside a question", "ONE record with\n  artifact set", "never inside code",
                   "drafted for the user", "a question alone is not a fact or preference"):
        assert phrase in system
    two_humans = EncodeRequest(conversation_id="c", user_id="u", segment_id="c#s0", segment_index=0, speakers=["A", "B"],
                               turns=[SegmentTurn(index=0, turn_id="1", session_id="s", session_date=DATE, speaker="A",
                                                  role="user", content="Hi B")])
    assert ASSISTANT_RULES not in build_messages(two_humans, cfg.encoder, cfg.tokenizer)[0]["content"]
    call = ToolCall(call_id="k1", name="get_user", arguments="{}")
    agent = chat(("user", "Find my booking."), ("assistant", "Let me look."))
    agent.turns[1].tool_calls = [call]
    assert ASSISTANT_RULES not in build_messages(agent, cfg.encoder, cfg.tokenizer)[0]["content"]
    schema, strict = schema_for(EncodeOutput)
    prop = schema["$defs"]["RecordDraft"]["properties"]["artifact"]
    assert strict and "code, table or document" in prop["description"]


def _reply(body: dict[str, Any]) -> dict[str, Any]:
    code = "The assistant wrote Python code for the user: class Transaction, add_transaction()"
    return {"records": [
        {"type": "fact", "text": "The user secured 5 interviews.", "entities": [], "topics": ["interviews"],
         "time": None, "source_turns": [0], "artifact": None},
        {"type": "event", "text": code + ".", "entities": ["Transaction"], "topics": ["code"], "time": None,
         "source_turns": [1], "artifact": "Code block"},
        {"type": "event", "text": code + ", as asked.", "entities": [], "topics": ["python"], "time": None,
         "source_turns": [1], "artifact": "code"},
        {"type": "fact", "text": "The user will prepare for the 5 interviews.", "entities": [], "topics": [],
         "time": None, "source_turns": [0], "artifact": "banana"},
    ], "resolution_state": "I = the user"}


@pytest.mark.parametrize("dedup", [True, False])
def test_openai_reply_is_validated_and_normalised(dedup):
    req = chat(("user", "I secured 5 interviews, how do I prepare for them?"), ("assistant", CODE_ANSWER))
    with OpenAIServer(handler=_reply) as srv:
        cfg = load_config(sets=[*llm_sets(srv.base_url), f"encoder.dedup.enabled={str(dedup).lower()}"], env={})
        enc = OpenAIEncoder(make_llm_client(cfg), cfg.encoder, cfg.tokenizer)
        done = asyncio.run(encode_checked(enc, req, RecordGuard(cfg.encoder.guard), ConversationMemory(),
                                          make_resolver(), cfg.encoder, 1))
        sent = srv.chat_requests()[0].body
    assert ASSISTANT_RULES in prompt_text(sent) and '"artifact"' in json.dumps(sent["response_format"])
    kinds = [r.artifact for r in done.records]
    # "Code block" is read as code, an unknown kind ("banana") as no artifact; the near-duplicate code
    # record folds into the first one when dedup is on
    assert kinds == ([None, "code", None] if dedup else [None, "code", "code", None])
    assert done.records[1].source_turn_ids == ["m1"] and "Transaction" in done.records[1].entities
    q = done.quality
    assert q.rejected == ({"merged_duplicate": 1} if dedup else {}) and q.drafts == q.records + q.rejected_total
