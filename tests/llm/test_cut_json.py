"""The complete parts of a cut JSON reply (lychee_ray/llm/cut_json.py) and the records salvaged from
them (lychee_ray/ingest/encode/salvage.py)."""

from __future__ import annotations

import json

from lychee_ray.ingest.encode.salvage import salvage_cut_reply, salvage_note
from lychee_ray.llm.cut_json import read_cut_object

REPLY = {
    "records": [
        {"type": "fact", "text": "Anna adopted a dog named Max.", "entities": ["Anna", "Max"], "source_turns": [0]},
        {"type": "event", "text": "Anna moved to Paris in May 2023.", "entities": ["Anna", "Paris"], "source_turns": [1]},
        {"type": "preference", "text": "Anna likes jazz.", "entities": ["Anna"], "source_turns": [2]},
    ],
    "resolution_state": "I = Anna",
}
TEXT = json.dumps(REPLY)


def test_every_prefix_keeps_exactly_the_records_that_ended_before_the_cut():
    ends = [TEXT.index(json.dumps(r)) + len(json.dumps(r)) for r in REPLY["records"]]
    state_end = TEXT.index('"I = Anna"') + len('"I = Anna"')
    for n in range(len(TEXT) + 1):
        cut = read_cut_object(TEXT[:n], "records")
        whole = sum(e <= n for e in ends)
        assert cut.items == REPLY["records"][:whole], n  # a cut record is never completed
        assert cut.array_closed == (n > TEXT.index("]", ends[-1]))
        assert cut.members == ({"resolution_state": "I = Anna"} if n >= state_end else {}), n


def test_the_record_the_cut_falls_in_is_dropped_not_closed():
    text = TEXT[: TEXT.index("Paris")]  # ... "text": "Anna moved to
    cut = read_cut_object(text, "records")
    assert [r["text"] for r in cut.items] == ["Anna adopted a dog named Max."]


def test_members_before_the_array_a_leading_fence_and_a_number_at_the_cut():
    text = '```json\n{"resolution_state": "I = Bo", "n": 3, "records": [{"type": "fact", "text": "Bo sings."}, {"ty'
    cut = read_cut_object(text, "records")
    assert cut.members == {"resolution_state": "I = Bo", "n": 3} and len(cut.items) == 1 and not cut.array_closed
    assert read_cut_object('{"n": 12', "records").members == {}  # 12 may be the start of 123
    assert read_cut_object('{"records": [1, 2', "records").items == [1]
    assert read_cut_object("not json", "records").items == [] and read_cut_object("", "records").items == []


def test_salvage_validates_each_complete_record_and_says_what_was_kept():
    bad = {"type": "fact"}  # no text: not a record draft
    text = json.dumps({"records": [REPLY["records"][0], bad, REPLY["records"][1]]})[:-30]
    s = salvage_cut_reply(text)
    assert [d.text for d in s.output.records] == ["Anna adopted a dog named Max."]
    assert (s.invalid, s.complete, s.output.resolution_state) == (1, False, "")
    note = salvage_note(s, 1, 64)
    assert note.kind == "truncated"
    assert note.message.startswith("salvaged: reply cut at max_completion_tokens=64")
    assert "1 complete record(s) kept, 1 invalid dropped" in note.message
    whole = salvage_cut_reply(TEXT)
    assert whole.complete and whole.output.resolution_state == "I = Anna" and len(whole.output.records) == 3
    assert "no record lost" in salvage_note(whole, 1, 64).message
