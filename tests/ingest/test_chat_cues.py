"""Denials against the verb they deny (ingest/text_links.py, text/denials.py), and the marks stored
links give raw-turn lines on the query path (query/marks.py): a turn line a replaced or contradicted
statement came from is marked like the statement, another line repeating the replaced value beside
a word of its sentence too, what still holds is not."""

from __future__ import annotations

import asyncio

import numpy as np

import pytest

from lychee_ray.config import load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import MemoryRecord
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.text_links import StatementIndex
from lychee_ray.memory import MemoryStore
from tests.ingest.test_incremental import build
from tests.reliability.test_bad_input import HashEmbedder

CFG = load_config(env={})


# a long paragraph of other things, so that the turn it ends is searched by passages
ROOMS = " ".join(f"The {w} room of my flat has a {c} wall and a wooden shelf." for w, c in
                 [("north", "green"), ("south", "blue"), ("east", "white"), ("west", "grey"), ("small", "red"),
                  ("guest", "yellow"), ("back", "pink"), ("front", "brown"), ("upper", "black"), ("lower", "beige")])


def _build_with_passages(root, cid: str, turns: list[dict]):
    """Build a chat of two sessions (two turns each) with small passages; returns its config."""
    from lychee_ray.ingest.runner import run_local_build_items
    from lychee_ray.io.adapters import AdapterItem

    cfg = load_config(sets=["passages.max_tokens=40"], env={})
    conv = Conversation.model_validate({"conversation_id": cid, "user_id": "u", "sessions": [
        {"session_id": "s1", "started_at": "2024-04-10T10:00:00", "turns": turns[:2]},
        {"session_id": "s2", "started_at": "2024-05-02T10:00:00", "turns": turns[2:]}]})
    s = run_local_build_items(cfg, [AdapterItem(file="mem", line=0, conversation=conv)], root, backend="rules",
                              ctx=make_context(cfg, "rules", HashEmbedder()))
    assert s.built == 1, s.errors
    return cfg


def _sources_and_walls(root, cid: str, turns: list[dict]) -> list:
    """Build ``turns`` with small passages and ask for the sources (the replaced value) and for a
    wall colour (what the long turn's other passages hold)."""
    cfg = _build_with_passages(root, cid, turns)
    with MemoryStore.open(root, cfg, embedder=HashEmbedder(), llm="rules") as store:
        return [store.search(cid, q, budget_tokens=1500) for q in
                ("How many sources does my Zotero library have?", "What colour is the wall of the guest room?")]


def _said(ordinal: int, text: str, turn: str | None = None) -> MemoryRecord:
    return MemoryRecord(record_id=f"r{ordinal}", conversation_id="c", user_id="u", session_id="s", segment_id="c#s1",
                        ordinal=ordinal, type="fact", text=text, source_turn_ids=[turn or f"t{ordinal}"],
                        created_at="2024-05-01", backend="rules", model="rules-v1")


def _index() -> StatementIndex:
    return StatementIndex(CFG.encoder.currency)


def _indexed(*said: str) -> tuple[StatementIndex, QualityCounts]:
    """An index holding ``said`` as the user's statements r0, r1, ... (turns t0, t1, ...)."""
    idx = _index()
    for i, text in enumerate(said):
        idx.add(_said(i, text), "user")
    return idx, QualityCounts()


def test_a_denial_conflicts_with_the_statement_nearest_in_meaning():
    """Of the statements sharing the denied words, the one that means the denied thing happened (or
    is being done) conflicts; a question or a plan says nothing happened; two denials agree."""
    near = {"written any Rust macros for the tide tracker app": 0, "wrote": 0, "trying to write": 0,
            "reviewed": 1, "tide tracker app, honestly": 0}

    async def embed(texts):
        out = np.zeros((len(texts), 8), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, next((d for k, d in near.items() if k in t), 7)] = 1.0
        return out

    idx, q = _indexed(
        "I reviewed Rust macro tutorials for the tide tracker app.",
        "Can you help me write Rust macros for the tide tracker app?",
        "I'm trying to write Rust macros for the tide tracker app today.",
    )

    def link(r):
        asyncio.run(idx.prepare([(r, "user")], embed))
        idx.link(r, "user", q)

    never = _said(10, "I've never written any Rust macros for the tide tracker app.")
    link(never)
    assert never.conflicts_with == ["r2"]  # an attempt is working with it; a review is not; a question says nothing
    again = _said(11, "I have never written any Rust macros for the tide tracker app, honestly.")
    link(again)
    assert again.conflicts_with == ["r2"]  # never with the denial before it: two denials agree
    asked = _said(12, "Could you show me how to write Rust macros for the tide tracker app?")
    link(asked)
    assert not asked.conflicts_with and q.links == {"conflicts": 2}
    did = _said(13, "Yesterday I wrote two Rust macros for the tide tracker app.")
    link(did)
    assert did.conflicts_with == ["r11"]  # it says happened what the latest denial denied


# -- the query path: a raw-turn line a replaced or contradicted statement came from ---------------
def _chat() -> Conversation:
    said = [
        ("u0", "user", "I submitted my grant proposal to Ines for review on April 10."),
        ("a0", "assistant", "Good luck, feedback usually takes a few days."),
        ("u1", "user", "My Zotero library now has 45 sources tagged by theme."),
        ("a1", "assistant", "Tags by theme make retrieval quicker. Export them like this:\n"
                            "```python\nlibrary.export(tags=['theme'], fmt='bibtex')\n```"),
        ("u2", "user", "I bought a standing desk for my home office."),
        ("a2", "assistant", "A standing desk helps on long writing days."),
        ("u3", "user", "My Zotero library now has 52 sources tagged by theme after this week."),
        ("a3", "assistant", "That is a solid base for the essay."),
        ("u4", "user", "I have never submitted my grant proposal to Ines for review."),
        ("a4", "assistant", "You could send it to him this week."),
    ]
    turns = [{"turn_id": t, "role": r, "content": c} for t, r, c in said]
    return Conversation.model_validate({"conversation_id": "chat-marks", "user_id": "u", "sessions": [
        {"session_id": "s1", "started_at": "2024-04-10T10:00:00", "turns": turns[:6]},
        {"session_id": "s2", "started_at": "2024-05-02T10:00:00", "turns": turns[6:]}]})


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    out = tmp_path_factory.mktemp("chat-marks")
    s = build(make_context(CFG, "rules", HashEmbedder()), out, _chat())
    assert s.built == 1, s.errors
    return out


def _search(root, question: str, **sets):
    cfg = load_config(sets=[f"{k}={v}" for k, v in sets.items()], env={})
    with MemoryStore.open(root, cfg, embedder=HashEmbedder(), llm="rules") as store:
        return store.search("chat-marks", question, budget_tokens=1500)


def _turn_lines(res, turn: str, said: str) -> list[tuple[str, str]]:
    """(status, line) of every raw-turn unit showing ``turn``, whose line starts with ``said``."""
    lines = [x for x in res.context.splitlines() if x.startswith(said)]
    return [(e.status, line) for e in res.evidence if e.kind != "record" and turn in e.source_turn_ids for line in lines]


def test_a_turn_line_that_states_a_replaced_value_is_marked_and_what_holds_is_not(root):
    question = "How many sources are in my Zotero library?"
    res = _search(root, question)
    old = _turn_lines(res, "u1", "user: My Zotero library now has 45")
    assert old, res.context
    for status, line in old:
        assert status == "superseded" and "[superseded on 2024-05-02 by:" in line and "52 sources" in line.split("[")[-1]
    new = _turn_lines(res, "u3", "user: My Zotero library now has 52")
    assert new and all("[" not in line for _, line in new)
    answers = [e for e in res.evidence if e.kind == "record" and e.source_turn_ids == ["u1", "a1"]]
    assert answers, res.context  # the advice given for the old value says so
    for e in answers:
        line = next(x for x in res.context.splitlines() if x.startswith("- " + e.text[:30]))
        assert e.status == "superseded" and "[answers a statement superseded on 2024-05-02 by:" in line
    desk = _turn_lines(res, "u2", "user: I bought a standing desk")
    assert desk and all("[" not in line for _, line in desk)  # still holds, though its window is marked
    off = _search(root, question, **{"query.current.mark_stated_turns": "false"})
    assert all("[superseded" not in line for _, line in _turn_lines(off, "u1", "user: My Zotero library now has 45"))


def test_turn_lines_of_contradicting_statements_are_marked_conflicting(root):
    res = _search(root, "Have I submitted my grant proposal to Ines?")
    first = _turn_lines(res, "u0", "user: I submitted my grant proposal")
    second = _turn_lines(res, "u4", "user: I have never submitted")
    assert first and second, res.context
    assert "[conflicts with: User has never submitted" in first[0][1]
    assert "[conflicts with: User submitted" in second[0][1]
    units = [e for e in res.evidence if e.kind != "record" and {"u0", "u4"} & set(e.source_turn_ids)]
    assert units and all(e.status in ("conflicting", "superseded") for e in units)



def test_only_the_passage_that_holds_the_replaced_statement_is_marked(tmp_path):
    """A long turn is shown by its passages: the one stating the replaced value takes the mark, the
    other passages of the same turn (what still holds) do not."""
    long_turn = f"My Zotero library now has 45 sources tagged by theme and date.\n\n{ROOMS}"
    turns = [{"turn_id": "u1", "role": "user", "content": long_turn},
             {"turn_id": "a1", "role": "assistant", "content": "Both will help on long writing days."},
             {"turn_id": "u2", "role": "user", "content": "My Zotero library now has 52 sources tagged by theme and date."},
             {"turn_id": "a2", "role": "assistant", "content": "A solid base for the essay."}]
    res = _sources_and_walls(tmp_path, "chat-long", turns)
    parts = [(e, r.context) for r in res for e in r.evidence if e.kind == "passage"]
    assert {"45 sources" in e.text for e, _ in parts} == {True, False}, [e.text for e, _ in parts]
    for e, context in parts:
        head = e.text.partition(": ")[2][:30]
        line = next(x for x in context.splitlines() if head in x)
        if "45 sources" in e.text:
            assert e.status == "superseded" and "[superseded on 2024-05-02 by:" in line
        else:
            assert e.status == "current" and "[superseded" not in line


def test_a_line_restating_a_replaced_plain_value_is_marked_beside_a_word_of_its_slot(tmp_path):
    """Another message that repeats the replaced value ("45 sources" in the assistant's reply) shows
    it too and is marked; "45 sources" beside none of the slot's words (another thing counted) is not."""
    said = [("u1", "user", "My Zotero library now has 45 sources tagged by theme."),
            ("a1", "assistant", "With 45 sources in your Zotero library you can start the outline."),
            ("u2", "user", "A survey paper I read lists 45 sources on urban heat."),
            ("a2", "assistant", "Survey papers are a good start."),
            ("u3", "user", "My Zotero library now has 52 sources tagged by theme after this week."),
            ("a3", "assistant", "That is a solid base for the essay.")]
    turns = [{"turn_id": t, "role": r, "content": c} for t, r, c in said]
    conv = Conversation.model_validate({"conversation_id": "chat-restated", "user_id": "u", "sessions": [
        {"session_id": "s1", "started_at": "2024-04-10T10:00:00", "turns": turns[:4]},
        {"session_id": "s2", "started_at": "2024-05-02T10:00:00", "turns": turns[4:]}]})
    assert build(make_context(CFG, "rules", HashEmbedder()), tmp_path, conv).built == 1
    with MemoryStore.open(tmp_path, CFG, embedder=HashEmbedder(), llm="rules") as store:
        res = store.search("chat-restated", "How many sources are in my Zotero library?", budget_tokens=1500)
    restated = _turn_lines(res, "a1", "assistant: With 45 sources")
    assert restated, res.context
    for status, line in restated:
        assert status == "superseded" and "superseded on 2024-05-02 by:" in line and "52 sources" in line
    other = _turn_lines(res, "u2", "user: A survey paper I read lists 45 sources")
    assert other and all("[" not in line for _, line in other)
    assert all("[" not in line for _, line in _turn_lines(res, "u3", "user: My Zotero library now has 52"))


def test_a_passage_is_marked_by_its_own_text_not_by_the_turns_shown_around_it(tmp_path):
    """A long answer is shown by passages with the short turns around them: the passage repeating
    the replaced value is marked; another passage of it is not, though the question before it (shown
    in the same unit) holds the value too."""
    answer = f"With 45 sources in your Zotero library you can start the outline now.\n\n{ROOMS}"
    turns = [{"turn_id": "u1", "role": "user", "content": "My Zotero library now has 45 sources tagged by theme."},
             {"turn_id": "a1", "role": "assistant", "content": answer},
             {"turn_id": "u2", "role": "user", "content": "My Zotero library now has 52 sources tagged by theme."},
             {"turn_id": "a2", "role": "assistant", "content": "A solid base for the essay."}]
    res = _sources_and_walls(tmp_path, "chat-parts", turns)
    lines = {x for r in res for x in r.context.splitlines() if x.startswith("assistant (part")}
    assert any("45 sources" in x for x in lines) and any("45 sources" not in x for x in lines), lines
    for x in lines:
        assert ("superseded on 2024-05-02" in x) == ("45 sources in your" in x), x
