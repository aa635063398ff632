"""Online segmenter: planted topic shifts, the token cap, sessions, resumability, degenerate input.

Unit tests use synthetic unit vectors (no model); one test uses the shared MiniLM fixture.
"""

from __future__ import annotations

import json
import zlib

import numpy as np
import pytest

from lychee_ray.ingest.segment import (
    BaseSegmenter,
    FixedWindowSegmenter,
    OnlineSegmenter,
    Segment,
    TurnInput,
    TurnRef,
    build_exchanges,
    calibrated_surprise,
    content_words,
    is_question,
    lexical_novelty,
    make_segmenter,
    ramp,
    segment_conversation,
    segment_turn_inputs,
    segment_turns,
    split_text_by_tokens,
)
from lychee_ray.config import SegmenterConfig, load_config
from lychee_ray.core.conversation import Conversation, Session, Turn
from lychee_ray.text.tokens import count_tokens

DIM = 32


def _topic_vec(rng: np.random.Generator, topic: int, noise: float = 0.15) -> np.ndarray:
    base = np.zeros(DIM)
    base[topic % DIM] = 1.0
    return base + noise * rng.standard_normal(DIM) / np.sqrt(DIM)


def make_turns(
    topics: list[int],
    sessions: list[int] | None = None,
    roles: list[str] | None = None,
    tokens: list[int] | None = None,
    seed: int = 0,
    texts: list[str] | None = None,
) -> list[TurnInput]:
    """Synthetic turns: turn i talks about topics[i] (a basis direction plus noise); ``texts`` replaces
    the neutral default texts (for the surface cues)."""
    rng = np.random.default_rng(seed)
    sessions = sessions or [0] * len(topics)
    out, per_session = [], {}
    for i, topic in enumerate(topics):
        si = sessions[i]
        ti = per_session.get(si, 0)
        per_session[si] = ti + 1
        ref = TurnRef(session_index=si, turn_index=ti, turn_id=f"D{si}:{ti}", session_id=f"s{si}")
        out.append(
            TurnInput(
                ref,
                roles[i] if roles else "user",
                texts[i] if texts else f"turn {i} about {topic}",
                tokens[i] if tokens else 10,
                _topic_vec(rng, topic),
            )
        )
    return out


def cut_points(segments: list[Segment]) -> list[int]:
    """Stream positions (turn counts) where a new segment starts."""
    out, pos = [], 0
    for s in segments[:-1]:
        pos += s.num_turns
        out.append(pos)
    return out


def assert_covers(turns: list[TurnInput], segments: list[Segment]) -> None:
    """Every turn appears, in order, nothing twice (pieces of one turn stay adjacent)."""
    seen = [r.position for s in segments for r in s.turns]
    dedup = list(dict.fromkeys(seen))
    assert dedup == [t.ref.position for t in turns]
    assert [s.segment_index for s in segments] == list(range(len(segments)))


# ---- decisions -----------------------------------------------------------------------------


def test_planted_topic_shifts_are_cut_exactly():
    topics = [0] * 8 + [1] * 8 + [2] * 8 + [3] * 8
    turns = make_turns(topics)
    segs, decisions = segment_turn_inputs(turns, SegmenterConfig(), mode="turn")
    assert cut_points(segs) == [8, 16, 24]
    assert [s.reason for s in segs] == ["semantic", "semantic", "semantic", "end_of_stream"]
    assert_covers(turns, segs)
    # one decision per exchange plus the end-of-stream record; cuts carry their signals
    assert len(decisions) == len(turns) + 1
    cuts = [d for d in decisions if d.reason == "semantic"]
    assert [d.exchange_index for d in cuts] == [8, 16, 24]
    for d in cuts:
        assert d.cut and d.p is not None and d.p > 0.5 and d.surprise is not None and d.surprise > 0.5
    for d in decisions:
        if d.p is not None:
            assert 0.0 < d.p < 1.0
            assert d.cohesion_drop is not None and d.cohesion_drop >= 0
            assert d.length_pressure is not None and d.count_pressure is not None


def test_pair_and_role_modes_cut_between_exchanges():
    topics = [0] * 10 + [5] * 10 + [9] * 10
    segs, _ = segment_turn_inputs(make_turns(topics), SegmenterConfig(), mode="pair")
    assert cut_points(segs) == [10, 20]
    roles = ["user", "assistant"] * 15
    no_prior = SegmenterConfig(exchange_mode="auto", role_bias=0.0)
    segs, _ = segment_turn_inputs(make_turns(topics, roles=roles), no_prior)
    assert cut_points(segs) == [10, 20]


def test_role_prior_cuts_only_at_user_turns_and_is_traced():
    """role_bias favours a boundary at a user's new request; the topic shifts are still cut."""
    topics = [0] * 10 + [5] * 10 + [9] * 10
    roles = ["user", "agent"] * 15  # support-corpus spelling: "agent" answers like "assistant"
    turns = make_turns(topics, roles=roles)
    segs, decisions = segment_turn_inputs(turns, SegmenterConfig(exchange_mode="auto"))
    cuts = cut_points(segs)
    assert {10, 20} <= set(cuts) and all(c % 2 == 0 for c in cuts)  # only where the user speaks
    assert all(d.prior == SegmenterConfig().role_bias for d in decisions if d.p is not None)
    # turn mode has no user requests to favour: no prior, the planted shifts only
    segs, decisions = segment_turn_inputs(turns, SegmenterConfig(), mode="turn")
    assert cut_points(segs) == [10, 20] and all(d.prior == 0.0 for d in decisions if d.p is not None)
    # an exact repetition says nothing new: no prior, even in role mode
    same = make_turns([0] * 12, roles=roles[:12])
    for t in same:
        t.vector = same[0].vector.copy()
    segs, decisions = segment_turn_inputs(same, SegmenterConfig(center_embeddings=False))
    assert len(segs) == 1 and all(d.prior == 0.0 for d in decisions if d.p is not None)


def test_count_pressure_counts_turns_in_every_mode():
    """N_t is measured in turns, so a pair exchange (two turns) weighs twice a single turn."""
    turns = make_turns([0] * 12)
    _, by_turn = segment_turn_inputs(turns, SegmenterConfig(), mode="turn")
    _, by_pair = segment_turn_inputs(turns, SegmenterConfig(), mode="pair")
    cp = SegmenterConfig().count_pressure
    # the decision for the 3rd turn (turn mode) and for the 2nd pair both see 2 turns in the open segment
    assert by_turn[2].count_pressure == by_pair[1].count_pressure == ramp(2, cp)


def test_hard_cap_is_never_exceeded():
    rng = np.random.default_rng(3)
    n = 300
    topics = list(rng.integers(0, 3, size=n) // 1)
    tokens = list(rng.integers(1, 60, size=n))
    cfg = SegmenterConfig(max_segment_tokens=100)
    turns = make_turns([int(t) for t in topics], tokens=[int(t) for t in tokens])
    for mode in ("turn", "pair"):
        segs, decisions = segment_turn_inputs(turns, cfg, mode=mode)
        assert all(s.tokens <= 100 for s in segs)
        assert sum(s.tokens for s in segs) == sum(tokens)
        assert_covers(turns, segs)
        assert any(d.reason == "length_cap" for d in decisions)
    # same-topic turns never cut semantically under the fixed rule, so only the cap closes segments (the
    # stream threshold cuts the top rho of any stream's evidence: test_identical_turns_stay_together)
    same = make_turns([0] * 50, tokens=[30] * 50)
    only_cap = SegmenterConfig(max_segment_tokens=100, center_embeddings=False, count_pressure={"start": 0, "scale": 1, "max": 0},
                               calibration={"blend": 0.0})
    segs, _ = segment_turn_inputs(same, only_cap, mode="turn")
    assert [s.num_turns for s in segs] == [3] * 16 + [2]
    assert all(s.reason == "length_cap" for s in segs[:-1])


def test_session_boundaries_always_cut_and_exchanges_never_cross():
    topics = [0] * 15  # one topic throughout
    sessions = [0] * 5 + [1] * 5 + [2] * 5
    turns = make_turns(topics, sessions=sessions)
    never_semantic = SegmenterConfig(threshold=0.999)  # isolates the session rule
    for mode in ("turn", "pair", "role"):
        segs, decisions = segment_turn_inputs(turns, never_semantic, mode=mode)
        assert [s.session_index for s in segs] == [0, 1, 2]
        assert [s.reason for s in segs] == ["session_boundary", "session_boundary", "end_of_stream"]
        # with the defaults there may be semantic cuts too, but never a segment across sessions
        # and always a new segment at the first turn of each session
        segs, decisions = segment_turn_inputs(turns, SegmenterConfig(), mode=mode)
        for s in segs:
            assert {r.session_index for r in s.turns} == {s.session_index}
        firsts = {s.turns[0].position for s in segs}
        assert {(0, 0), (1, 0), (2, 0)} <= firsts
        assert sum(d.reason == "session_boundary" for d in decisions) == 2
    units = build_exchanges(turns, "pair")
    assert [len(u.turns) for u in units] == [2, 2, 1] * 3  # the odd turn closes its session alone


def test_exchange_building_modes():
    roles = ["user", "assistant", "assistant", "user", "assistant", "user", "user", "assistant"]
    turns = make_turns([0] * 8, roles=roles)
    assert [len(u.turns) for u in build_exchanges(turns, "role")] == [3, 2, 1, 2]
    assert [len(u.turns) for u in build_exchanges(turns, "auto")] == [3, 2, 1, 2]  # has assistant turns
    assert [len(u.turns) for u in build_exchanges(turns, "pair")] == [2, 2, 2, 2]
    assert [len(u.turns) for u in build_exchanges(turns, "turn")] == [1] * 8
    humans = make_turns([0] * 5)
    # all user: auto_without_roles decides (turn by default, pair on request); role units need an answering turn
    assert [len(u.turns) for u in build_exchanges(humans, "auto")] == [1] * 5
    assert [len(u.turns) for u in build_exchanges(humans, "auto", without_roles="pair")] == [2, 2, 1]
    assert SegmenterConfig().auto_without_roles == "turn"
    seg = make_segmenter(SegmenterConfig(auto_without_roles="pair"))
    seg.push_turns(humans)
    assert seg.mode == "pair"
    # a session that starts with an assistant turn
    lead = make_turns([0] * 3, roles=["assistant", "user", "assistant"])
    assert [len(u.turns) for u in build_exchanges(lead, "role")] == [1, 2]


def test_exchange_vector_is_normalised_mean_of_turn_vectors():
    turns = make_turns([0, 1], roles=["user", "assistant"])
    (unit,) = build_exchanges(turns, "role")
    a = turns[0].vector / np.linalg.norm(turns[0].vector)
    b = turns[1].vector / np.linalg.norm(turns[1].vector)
    expect = (a + b) / np.linalg.norm(a + b)
    assert np.allclose(unit.vector, expect)
    assert np.linalg.norm(unit.vector) == pytest.approx(1.0)


# ---- resumability --------------------------------------------------------------------------


def _run(seg: BaseSegmenter, turns: list[TurnInput], splits: list[int]) -> tuple[list[Segment], list]:
    closed: list[Segment] = []
    decisions: list = []
    bounds = [0, *splits, len(turns)]
    for a, b in zip(bounds, bounds[1:]):
        closed += seg.push_turns(turns[a:b])
        if b != len(turns):
            state = json.loads(json.dumps(seg.state_dict()))  # through real JSON text
            decisions += seg.decisions
            seg = BaseSegmenter.from_state(state)
    closed += seg.finish()
    decisions += seg.decisions
    return closed, decisions


@pytest.mark.parametrize("method", ["semantic", "fixed"])
def test_save_restore_gives_identical_decisions(method):
    rng = np.random.default_rng(11)
    n = 160
    topics = [int(t) for t in np.repeat(rng.integers(0, 6, size=n // 4), 4)]
    sessions = sorted(int(s) for s in rng.integers(0, 5, size=n))
    roles = [str(r) for r in rng.choice(["user", "assistant"], size=n)]
    tokens = [int(t) for t in rng.integers(1, 120, size=n)]
    turns = make_turns(topics, sessions=sessions, roles=roles, tokens=tokens, seed=5)
    cfg = SegmenterConfig(method=method, max_segment_tokens=300)
    whole = make_segmenter(cfg, mode="role")
    ref_segs = whole.push_turns(turns) + whole.finish()
    ref_dec = whole.decisions
    for splits in ([1], [37], [5, 6, 80, 81, 159], list(range(7, n, 13))):
        segs, decs = _run(make_segmenter(cfg, mode="role"), turns, splits)
        assert [s.model_dump() for s in segs] == [s.model_dump() for s in ref_segs]
        assert [d.model_dump() for d in decs] == [d.model_dump() for d in ref_dec]
    assert_covers(turns, ref_segs)


def test_restore_refuses_a_different_config_and_auto_mode_is_kept():
    seg = make_segmenter(SegmenterConfig())  # auto
    seg.push_turns(make_turns([0, 0, 1], roles=["user", "assistant", "user"]))
    assert seg.mode == "role"
    state = seg.state_dict()
    restored = BaseSegmenter.from_state(json.dumps(state))
    assert restored.mode == "role" and isinstance(restored, OnlineSegmenter)
    with pytest.raises(ValueError):
        BaseSegmenter.from_state(state, SegmenterConfig(threshold=0.6))
    fixed = BaseSegmenter.from_state(make_segmenter(SegmenterConfig(method="fixed")).state_dict())
    assert isinstance(fixed, FixedWindowSegmenter)


def test_new_stream_restarts_numbering_but_keeps_background():
    seg = make_segmenter(SegmenterConfig(), mode="turn")
    first = seg.push_turns(make_turns([0] * 30)) + seg.new_stream()
    history = seg.state_dict()["surprises"]
    second = seg.push_turns(make_turns([1] * 4)) + seg.new_stream()
    assert first[0].segment_index == 0 and second[0].segment_index == 0
    assert second[0].first_exchange == 0
    assert history and seg.state_dict()["bg_n"] == 34


def test_surface_cue_helpers():
    assert is_question("what do you do for a living?") and is_question("你喜欢猫吗？")
    assert not is_question("i am a receptionist.")
    assert content_words(["I LOVE cats, cats and dogs!", "don't stop"], 4) == ("love", "cats", "dogs", "don't", "stop")
    assert content_words(["a an the of"], 4) == ()
    assert lexical_novelty(("cats", "dogs"), [["cats"], ["hats"]]) == 0.5
    assert lexical_novelty(("cats",), []) == 1.0
    assert lexical_novelty((), [["cats"]]) is None  # no content word: no lexical evidence


def test_units_carry_question_and_word_cues():
    turns = make_turns([0, 0, 0], roles=["user", "assistant", "assistant"],
                       texts=["Do you like jazz?", "Some of it.", "Which records do you own?"])
    (unit,) = build_exchanges(turns, "role")
    assert unit.opener_question and unit.closer_question
    assert unit.words == ("like", "jazz", "some", "which", "records")  # "own" is under min_word_chars
    (a, b) = build_exchanges(turns[:2], "turn")
    assert a.opener_question and not b.opener_question and not b.closer_question


def test_question_cue_cuts_and_answer_cue_holds_on_a_flat_embedding_stream():
    """With identical-topic vectors only the cues differ: a question opens a segment, its answer does not."""
    texts = ["i like walking my dogs.", "they are lovely animals.", "my dogs sleep a lot.",
             "what is your favourite season?", "winter, because of skiing.", "skiing sounds great."]
    turns = make_turns([0] * 6, texts=texts)
    cues = {"w_question": 4.0, "w_answer": -4.0, "w_lexical": 0.0, "lexical_window": 2, "min_word_chars": 4, "question_modes": ["role", "pair", "turn"], "answer_modes": ["role", "pair", "turn"], "lexical_modes": ["role", "pair", "turn"],
            "question_max_words": 0.0}  # no word gate: the cues alone (the gate: test_segment_decision.py)
    cfg = SegmenterConfig(bias=-2.0, w_surprise=0.0, w_cohesion=0.0, w_length=0.0, w_count=0.0, cues=cues, calibration={"blend": 0.0})
    segs, decisions = segment_turn_inputs(turns, cfg, mode="turn")
    assert cut_points(segs) == [3]
    traced = {d.exchange_index: d for d in decisions if d.p is not None}
    assert traced[3].question == 1.0 and traced[3].answer == 0.0
    assert traced[4].answer == 1.0 and traced[4].question == 0.0 and not traced[4].cut
    # without the answer cue the (question-free) reply is not cut either: the cue only holds, never cuts
    segs, _ = segment_turn_inputs(turns, cfg.model_copy(update={"cues": cfg.cues.model_copy(update={"w_answer": 0.0})}), mode="turn")
    assert cut_points(segs) == [3]
    # the question is cut only because of its cue
    segs, _ = segment_turn_inputs(turns, cfg.model_copy(update={"cues": cfg.cues.model_copy(update={"w_question": 0.0})}), mode="turn")
    assert cut_points(segs) == []


def test_lexical_novelty_is_against_the_open_segments_recent_units():
    texts = ["jazz records vinyl", "jazz vinyl players", "vinyl records jazz", "football stadium tickets", "stadium football match"]
    turns = make_turns([0] * 5, texts=texts)
    cues = {"w_question": 0.0, "w_answer": 0.0, "w_lexical": 4.0, "lexical_window": 2, "min_word_chars": 4}
    cfg = SegmenterConfig(bias=-3.0, w_surprise=0.0, w_cohesion=0.0, w_length=0.0, w_count=0.0, cues=cues)
    segs, decisions = segment_turn_inputs(turns, cfg, mode="turn")
    x = {d.exchange_index: d.lexical_novelty for d in decisions if d.p is not None}
    assert x[1] == pytest.approx(1 / 3) and x[2] == 0.0 and x[3] == 1.0
    assert x[4] == pytest.approx(1 / 3)  # compared with the new segment only ("match" is new)
    assert cut_points(segs) == [3]


def test_save_restore_keeps_the_cue_state():
    rng = np.random.default_rng(3)
    n = 60
    pool = ["do you like jazz?", "yes, jazz records.", "what about football?", "football stadium tickets", "i cook pasta."]
    texts = [pool[int(i)] for i in rng.integers(0, len(pool), size=n)]
    turns = make_turns([int(t) for t in np.repeat(rng.integers(0, 4, size=n // 4), 4)], texts=texts, seed=2)
    cues = {"w_question": 1.5, "w_answer": -1.5, "w_lexical": 1.0, "lexical_window": 2, "min_word_chars": 4, "question_modes": ["role", "pair", "turn"], "answer_modes": ["role", "pair", "turn"], "lexical_modes": ["role", "pair", "turn"]}
    cfg = SegmenterConfig(cues=cues)  # the default stream threshold: its state is restored too
    whole = make_segmenter(cfg, mode="pair")
    ref = whole.push_turns(turns) + whole.finish()
    for splits in ([1], [7], [3, 4, 30, 31, 59]):
        segs, decs = _run(make_segmenter(cfg, mode="pair"), turns, splits)
        assert [s.model_dump() for s in segs] == [s.model_dump() for s in ref]
        assert [d.model_dump() for d in decs] == [d.model_dump() for d in whole.decisions]
    assert any(d.answer == 1.0 for d in whole.decisions) and any(d.question == 1.0 for d in whole.decisions)


def test_state_of_the_previous_version_is_still_read():
    seg = make_segmenter(SegmenterConfig(), mode="turn")
    seg.push_turns(make_turns([0, 0, 0]))
    state = seg.state_dict()
    state["version"] = 2
    del state["last_question"]
    del state["open"]["recent_words"]
    restored = BaseSegmenter.from_state(state)
    assert restored.push_turns(make_turns([1] * 3)) is not None  # continues without the new fields


# ---- degenerate input ----------------------------------------------------------------------


def test_single_turn_and_empty_stream():
    segs, decisions = segment_turn_inputs(make_turns([0]), SegmenterConfig())
    assert len(segs) == 1 and segs[0].reason == "end_of_stream" and segs[0].num_turns == 1
    assert [d.reason for d in decisions] == ["start", "end_of_stream"]
    seg = make_segmenter(SegmenterConfig())
    assert seg.push_turns([]) == [] and seg.finish() == []


def test_empty_turns_are_appended_never_dropped():
    turns = make_turns([0] * 6 + [3] * 6)
    for i in (2, 6, 7):  # empty text (vector irrelevant: no signal); 6 is the first of a new topic
        turns[i].text = ""
        turns[i].tokens = 0
    turns[8].text = "   "
    segs, decisions = segment_turn_inputs(turns, SegmenterConfig(), mode="turn")
    assert_covers(turns, segs)
    for i in (2, 6, 7, 8):
        assert decisions[i].reason == "append" and decisions[i].surprise is None
    # the shift is detected at the first non-empty turn of the new topic
    assert cut_points(segs) == [9]
    # a whole stream of empty turns: one segment
    empty = make_turns([0] * 5)
    for t in empty:
        t.text, t.tokens, t.vector = "", 0, np.zeros(DIM)
    segs, _ = segment_turn_inputs(empty, SegmenterConfig(), mode="turn")
    assert len(segs) == 1 and segs[0].num_turns == 5


def test_identical_turns_stay_together():
    rng_vec = np.ones(DIM) / np.sqrt(DIM)
    turns = make_turns([0] * 40)
    for t in turns:
        t.vector = rng_vec.copy()
    no_count = {"count_pressure": {"start": 0, "scale": 1, "max": 0}}
    # the fixed rule: the length pressure alone never reaches the threshold
    segs, decisions = segment_turn_inputs(turns, SegmenterConfig(**no_count, calibration={"blend": 0.0}), mode="turn")
    assert len(segs) == 1
    assert all(d.surprise is None or d.surprise == pytest.approx(0, abs=1e-9) for d in decisions)
    # the stream threshold (the default) without pressures: equal evidence is never above its own quantile
    segs, _ = segment_turn_inputs(turns, SegmenterConfig(**no_count, w_length=0.0), mode="turn")
    assert len(segs) == 1
    # ... with the length pressure: a cut only where the pressure is above its recent mean (the length prior)
    segs, decisions = segment_turn_inputs(turns, SegmenterConfig(**no_count), mode="turn")
    cuts = [d for d in decisions if d.cut and d.reason == "semantic"]
    assert all(d.length_pressure > 0 for d in cuts)
    assert all(s.num_turns >= 2 for s in segs[:-1])


def test_oversized_turn_is_split_into_pieces_within_the_cap():
    words = [f"word{i % 97}" for i in range(3000)]
    big = " ".join(words)[:20000]
    assert len(big) == 20000
    cap = 1024
    turns = make_turns([0, 0, 0])
    turns[1].text, turns[1].tokens = big, count_tokens(big)
    assert turns[1].tokens > 2 * cap
    segs, decisions = segment_turn_inputs(turns, SegmenterConfig(max_segment_tokens=cap), mode="turn")
    assert all(s.tokens <= cap for s in segs)
    pieces = [r for s in segs for r in s.turns if r.position == turns[1].ref.position]
    assert len(pieces) >= 3 and all(r.is_piece for r in pieces)
    assert "".join(r.slice(big) for r in pieces) == big  # contiguous, nothing dropped
    assert [r.char_start for r in pieces][0] == 0 and pieces[-1].char_end == len(big)
    assert all(count_tokens(r.slice(big)) <= cap for r in pieces)
    assert_covers(turns, segs)
    assert any(d.reason == "length_cap" for d in decisions)


def test_split_text_by_tokens_edge_cases():
    assert split_text_by_tokens("short text", 16) == [(0, 10)]
    assert split_text_by_tokens("", 16) == [(0, 0)]
    text = "😀" * 300 + "x" * 500  # multi-token characters and a long unbroken run
    spans = split_text_by_tokens(text, 16)
    assert "".join(text[a:b] for a, b in spans) == text
    assert all(count_tokens(text[a:b]) <= 16 for a, b in spans)


def test_turn_order_is_enforced():
    seg = make_segmenter(SegmenterConfig(), mode="turn")
    seg.push_turns(make_turns([0, 0], sessions=[1, 1]))
    with pytest.raises(ValueError):
        seg.push_turns(make_turns([0], sessions=[0]))


# ---- pieces --------------------------------------------------------------------------------


def test_signal_helpers():
    from lychee_ray.config import PressureConfig, SurpriseConfig

    assert ramp(1, PressureConfig(start=2, scale=4, max=2)) == 0
    assert ramp(6, PressureConfig(start=2, scale=4, max=2)) == 1
    assert ramp(100, PressureConfig(start=2, scale=4, max=2)) == 2
    cfg = SurpriseConfig(center=0.5, scale=0.1, robust_weight=0.0)
    assert calibrated_surprise(0.6, [], cfg) == pytest.approx(1.0)
    assert calibrated_surprise(5.0, [], cfg) == cfg.clip_max
    rob = SurpriseConfig(center=10.0, robust_weight=1.0, robust_min_history=3)
    assert calibrated_surprise(0.9, [0.1, 0.2], rob) == 0.0  # A is -1 and R is silent before min history
    assert calibrated_surprise(0.9, [0.1, 0.2, 0.3], rob) == rob.robust_clip_max


def test_fixed_window_segmenter():
    turns = make_turns([0, 1, 2] * 7 + [0], sessions=[0] * 10 + [1] * 12)
    segs, decisions = segment_turn_inputs(turns, SegmenterConfig(method="fixed", fixed_window=4), mode="turn")
    assert [s.num_turns for s in segs] == [4, 4, 2, 4, 4, 4]
    assert [s.reason for s in segs] == ["window", "window", "session_boundary", "window", "window", "end_of_stream"]
    assert all(s.method == "fixed" for s in segs)
    capped, _ = segment_turn_inputs(turns, SegmenterConfig(method="fixed", fixed_window=4, max_segment_tokens=25), mode="turn")
    assert all(s.tokens <= 25 for s in capped)


def test_default_yaml_has_the_segmenter_section():
    cfg = load_config(env={})
    assert cfg.segmenter == SegmenterConfig()


# ---- conversations ---------------------------------------------------------------------------


class _CountingEmbedder:
    """Deterministic fake: a topic direction picked from the first word (by CRC-32, not ``hash``:
    string hashes change with PYTHONHASHSEED, and two topic words sharing a direction made the
    segmentation test fail about one run in 32)."""

    name = "fake"
    dim = DIM

    def __init__(self) -> None:
        self.calls = 0

    def encode(self, texts):
        self.calls += 1
        out = np.zeros((len(texts), DIM), dtype=np.float32)
        for i, t in enumerate(texts):
            out[i, (zlib.crc32(t.split()[0].encode()) if t.split() else 0) % DIM] = 1.0
        return out


def _conversation() -> Conversation:
    def turns(prefix: str, word: str, n: int, roles: list[str]) -> list[Turn]:
        return [Turn(turn_id=f"{prefix}:{i}", role=roles[i % 2], content=f"{word} talk {i}") for i in range(n)]

    return Conversation(
        conversation_id="c1",
        sessions=[
            # four cat exchanges before the shift: the stream has the surprise history its robust signal needs
            Session(session_id="s1", turns=turns("D1", "cats", 8, ["user", "assistant"]) + turns("D1b", "rockets", 6, ["user", "assistant"])),
            Session(session_id="s2", turns=turns("D2", "cats", 4, ["user", "assistant"])),
        ],
    )


def test_segment_conversation_embeds_once_and_returns_vectors():
    conv = _conversation()
    emb = _CountingEmbedder()
    res = segment_conversation(conv, emb, SegmenterConfig())
    assert emb.calls == 1 and res.turn_vectors.shape == (conv.num_turns, DIM)
    assert res.mode == "role"
    assert [s.session_id for s in res.segments] == ["s1", "s1", "s2"]
    assert res.segments[0].turn_ids == [f"D1:{i}" for i in range(8)]
    again = segment_conversation(conv, cfg=SegmenterConfig(), turn_vectors=res.turn_vectors)
    assert [s.model_dump() for s in again.segments] == [s.model_dump() for s in res.segments]
    resolved = segment_turns(conv, res.segments[1])
    assert [r.text for r in resolved] == [f"rockets talk {i}" for i in range(6)]
    with pytest.raises(ValueError):
        segment_conversation(conv, cfg=SegmenterConfig())


def test_segment_conversation_with_minilm(embedder):
    """Real embeddings: a dog chat then a tax chat, as two-human dialogue (pair mode)."""
    dog = ["I adopted a puppy last week.", "Oh nice, what breed is the puppy?", "A golden retriever, he loves fetch.",
           "Retrievers are great dogs for families.", "He already chewed my shoes, though!", "Puppies chew everything, get him toys."]
    tax = ["Did you file your income tax return yet?", "Not yet, the tax deadline is in April.", "I owe money to the IRS this year.",
           "You can set up a payment plan with the IRS.", "My accountant said deductions were lower.", "Tax rules changed, deductions shrank."]
    texts = dog * 3 + tax * 3
    conv = Conversation(conversation_id="c", sessions=[Session(session_id="s", turns=[
        Turn(turn_id=f"t{i}", role="user", speaker="AB"[i % 2], content=t) for i, t in enumerate(texts)])])
    res = segment_conversation(conv, embedder, SegmenterConfig())
    assert res.turn_vectors.shape == (len(texts), embedder.dim)
    starts = [int(s.turns[0].turn_id[1:]) for s in res.segments]
    assert 18 in starts  # the topic change is a boundary
    assert all(s.tokens <= SegmenterConfig().max_segment_tokens for s in res.segments)
