"""Links between chat statements from cues in the words (rules backend: ingest/text_links.py,
text/change_cues.py) and the marks they give raw-turn lines on the query path
(query/marks.py): a change said as chat users say it, a count said again with another number, what
is no change (a bound, a goal, a list said again, one message), a denial against the verb it denies,
and a turn line a replaced or contradicted statement came from marked like the statement."""

from __future__ import annotations

import pytest

from lychee_ray.config import load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import MemoryRecord
from lychee_ray.ingest.context import make_context
from lychee_ray.text.change_cues import (changed_values, counted_values, denied_verb, same_unit, says_done,
                                                         value_mentions)
from lychee_ray.ingest.text_links import StatementIndex
from lychee_ray.memory import MemoryStore
from tests.ingest.test_incremental import build
from tests.reliability.test_bad_input import HashEmbedder

CFG = load_config(env={})
W = CFG.encoder.currency.cue_window
GAP = CFG.encoder.currency.change_gap


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


def test_changes_as_chat_users_say_them():
    moved = changed_values("I worry that moving the Zoom call with the creative director to April 22 at 11 AM clashes.", W, GAP)
    assert [v.text for v in moved] == ["april 22 at 11 am"]
    assert {"zoom", "call", "director"} <= moved[0].context  # the object between verb and "to" says what moved
    assert [v.text for v in changed_values("I added two projects, so now I have a total of 10 cards.", W, GAP)] == ["10 cards"]
    assert [v.text for v in changed_values("I won't meet the new April 25 deadline for the draft.", W, GAP)] == ["april 25"]
    assert [v.text for v in changed_values("My final draft reached 4,700 words by May 13.", W, GAP)] == ["4,700 words"]
    assert changed_values("The meeting moved the whole team and many other people far away to 3 cities.", W, 4) == []  # gap


def test_what_is_no_value_or_no_value_to_replace():
    assert value_mentions("I use semantic HTML5 tags and the 4C2 formula.", W) == []  # numbers inside words
    under, = value_mentions("I'm targeting a response time of under 200ms for the API.", W)
    assert under.hedge == "bound"
    goal = [v for v in value_mentions("My deadline is May 5, to gather 15 peer-reviewed articles.", W) if v.kind == "num"]
    assert goal[0].hedge == "plan" and counted_values("My goal is to reach 20 interviews.", W)[0].hedge == "plan"
    assert [v.text for v in counted_values("I secured 5 interviews, at 78% and 250ms, for $30.", W)] == ["5 interviews"]
    assert same_unit("word per week", "word") and not same_unit("call per day", "call per minute")


def test_a_denial_is_checked_against_its_verb():
    assert denied_verb("User has never felt anxious about grammar after feedback.", "user") == "feel"
    assert says_done("I'm feeling kinda anxious about my grammar after the feedback.", "feel")
    assert says_done("I wrote two Flask routes today.", "write")
    assert not says_done("I reviewed Flask routing tutorials.", "write")
    assert not says_done("Can you help me write a Flask route?", "write")  # a question
    assert not says_done("I'm trying to submit my cover letter to Greg.", "submit")  # an attempt
    assert not says_done("I read the handbook before accepting the job offer.", "accept")
    assert not says_done("I prefer submitting applications early.", "submit")


def _said(ordinal: int, text: str, turn: str | None = None) -> MemoryRecord:
    return MemoryRecord(record_id=f"r{ordinal}", conversation_id="c", user_id="u", session_id="s", segment_id="c#s1",
                        ordinal=ordinal, type="fact", text=text, source_turn_ids=[turn or f"t{ordinal}"],
                        created_at="2024-05-01", backend="rules", model="rules-v1")


def _index() -> StatementIndex:
    return StatementIndex(CFG.encoder.currency.model_copy(update={"cue_min_statements": 1000}))


def _indexed(*said: str) -> tuple[StatementIndex, QualityCounts]:
    """An index holding ``said`` as the user's statements r0, r1, ... (turns t0, t1, ...)."""
    idx = _index()
    for i, text in enumerate(said):
        idx.add(_said(i, text), "user")
    return idx, QualityCounts()


def test_a_count_said_again_with_another_number_replaces_the_earlier_count():
    idx, q = _indexed(
        "I only secured 3 interviews for executive producer roles at Island studios this spring.",
        "My goal is to secure 10 interviews for executive producer roles at Island studios this spring.",
        "I use breakpoints at 320px, 768px and 1440px for the portfolio grid layout.",
        "The API response time is under 200ms for the portfolio dashboard page.",
    )
    again = _said(10, "I secured 5 interviews for executive producer roles at Island studios this spring.")
    idx.link(again, "user", q)
    assert again.supersedes == ["r0"] and again.slot_value == "5 interviews"  # not the goal
    assert again.slot is not None and again.slot == "user · executive island producer interviews"  # words as said
    listed = _said(11, "I use breakpoints at 768px, 320px and 1440px for the portfolio grid layout.")  # the list again
    idx.link(listed, "user", q)
    assert not listed.supersedes
    faster = _said(12, "The API response time for the portfolio dashboard page improved to 250ms.")
    idx.link(faster, "user", q)
    assert not faster.supersedes  # "under 200ms" was a bound, not a value
    weak = _said(13, "I secured 7 interviews at the festival.")  # too few words in common for a count
    idx.link(weak, "user", q)
    assert not weak.supersedes and q.links == {"supersedes": 1}


def test_a_duration_said_again_without_a_change_word_replaces_nothing():
    """"Daily for 15 minutes to manage stress" of breathing exercises after "daily for 10 minutes to
    manage stress" of a meditation app: a duration says too little of what it measures; said with a
    change word ("increased my meditation to 15 minutes") it does replace."""
    assert counted_values("I meditate daily for 15 minutes and 3 hours per week, with 5 interviews.", W)[0].text == "5 interviews"
    idx, q = _indexed("I have been using the meditation app Headspace daily for 10 minutes to manage stress during interview prep.")
    other = _said(10, "I have been using guided breathing exercises daily for 15 minutes to manage stress during my promotion.")
    idx.link(other, "user", q)
    assert not other.supersedes
    more = _said(11, "I increased my Headspace meditation daily to 15 minutes to manage stress during interview prep.")
    idx.link(more, "user", q)
    assert more.supersedes == ["r0"], more
    off = StatementIndex(CFG.encoder.currency.model_copy(update={"cue_min_statements": 1000, "count_min_shared": 0}))
    off.add(_said(0, "I only secured 3 interviews for executive producer roles at Island studios this spring."), "user")
    again = _said(10, "I secured 5 interviews for executive producer roles at Island studios this spring.")
    off.link(again, "user", QualityCounts())
    assert not again.supersedes


def test_a_time_moved_within_its_day_needs_fewer_shared_words():
    """"rescheduled to March 22 at 4:30 PM" after "March 22 at 3 PM": the day says which appointment it
    is, so one shared word will do (``same_day_min_shared``); another day, or no change word, needs more."""
    idx, q = _indexed("I have a Zoom meeting with Professor Danielle on March 22 at 3 PM to review my draft.",
                      "I have a dentist appointment on March 25 at 9 AM before my shift.")
    moved = _said(10, "I'm worried about missing it, so can you remind Danielle that it's rescheduled to March 22 "
                      "at 4:30 PM?")
    idx.link(moved, "user", q)
    assert moved.supersedes == ["r0"] and moved.slot_value == "march 22 at 4:30 pm"
    other_day = _said(11, "Can you remind Danielle that it's rescheduled to March 23 at 4:30 PM?")
    idx.link(other_day, "user", q)
    assert not other_day.supersedes  # another day: the usual number of shared words
    said_again = _said(12, "Danielle asked about March 22 at 5 PM for coffee.")
    idx.link(said_again, "user", q)
    assert not said_again.supersedes and q.links == {"supersedes": 1}  # no change word
    strict = StatementIndex(CFG.encoder.currency.model_copy(update={"cue_min_statements": 1000,
                                                                    "same_day_min_shared": 3}))
    strict.add(_said(0, "I have a Zoom meeting with Professor Danielle on March 22 at 3 PM to review my draft."), "user")
    again = _said(10, moved.text)
    strict.link(again, "user", QualityCounts())
    assert not again.supersedes


def test_one_message_does_not_update_itself():
    idx, q = _index(), QualityCounts()
    idx.add(_said(0, "My original essay version ran 400 words in my personal statement draft.", "t1"), "user")
    same = _said(1, "My reduced essay version now has 300 words in my personal statement draft.", "t1")
    idx.link(same, "user", q)
    assert not same.supersedes
    later = _said(2, "My reduced essay version now has 350 words in my personal statement draft.", "t2")
    idx.link(later, "user", q)
    assert later.supersedes == ["r1"]  # the best match of another message: the latest value


def test_a_denial_conflicts_only_with_a_statement_of_its_verb():
    idx, q = _indexed(
        "I reviewed Flask routes tutorials for the budget tracker app.",
        "Can you help me write Flask routes for the budget tracker app?",
        "I wrote two Flask routes for the budget tracker app yesterday.",
    )
    never = _said(10, "I've never written any Flask routes for the budget tracker app.")
    idx.link(never, "user", q)
    assert never.conflicts_with == ["r2"]
    again = _said(11, "I have never written any Flask routes for the budget tracker app, honestly.")
    idx.link(again, "user", q)
    assert again.conflicts_with == ["r2"]  # never with the denial before it: two denials agree
    asked = _said(12, "Could you show me how to write Flask routes for the budget tracker app?")
    idx.link(asked, "user", q)
    assert not asked.conflicts_with and q.links == {"conflicts": 2}


# -- the query path: a raw-turn line a replaced or contradicted statement came from ---------------
def _chat() -> Conversation:
    said = [
        ("u0", "user", "I submitted my cover letter to Greg for review on April 10."),
        ("a0", "assistant", "Good luck, feedback usually takes a few days."),
        ("u1", "user", "My Zotero library now has 45 sources tagged by theme."),
        ("a1", "assistant", "Tags by theme make retrieval quicker. Export them like this:\n"
                            "```python\nlibrary.export(tags=['theme'], fmt='bibtex')\n```"),
        ("u2", "user", "I bought a standing desk for my home office."),
        ("a2", "assistant", "A standing desk helps on long writing days."),
        ("u3", "user", "My Zotero library now has 52 sources tagged by theme after this week."),
        ("a3", "assistant", "That is a solid base for the essay."),
        ("u4", "user", "I have never submitted my cover letter to Greg for review."),
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
    res = _search(root, "Have I submitted my cover letter to Greg?")
    first = _turn_lines(res, "u0", "user: I submitted my cover letter")
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
        assert status == "superseded" and "[shows 45 sources, superseded on 2024-05-02 by:" in line
    other = _turn_lines(res, "u2", "user: A survey paper I read lists 45 sources")
    assert other and all("[" not in line for _, line in other)
    assert all("[" not in line for _, line in _turn_lines(res, "u3", "user: My Zotero library now has 52"))


def test_of_a_sentences_values_the_one_nearest_the_slot_words_is_the_replaced_one():
    from lychee_ray.text.change_cues import says_value, words_from_value
    from lychee_ray.text.lexical import lexical_terms

    said = "User has already spent 3 hours studying probability basics, including 2 hours on coin toss."
    slot = frozenset(lexical_terms("basics spent studying"))
    assert words_from_value(said, "3 hours", slot) == 0 and words_from_value(said, "2 hours", slot) == 1
    assert words_from_value(said, "5 hours", slot) is None and words_from_value("at 3 hours", "3 hours", slot) is None
    assert says_value("The call is at 3 p.m. on Friday", "3 pm") and not says_value("at 13 PM", "3 pm")
    assert says_value("due April 1, 2024.", "april 1, 2024") and not says_value("due April 10", "april 1")
    assert not says_value("costs 1,200.50 now", "1,200")


def test_a_date_with_its_year_is_shown_by_the_same_day_said_without_it():
    """A record cut after the day ("the deadline of April 1, …") or an ordinal shows the dated
    value; another year, another day or a figure after the day does not."""
    from lychee_ray.text.change_cues import says_day

    for shown in ("to meet the deadline of April 1, …: Must-Have", "the April 1st deadline", "due April 1, 2024."):
        assert says_day(shown, "april 1, 2024"), shown
    for other in ("due April 1, 2025", "due April 10", "April 1.5 sprints", "due May 1"):
        assert not says_day(other, "april 1, 2024"), other
    assert says_day("at 3 PM", "3 pm") and not says_day("at 13 PM", "3 pm")


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
        assert ("[shows 45 sources, superseded on 2024-05-02" in x) == ("45 sources in your" in x), x
