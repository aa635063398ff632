"""The artifact records an LLM reply left out are added from the turn's blocks (encoder.artifact_floor)."""

from __future__ import annotations

import asyncio

from lychee_ray.config import load_config
from lychee_ray.ingest.encode.base import EncodeOutput, EncodeRequest, EncodeResult, RecordDraft, SegmentTurn
from lychee_ray.ingest.encode.checked import encode_checked
from lychee_ray.ingest.encode.guard import ConversationMemory, RecordGuard
from lychee_ray.text.time.normalise import make_resolver
from tests.ingest.test_assistant_chat_records import CODE_ANSWER, LETTER_ANSWER, chat

TABLE_TURN = """Here are my numbers for the quarter:

| month | spend | budget |
|---|---|---|
| January | 1200 | 1500 |
| February | 1750 | 1500 |

Which month should I cut back in?"""


def _encode(req: EncodeRequest, records: list[RecordDraft], *sets: str, backend: str = "openai"):
    cfg = load_config(sets=list(sets), env={})

    class Scripted:
        model, supports_repair = "scripted", False

        async def encode(self, request: EncodeRequest) -> EncodeResult:
            return EncodeResult(output=EncodeOutput(records=records), model="scripted")

    Scripted.backend = backend
    return asyncio.run(encode_checked(Scripted(), req, RecordGuard(cfg.encoder.guard), ConversationMemory(),
                                      make_resolver(), cfg.encoder, 1))


def _prose_only(turn: int) -> RecordDraft:
    return RecordDraft(type="fact", text="The user is building a budget tracker with a SQLite database.",
                       entities=["SQLite"], source_turns=[turn])


def test_a_code_block_the_reply_left_out_gets_its_artifact_record():
    req = chat(("user", "I'm building a budget tracker, how do I store transactions in SQLite?"), ("assistant", CODE_ANSWER))
    done = _encode(req, [_prose_only(0)])
    arts = [r for r in done.records if r.artifact == "code"]
    assert len(arts) == 1 and arts[0].source_turn_ids == ["m1"]
    # what it is, for whom, its identifiers verbatim (not "User's_budget_tracker")
    assert "add_transaction" in arts[0].text and "sqlite:///my_budget_tracker.db" in arts[0].text
    assert "for the user" in arts[0].text
    q = done.quality
    assert q.repaired == {"artifacts_added": 1} and q.drafts == q.records + q.rejected_total == 2


def test_a_turn_the_reply_described_is_left_as_written():
    req = chat(("user", "How do I store transactions?"), ("assistant", CODE_ANSWER))
    mine = RecordDraft(type="fact", text="The assistant wrote Python code with a Transaction class and add_transaction.",
                       entities=["Transaction"], source_turns=[1], artifact="code")
    done = _encode(req, [mine])
    assert [r.text for r in done.records] == [mine.text] and done.quality.repaired == {}


def test_drafted_letter_and_a_users_table_are_added_and_the_switch_turns_it_off():
    req = chat(("user", TABLE_TURN), ("assistant", LETTER_ANSWER))
    asked = [RecordDraft(type="fact", text="The user asked which month of the quarter to cut back spending in.",
                         source_turns=[0])]
    done = _encode(req, asked)
    kinds = sorted((r.artifact, tuple(r.source_turn_ids)) for r in done.records if r.artifact)
    assert kinds == [("document", ("m1",)), ("table", ("m0",))]
    table = next(r for r in done.records if r.artifact == "table")
    assert "February" in table.text and "1750" in table.text and "with the assistant" in table.text
    off = _encode(req, asked, "encoder.artifact_floor=false")
    assert off.records and not any(r.artifact for r in off.records) and "artifacts_added" not in off.quality.repaired


def test_prose_chats_two_person_chats_and_the_rules_backend_get_nothing_added():
    prose = chat(("user", "How should I prepare for interviews?"), ("assistant", "Practise answers aloud every day."))
    assert "artifacts_added" not in _encode(prose, [_prose_only(0)]).quality.repaired
    people = EncodeRequest(conversation_id="c", user_id="u", segment_id="c#s0", segment_index=0, speakers=["Ann", "Bo"],
                           turns=[SegmentTurn(index=0, turn_id="t0", session_id="s", session_date=None, speaker="Ann",
                                              role="user", content=TABLE_TURN)])
    assert "artifacts_added" not in _encode(people, [_prose_only(0)]).quality.repaired
    code = chat(("user", "Store transactions?"), ("assistant", CODE_ANSWER))
    assert "artifacts_added" not in _encode(code, [_prose_only(0)], backend="rules").quality.repaired
