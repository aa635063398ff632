"""Slots of stated values by meaning, and their links (ingest/value_slots.py, ingest/supersede.py):
the newer value of a slot replaces the older ones, a restatement, a plan or a question replaces
nothing, one message does not update itself, an assistant's echo never replaces what the person
said, subjects that mean the same thing share a slot and others do not. Sentences written for the test."""

from __future__ import annotations

import asyncio

import numpy as np

from lychee_ray.config import load_config
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import MemoryRecord
from lychee_ray.ingest.value_slots import ValueSlots

CFG = load_config(env={}).encoder.currency
# subject phrases that mean the same thing get near vectors; every other phrase its own direction
_NEAR = {"grocery budget": 0, "monthly grocery budget": 0, "food budget": 0, "rent": 1, "gym membership": 2,
         "laps": 3}


async def _embed(texts):
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, t in enumerate(texts):
        out[i, _NEAR.get(t, next((d for k, d in _NEAR.items() if k in t), 10 + sum(map(ord, t)) % 50))] = 1.0
    return out


def _rec(i: int, text: str, turn: str | None = None) -> MemoryRecord:
    return MemoryRecord(record_id=f"r{i}", conversation_id="c", user_id="u", session_id="s", segment_id="c#s1",
                        ordinal=i, type="fact", text=text, source_turn_ids=[turn or f"t{i}"],
                        created_at="2024-05-01", backend="rules", model="rules-v1")


def _link(slots: ValueSlots, r: MemoryRecord, assistant: bool = False, owner: str = "user") -> QualityCounts:
    q = QualityCounts()
    slots.parse(r, owner, assistant)
    asyncio.run(slots.prepare([r], _embed))
    slots.link(r, owner, assistant, q)
    return q


def test_a_newer_value_of_a_slot_replaces_the_older_ones_and_a_restatement_replaces_nothing():
    slots = ValueSlots(CFG)
    old = _rec(0, "Our grocery budget is $600 a month.")
    again = _rec(1, "The food budget is $600, as always.")
    _link(slots, old), _link(slots, again)
    assert old.statements[0].slot == again.statements[0].slot == "user · grocery budget"
    assert not again.supersedes  # the same value said again
    new = _rec(2, "We raised the monthly grocery budget to $750.")
    q = _link(slots, new)
    assert new.supersedes == ["r0", "r1"] and new.statements[0].supersedes == ["r0#0", "r1#0"]
    assert new.slot == "user · grocery budget" and new.slot_value == "$750" and q.links == {"supersedes": 2}
    rent = _rec(3, "The rent is $750 too.")
    _link(slots, rent)
    assert rent.slot == "user · rent" and not rent.supersedes  # another subject: another slot


def test_plans_questions_and_one_message_replace_nothing():
    slots = ValueSlots(CFG)
    _link(slots, _rec(0, "I swim 30 pool laps on Mondays."))
    goal = _rec(1, "I want to swim 50 pool laps by June.")
    asked = _rec(2, "Should I swim 60 pool laps?")
    for r in (goal, asked):
        _link(slots, r)
        assert r.statements[0].slot == "user · swim pool laps" and not r.supersedes
    assert [st.modality for st in (goal.statements[0], asked.statements[0])] == ["plan", "question"]
    same_turn = _rec(3, "Last week I swam 35 pool laps.", turn="t0")  # the first message's own turn: two values,
    _link(slots, same_turn)                                         # two slots
    assert not same_turn.supersedes and same_turn.statements[0].slot not in (None, goal.statements[0].slot)
    recap = _rec(5, "I swim 45 pool laps on Mondays.")  # another figure said plainly: no change said
    _link(slots, recap)
    assert not recap.supersedes
    later = _rec(4, "Now I swim 40 pool laps on Mondays.")
    _link(slots, later)
    assert later.supersedes == ["r0", "r5"]  # what held, not the goal or the question


def test_an_assistants_other_value_never_replaces_what_the_person_said():
    slots = ValueSlots(CFG)
    mine = _rec(0, "My gym membership is $45.")
    _link(slots, mine)
    wrong = _rec(1, "Assistant said: With the gym membership at $54, you can afford the classes.")
    _link(slots, wrong, assistant=True)
    assert wrong.statements[0].slot == "user · gym membership" and not wrong.supersedes
    echo = _rec(2, "Assistant said: The gym membership of $45 fits your budget.")
    _link(slots, echo, assistant=True)
    assert not echo.supersedes
    new = _rec(3, "The gym membership went up to $49.")
    _link(slots, new)
    assert new.supersedes == ["r0", "r2"]  # the person's value and the assistant's echo of it


def test_a_value_only_an_assistant_stated_is_replaced_by_the_person():
    slots = ValueSlots(CFG)
    quoted = _rec(0, "Assistant said: Your gym membership is $39 on the student plan.")
    _link(slots, quoted, assistant=True)
    mine = _rec(1, "My gym membership is $45 now that I graduated.")
    _link(slots, mine)
    assert mine.supersedes == ["r0"]


def test_slots_are_each_owners_and_survive_a_replay():
    slots = ValueSlots(CFG)
    a, b = _rec(0, "My rent is $900."), _rec(1, "My rent is $1,100.")
    _link(slots, a, owner="maya"), _link(slots, b, owner="theo")
    assert a.slot == "maya · rent" and b.slot == "theo · rent" and not b.supersedes
    replayed = ValueSlots(CFG)
    replayed.absorb([a, b], lambda r: ("maya", False) if r.record_id == "r0" else ("theo", False))
    new = _rec(2, "My rent is $950 now.")
    _link(replayed, new, owner="maya")
    assert new.supersedes == ["r0"] and new.slot == "maya · rent"


def test_many_slots_of_other_subjects_leave_the_match_to_the_nearest():
    slots = ValueSlots(CFG)
    for i in range(150):
        _link(slots, _rec(i, f"The hike number {i} took {i + 2} hours."))
    _link(slots, _rec(500, "Our grocery budget is $600."))
    new = _rec(501, "Our food budget is $640 now.")
    _link(slots, new)
    assert new.supersedes == ["r500"]


def test_the_readme_example_current_value_first_older_statements_marked_and_history(tmp_path):
    """A user changes a shipping address and a rent; the assistant echoes the old rent. On the
    defaults (rules): the current value comes first, every older statement of it is marked (the
    assistant's echo too), and ``history`` by slot or subject shows the chain."""
    from lychee_ray.core.conversation import Conversation
    from lychee_ray.ingest.context import make_context
    from lychee_ray.memory import MemoryStore
    from tests.ingest.test_incremental import build
    from tests.reliability.test_bad_input import HashEmbedder

    said = [("u1", "user", "My shipping address is 12 Elm Street. My rent is 1,200 dollars a month."),
            ("a1", "assistant", "Noted: your rent is $1,200 a month. A $150 monthly saving for the bike works."),
            ("u2", "user", "I moved, my shipping address is now 48 Oak Avenue. The rent went up to 1,450 dollars."),
            ("a2", "assistant", "Updated, thanks.")]
    turns = [{"turn_id": t, "role": r, "content": c} for t, r, c in said]
    conv = Conversation.model_validate({"conversation_id": "moving", "user_id": "u", "sessions": [
        {"session_id": "s1", "started_at": "2024-03-01T10:00:00", "turns": turns[:2]},
        {"session_id": "s2", "started_at": "2024-04-10T10:00:00", "turns": turns[2:]}]})
    cfg = load_config(env={})
    assert build(make_context(cfg, "rules", HashEmbedder()), tmp_path, conv).built == 1
    with MemoryStore.open(tmp_path, cfg, embedder=HashEmbedder(), llm="rules") as store:
        res = store.search("moving", "What is my shipping address?", budget_tokens=1500)
        by_slot = store.history("moving", slot="user · shipping address")
        rent = store.history("moving", subject="rent")
        rent_q = store.search("moving", "How much is my rent?", budget_tokens=1500)
    first = res.evidence[0]
    assert "48 Oak Avenue" in first.text and first.status == "current", res.context
    old = [e for e in res.evidence if "12 Elm Street" in e.text and "48 Oak" not in e.text]
    assert old and all(e.status == "superseded" for e in old), res.context
    assert [(e.value, e.status) for e in by_slot.entries] == [("12 elm street", "superseded"), ("48 oak avenue", "current")]
    assert [e.status for e in rent.entries][-1] == "current" and "1,450" in rent.entries[-1].text
    assert {"u1", "a1"} <= {t for e in rent.entries if e.status == "superseded" for t in e.source_turn_ids}
    echo = [line for line in rent_q.context.splitlines() if "$1,200" in line]
    assert echo and all("superseded" in line for line in echo), rent_q.context
