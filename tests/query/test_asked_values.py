"""The value a question asks for, marked across its context (query/asked_values.py): a count said
again later by the user with another number marks the lines that show the older one, with no link
between them in the store; what is no statement of it (another thing counted, a plan, the
assistant's figure, the same figure) is not marked, and nor is a question about a course over time."""

from __future__ import annotations

import pytest

from lychee_ray.config import load_config
from lychee_ray.core.conversation import Conversation
from lychee_ray.ingest.context import make_context
from lychee_ray.memory import MemoryStore
from lychee_ray.query.asked_values import asked_value
from tests.ingest.test_incremental import build
from tests.reliability.test_bad_input import HashEmbedder

CFG = load_config(env={})
UNLINKED = load_config(sets=["encoder.currency.text_cues=false"], env={})  # a store without links: the question alone marks


def test_what_a_question_asks_for():
    a = asked_value("How many interviews have I secured for executive producer roles?")
    assert a is not None and a.kinds == {"num"} and a.counted == {"interview"}  # a count, not money
    assert {"secur", "executiv", "producer"} <= a.terms
    q = asked_value("What is the daily call quota for the API key?")
    assert q is not None and q.goal and "num" in q.kinds
    assert asked_value("How much did the flight cost me?").kinds == {"num", "money"}  # type: ignore[union-attr]
    p = asked_value("What is the test coverage percentage for my API integration module?")
    assert p is not None and p.percent and p.kinds == {"num"}
    assert asked_value("What is the average response time of the dashboard API?").duration  # type: ignore[union-attr]
    for none in ("Have I worked with Flask routes?",  # yes/no: a contradiction's question, not a value's
                 "How many sources did my library have before?",  # history
                 "How much did my accuracy improve between the two quizzes?",  # a course over time
                 "How many problems have I completed in total across all sessions?",
                 "What did Caroline do after the race?"):  # no kind of value asked
        assert asked_value(none) is None, none


def _chat(cid: str, said: list[tuple[str, str, str]], dates: tuple[str, str]) -> Conversation:
    turns = [{"turn_id": t, "role": r, "content": c} for t, r, c in said]
    half = len(turns) // 2
    return Conversation.model_validate({"conversation_id": cid, "user_id": "u", "sessions": [
        {"session_id": "s1", "started_at": dates[0], "turns": turns[:half]},
        {"session_id": "s2", "started_at": dates[1], "turns": turns[half:]}]})


def _marked_in(tmp_path, cid: str, said: list[tuple[str, str, str]], question: str,
               dates: tuple[str, str] = ("2024-02-01T10:00:00", "2024-02-15T10:00:00")):
    """Build ``said`` without write-time links (only the question can mark) and search it."""
    conv = _chat(cid, said, dates)
    assert build(make_context(UNLINKED, "rules", HashEmbedder()), tmp_path, conv).built == 1
    with MemoryStore.open(tmp_path, CFG, embedder=HashEmbedder(), llm="rules") as s:
        return s.search(cid, question, budget_tokens=1500)


INTERVIEWS = [
    ("u1", "user", "I'm kinda worried that I only secured 3 interviews for executive producer roles this week, is that good?"),
    ("a1", "assistant", "Securing 3 interviews for executive producer roles in a week is a positive sign. Aim for 10 interviews a month."),
    ("u2", "user", "I also watched 3 documentaries about producers on the weekend."),
    ("a2", "assistant", "Documentaries are a good way to learn the trade."),
    ("u3", "user", "How can I leverage the fact that I secured 5 interviews to further improve my resume?"),
    ("a3", "assistant", "With 5 interviews you can ask each recruiter what stood out in your resume."),
    ("u4", "user", "I read 4 books on resume writing last month."),
    ("a4", "assistant", "Reading helps, keep going."),
]


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    root = tmp_path_factory.mktemp("asked")
    conv = _chat("chat-interviews", INTERVIEWS, ("2024-04-25T10:00:00", "2024-05-02T10:00:00"))
    assert build(make_context(CFG, "rules", HashEmbedder()), root, conv).built == 1
    with MemoryStore.open(root, CFG, embedder=HashEmbedder(), llm="rules") as s:
        yield s


def _lines(res, needle: str) -> list[str]:
    return [x for x in res.context.splitlines() if needle in x]


def test_an_older_count_is_marked_against_the_users_newest(store):
    res = store.search("chat-interviews", "How many interviews have I secured for executive producer roles?",
                       budget_tokens=1500)
    old = _lines(res, "secured 3 interviews") + _lines(res, "Securing 3 interviews")
    assert old, res.context
    for line in old:
        assert line.endswith("[older value; later (2024-05-02): 5 interviews]"), line
    assert not any("[" in x for x in _lines(res, "secured 5 interviews"))  # the newest itself
    assert not any("[" in x for x in _lines(res, "3 documentaries"))  # another thing counted
    marked = [e for e in res.evidence if "3 interviews" in e.text]
    assert marked and all(e.status == "superseded" and e.valid_until for e in marked)
    assert all(e.status == "current" for e in res.evidence if "5 interviews" in e.text and "3 interviews" not in e.text)


def test_no_marks_when_off_or_asked_about_the_course(store):
    off = load_config(sets=["query.current.asked_values=false"], env={})
    with MemoryStore.open(store.root, off, embedder=HashEmbedder(), llm="rules") as s:
        res = s.search("chat-interviews", "How many interviews have I secured for executive producer roles?",
                       budget_tokens=1500)
    assert "[older value" not in res.context and all(e.status == "current" for e in res.evidence)
    res = store.search("chat-interviews", "How many more interviews did I secure between the two weeks?",
                       budget_tokens=1500)
    assert "[older value" not in res.context


def test_the_assistants_figure_never_holds_now(store):
    """The assistant's "10 interviews a month" (a goal it set) comes after the user's 3 but replaces
    nothing: only what the user said is what holds now."""
    res = store.search("chat-interviews", "How many interviews do I have for executive producer roles?", budget_tokens=1500)
    assert not any("later (2024-04-25)" in x for x in res.context.splitlines()), res.context


def test_a_bare_number_a_change_governs_counts_what_the_question_counts(tmp_path):
    said = [("u1", "user", "My repository has 150 commits merged into the main branch after the release."),
            ("a1", "assistant", "Nice work on the release."),
            ("u2", "user", "The number of commits merged into the main branch has now reached 165 after the fixes."),
            ("a2", "assistant", "Keep the history clean.")]
    res = _marked_in(tmp_path, "chat-commits", said, "How many commits have been merged into the main branch?",
                     ("2024-04-20T10:00:00", "2024-05-02T10:00:00"))
    old = _lines(res, "150 commits")
    assert old and all(x.endswith("[older value; later (2024-05-02): 165]") for x in old), res.context


ZOTERO = [
    ("u1", "user", "I just downloaded Zotero on March 2 to manage my references, how do I organize citations?"),
    ("a1", "assistant", "Create collections per chapter and tag each reference."),
    ("u2", "user", "Can you help me use Zotero with Word later?"),
    ("a2", "assistant", "Install the Word plugin from the Zotero site."),
    ("u3", "user", "I've never used any citation management software like Zotero, so how do I start with citations?"),
    ("a3", "assistant", "Start by choosing a tool such as Zotero or Mendeley."),
    ("u4", "user", "I baked bread on Sunday."),
    ("a4", "assistant", "Sounds tasty."),
    ("u5", "user", "Today I used Zotero with the Word plugin for my citations, it works."),
    ("a5", "assistant", "Great."),
]


def test_a_yes_no_question_marks_the_denial_and_what_says_it_happened(tmp_path):
    from lychee_ray.query.asked_conflicts import asked_event

    assert asked_event("Have I ever downloaded or used Zotero?") is not None
    assert asked_event("How many sources are in my Zotero library?") is None
    conv = _chat("chat-zotero", ZOTERO, ("2024-03-02T10:00:00", "2024-03-20T10:00:00"))
    assert build(make_context(CFG, "rules", HashEmbedder()), tmp_path, conv).built == 1
    with MemoryStore.open(tmp_path, CFG, embedder=HashEmbedder(), llm="rules") as s:
        res = s.search("chat-zotero", "Have I ever downloaded or used Zotero or any citation management software?",
                       budget_tokens=1500)
        other = s.search("chat-zotero", "What should I use for citations?", budget_tokens=1500)
    denied = [x for x in res.context.splitlines() if x.startswith("user: I've never used any citation")]
    done = [x for x in res.context.splitlines() if x.startswith("user: I just downloaded Zotero")]
    assert denied and done, res.context
    assert all(x.endswith("[conflicts with: I just downloaded Zotero on March 2 to manage my … (2024-03-02)]")
               for x in denied), denied
    assert all("[conflicts with: I've never used any citation" in x for x in done), done
    # a request is no statement that it happened, the assistant's words are not the user's
    assert not any("[" in x for x in res.context.splitlines() if "help me use Zotero" in x or x.startswith("assistant:"))
    assert {e.status for e in res.evidence if "never used any citation" in e.text} == {"conflicting"}
    # said after the denial: the user started using it, no contradiction
    later = [x for x in res.context.splitlines() if x.startswith("user: Today I used Zotero")]
    assert later and not any("[" in x for x in later), res.context
    assert "[conflicts with" not in other.context  # not a yes/no question


def test_the_users_newest_figure_joins_the_pool_beside_an_older_one(store):
    """A pool that holds only the older count gets the user's newest statement of it, at the
    older one's relevance; a pool with no statement of the value asked for is left alone."""
    from lychee_ray.query.asked_values import ASKED_CHANNEL, bring_newest
    from lychee_ray.query.fuse import FusedItem, ItemKey

    view, _ = store.cache.get("chat-interviews")
    asked = asked_value("How many interviews have I secured for executive producer roles?")
    cur = CFG.query.current
    old = FusedItem(key=ItemKey("chat-interviews", "turn", "u1"), score=0.5, routes={0})
    pool, rel = bring_newest([old], [0.5], {"chat-interviews": view}, asked, cur)
    new = ItemKey("chat-interviews", "turn", "u3")
    assert [it.key for it in pool] == [old.key, new] and rel == [0.5, 0.5]
    assert pool[1].channels == {ASKED_CHANNEL} and pool[1].routes == {0}
    other = FusedItem(key=ItemKey("chat-interviews", "turn", "u4"), score=0.5)
    assert bring_newest([other], [0.5], {"chat-interviews": view}, asked, cur)[0] == [other]


def test_an_attempt_says_the_user_works_with_it_a_request_does_not():
    from lychee_ray.text.change_cues import says_done

    said = "I'm trying to set up a new project using Bootstrap 5.3.0 for the layout."
    assert says_done(said, "Bootstrap", attempts=True) and not says_done(said, "Bootstrap")
    assert not says_done("Can you help me set up Bootstrap?", "Bootstrap", attempts=True)
    assert not says_done("I want to use Bootstrap next month.", "Bootstrap", attempts=True)
    for plan in ("I think I'll start with coin toss problems.", "I've been looking into Bootstrap components.",
                 "I'm exploring Bootstrap for the gallery."):
        assert not says_done(plan, "problems" if "coin" in plan else "Bootstrap", attempts=True), plan


MISSED = [
    ("u1", "user", "I have scheduled 3 writing sessions and 2 meetings for my essay this month."),
    ("a1", "assistant", "A steady schedule helps."),
    ("u2", "user", "I had to miss my morning writing session due to a meeting at the studio."),
    ("a2", "assistant", "An evening session can make up for it."),
    ("u3", "user", "I've never missed any scheduled writing sessions or meetings related to my essay, how do I keep it up?"),
    ("a3", "assistant", "Keep the calendar reminders on."),
    ("u4", "user", "I bought a new desk lamp."),
    ("a4", "assistant", "Good light helps."),
]


def test_a_statement_saying_the_denied_verb_is_the_first_conflict(tmp_path):
    """Of the statements before a denial, the one saying the denied verb happened ("I had to miss my
    writing session" against "never missed") is marked before one holding more of the question's
    words without it ("I have scheduled 3 writing sessions and 2 meetings for my essay")."""
    conv = _chat("chat-missed", MISSED, ("2024-04-01T10:00:00", "2024-04-20T10:00:00"))
    one = load_config(sets=["query.current.conflict_statements=1"], env={})
    assert build(make_context(one, "rules", HashEmbedder()), tmp_path, conv).built == 1
    q = "Have I ever missed any of my scheduled writing sessions or meetings related to my essay?"
    with MemoryStore.open(tmp_path, one, embedder=HashEmbedder(), llm="rules") as s:
        res = s.search("chat-missed", q, budget_tokens=1500)
    missed = _lines(res, "user: I had to miss my morning")
    scheduled = _lines(res, "user: I have scheduled 3 writing sessions")
    assert missed and scheduled, res.context
    assert all("[conflicts with: I've never missed any scheduled" in x for x in missed), missed
    assert not any("[" in x for x in scheduled), scheduled
    assert all("[conflicts with: I had to miss my morning writing" in x for x in _lines(res, "user: I've never missed")), res.context


def test_a_time_is_replaced_only_by_one_a_change_word_moves(tmp_path):
    """"What time …": the meeting rescheduled later in the chat marks the first time; another
    meeting's date near the same words does not replace it (no change word moves it)."""
    said = [("u1", "user", "I have a Zoom meeting with Professor Danielle on March 22 at 3 PM to review my draft."),
            ("a1", "assistant", "Prepare three questions for the review."),
            ("u2", "user", "My Zoom meeting with the writing group is on March 25 at 5 PM to review chapters."),
            ("a2", "assistant", "Good luck with the group."),
            ("u3", "user", "I'm worried about missing the Zoom meeting with Professor Danielle, so remind me it's rescheduled to March 22 at 4:30 PM."),
            ("a3", "assistant", "Noted: 4:30 PM on March 22."),
            ("u4", "user", "I bought a new lamp."),
            ("a4", "assistant", "Nice.")]
    res = _marked_in(tmp_path, "chat-moved", said,
                     "What time should I join the Zoom meeting with Professor Danielle to review my draft?",
                     ("2024-03-10T10:00:00", "2024-03-15T10:00:00"))
    first = [x for x in res.context.splitlines() if "on March 22 at 3 PM" in x and x.startswith("user:")]
    assert first and all(x.endswith("[older value; later (2024-03-15): march 22 at 4:30 pm]") for x in first), res.context
    assert not any("[older value" in x for x in res.context.splitlines() if "writing group" in x)


def test_a_line_of_the_same_turn_saying_the_same_figure_takes_its_mark(store):
    """A record that kept the old figure but lost the question's words ("User has only 3 interviews so far")
    is marked like the line of its turn that says what the 3 are."""
    import dataclasses

    from lychee_ray.query.asked_values import asked_value_marks
    from lychee_ray.query.evidence import Evidence
    from lychee_ray.query.fuse import ItemKey

    view, _ = store.cache.get("chat-interviews")
    rid = next(r for r, src in zip(view.record_ids, view.record_turns, strict=True) if src == [view.turn_pos["u1"]])
    texts = list(view.record_text)
    texts[view.record_pos[rid]] = "User has only 3 interviews so far and worries."
    view = dataclasses.replace(view, record_text=texts)

    def unit(kind: str, uid: str, turns: list[str]) -> Evidence:
        return Evidence(key=ItemKey("chat-interviews", "record" if kind == "record" else "turn", uid), kind=kind,
                        conversation_id="chat-interviews", id=uid, text="", type=kind, time=None, session_date=None,
                        turn_ids=turns, score=1.0, channels=[], routes=[])

    units = [unit("turns", "u1", ["u1"]), unit("record", rid, ["u1"]), unit("turns", "u3", ["u3"])]
    asked = asked_value("How many interviews have I secured for executive producer roles?")
    marks = asked_value_marks(units, {"chat-interviews": view}, asked, CFG.query.current)
    assert marks[0] == marks[1] == ["[older value; later (2024-05-02): 5 interviews]"] and marks[2] == [""]
    assert [u.status for u in units] == ["superseded", "superseded", "current"]


def test_what_a_question_counts_its_kind_its_role_and_its_given_count():
    a = asked_value("How many conditional probability problems have I been practicing to improve my accuracy?")
    assert a is not None and a.head == "problem" and a.qualifiers == {"conditional", "probability"}
    assert not a.percent  # "how many … to improve my accuracy" asks a count, not a rate
    assert asked_value("How many classification problems have I completed, and what accuracy rate have I kept?").percent  # type: ignore[union-attr]
    w = asked_value("How many women have I highlighted as mentees in my portfolio?")
    assert w is not None and w.head == "women" and w.counted_as == {"ment"}
    g = asked_value("What is my accuracy percentage in area problems after completing 15 problems?")
    assert g is not None and g.given == {("problem", "15")}


def test_a_count_of_the_noun_counted_needs_its_kind_in_its_sentence(tmp_path):
    """"12 conditional probability problems" replaces "after completing 8 problems" said of
    conditional probability problems; "15 problems" of permutations counts another thing."""
    said = [("u1", "user", "My accuracy in conditional probability problems improved to 85% after completing 8 problems."),
            ("a1", "assistant", "Good progress."),
            ("u2", "user", "I practiced permutations today and did 15 problems with my tutor."),
            ("a2", "assistant", "Nice."),
            ("u3", "user", "I've recently increased my practice to 12 conditional probability problems each week."),
            ("a3", "assistant", "Keep it up."),
            ("u4", "user", "I bought a new lamp."),
            ("a4", "assistant", "Nice.")]
    res = _marked_in(tmp_path, "chat-kind", said,
                     "How many conditional probability problems have I been practicing to improve my accuracy?")
    old = _lines(res, "after completing 8 problems")
    assert old and all(x.endswith("[older value; later (2024-02-15): 12 conditional probability problems]")
                       for x in old), res.context
    assert not any("[" in x for x in _lines(res, "15 problems")), res.context


def test_a_count_said_as_the_role_the_question_names_replaces_one_of_the_noun(tmp_path):
    """"How many women … as mentees": "the number of mentees … has increased to 7, how can I …"
    (a bare 7: the comma ends the figure) replaces "those 5 women"."""
    from lychee_ray.text.change_cues import value_mentions

    assert value_mentions("has increased to 7, how can I", 4) == []
    said = [("u1", "user", "I feel proud of mentoring those 5 women in Caribbean media, I highlighted them in my portfolio."),
            ("a1", "assistant", "That shows leadership."),
            ("u2", "user", "I noticed the number of mentees in my portfolio has increased to 7, how can I highlight this?"),
            ("a2", "assistant", "Add a mentoring section."),
            ("u3", "user", "I bought a new lamp."),
            ("a3", "assistant", "Nice.")]
    res = _marked_in(tmp_path, "chat-role", said, "How many women have I highlighted as mentees in my portfolio?")
    old = _lines(res, "user: I feel proud of mentoring those 5 women")
    assert old and all(x.endswith("[older value; later (2024-02-01): 7]") for x in old), res.context


def test_the_count_a_question_gives_is_the_state_it_asks_about(tmp_path):
    """"… after completing 15 problems": the line giving 15 problems is never older, a later recap of
    12 problems is no newer state, and the start of a change ("from 70% to 90%") is no value now."""
    said = [("u1", "user", "My accuracy in area calculation problems went from 70% to 90% after completing 12 problems."),
            ("a1", "assistant", "Well done."),
            ("u2", "user", "I've already completed 15 problems with 95% accuracy in area calculation."),
            ("a2", "assistant", "Great."),
            ("u3", "user", "Looking back, my accuracy in area calculation problems has gone from 70% to 90% after 12 problems."),
            ("a3", "assistant", "Yes."),
            ("u4", "user", "I bought a new lamp."),
            ("a4", "assistant", "Nice.")]
    res = _marked_in(tmp_path, "chat-given", said,
                     "What is my accuracy percentage in solving area calculation problems after completing 15 problems?")
    given = _lines(res, "completed 15 problems with 95%")
    assert given and not any("[" in x for x in given), res.context
    first = _lines(res, "went from 70% to 90% after completing 12")
    assert first and all(x.endswith("[older value; later (2024-02-01): 95%]") for x in first), res.context


def test_a_frame_word_the_question_names_counts_in_a_denial_the_place_of_the_chat_does_not(tmp_path):
    """"… with Michael on any projects": "never worked with my child Michael on any projects" denies
    it (two of the question's words, one a chat frame word the question names) and the earlier
    "collaborating with my child Michael on some projects" contradicts it; "in my project" is where
    the chat happens: a statement sharing only it with the question is no statement of the thing."""
    from lychee_ray.query.asked_conflicts import asked_event

    assert asked_event("Have I used Bootstrap components in my project before?").terms == {"bootstrap", "component", "used"}  # type: ignore[union-attr]
    said = [("u1", "user", "I've been collaborating with my child Michael, a video editor, on some projects this year."),
            ("a1", "assistant", "That sounds rewarding."),
            ("u2", "user", "I set up my project folder with Michael's old laptop."),
            ("a2", "assistant", "Fine."),
            ("u3", "user", "I've never worked with my child Michael on any projects, can you give me tips to start?"),
            ("a3", "assistant", "Agree on roles first."),
            ("u4", "user", "I bought a new lamp."),
            ("a4", "assistant", "Nice.")]
    res = _marked_in(tmp_path, "chat-michael", said, "Have I ever collaborated remotely with Michael on any projects?",
                     ("2024-01-10T10:00:00", "2024-02-20T10:00:00"))
    done = _lines(res, "user: I've been collaborating with my child Michael")
    assert done and all("[conflicts with: I've never worked with my child Michael" in x for x in done), res.context
    assert all("[conflicts with: I've been collaborating" in x for x in _lines(res, "user: I've never worked with")), res.context
    assert not any("[" in x for x in _lines(res, "user: I set up my project folder")), res.context


def test_the_start_of_a_change_is_no_value_now(tmp_path):
    """"My accuracy went from 85% to 92%": 92 % holds now, the 85 % it started from does not —
    the earlier "80%" is marked against the 92 %."""
    said = [("u1", "user", "My accuracy in area calculation problems is 80% on the weekly quiz."),
            ("a1", "assistant", "Good."),
            ("u2", "user", "My accuracy in area calculation problems went from 85% to 92% on the weekly quiz."),
            ("a2", "assistant", "Great.")]
    res = _marked_in(tmp_path, "chat-from", said, "What is my accuracy percentage in area calculation problems?")
    first = _lines(res, "problems is 80% on the weekly quiz")
    assert first and all(x.endswith("[older value; later (2024-02-15): 92%]") for x in first), res.context
