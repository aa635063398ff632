"""Turn-level placement of a cut (pair units), the stream-calibrated threshold and the cue gates, by
exchange mode and by the stream's words per turn (issue 38).

Synthetic unit vectors, no model (the helpers of test_segment.py).
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from lychee_ray.ingest.segment import (
    BaseSegmenter,
    WordRate,
    count_words,
    make_segmenter,
    open_turn_refs,
    segment_stream,
    segment_turn_inputs,
)
from lychee_ray.ingest.segment.calibration import StreamThreshold, logit
from lychee_ray.ingest.segment.placement import choose_shift, gap_coherence
from lychee_ray.config import CalibrationConfig, SegmenterConfig
from tests.ingest.test_segment import _run, assert_covers, cut_points, make_turns

PAIR_ON = {"modes": ["pair"], "window": 2, "margin": 0.0}
PAIR_OFF = {"modes": [], "window": 2, "margin": 0.0}


def _e(i: int, dim: int = 8) -> np.ndarray:
    v = np.zeros(dim)
    v[i] = 1.0
    return v


def test_gap_coherence_and_choose_shift():
    a, b = _e(0), _e(1)
    assert gap_coherence([a, a], [b]) == pytest.approx(0.0)
    assert gap_coherence([a], [np.zeros(8)]) is None  # a side without signal has no coherence
    # topic b starts at the unit's second turn: the gap inside the unit wins
    assert choose_shift([a, a, a], [a, b], 2, 0.0, allow_back=True)[0] == 1
    # topic b started at the open segment's last turn: the gap before it wins (when allowed)
    assert choose_shift([a, a, b], [b, b], 2, 0.0, allow_back=True)[0] == -1
    assert choose_shift([a, a, b], [b, b], 2, 0.0, allow_back=False)[0] == 0
    # a clean shift at the unit stays there, and a margin keeps a near tie at the unit
    assert choose_shift([a, a, a], [b, b], 2, 0.0, allow_back=True)[0] == 0
    mixed = (3 * a + b) / np.sqrt(10)  # the unit's first turn still mostly on the old topic
    assert choose_shift([a, a, a], [mixed, b], 2, 0.0, allow_back=True)[0] == 1
    assert choose_shift([a, a, a], [mixed, b], 2, 0.5, allow_back=True)[0] == 0


@pytest.mark.parametrize("start", [9, 11, 10, 12])
def test_pair_cut_lands_on_the_turn_where_the_topic_starts(start):
    """A pair unit straddling the shift used to be cut a turn early or late; placement cuts at the shift."""
    topics = [0] * start + [1] * (22 - start)
    turns = make_turns(topics)
    on, dec = segment_turn_inputs(turns, SegmenterConfig(placement=PAIR_ON), mode="pair")
    off, _ = segment_turn_inputs(turns, SegmenterConfig(placement=PAIR_OFF), mode="pair")
    assert cut_points(on) == [start]
    assert_covers(turns, on)
    if start % 2:
        assert cut_points(off) != [start]  # the pair grid alone cannot hit an odd turn
        assert any(d.placement in (-1, 1) for d in dec)
    assert all(d.placement is None for d in dec if d.reason != "semantic")
    assert all(s.num_exchanges >= 1 and s.tokens == 10 * s.num_turns for s in on)


def test_placement_is_off_in_role_mode_and_for_pieces():
    topics = [0] * 9 + [1] * 9
    roles = ["user", "assistant"] * 9
    segs, dec = segment_turn_inputs(make_turns(topics, roles=roles), SegmenterConfig(placement={"modes": ["pair", "turn"]}), mode="role")
    assert all(d.placement is None for d in dec)  # a role boundary stays at a user turn
    assert all(s.turns[0].turn_index % 2 == 0 for s in segs)


def test_placement_never_breaks_the_cap_or_coverage():
    rng = np.random.default_rng(4)
    n = 200
    topics = [int(t) for t in np.repeat(rng.integers(0, 6, size=n // 5), 5)]
    tokens = [int(t) for t in rng.integers(1, 90, size=n)]
    sessions = sorted(int(s) for s in rng.integers(0, 4, size=n))
    turns = make_turns(topics, sessions=sessions, tokens=tokens, seed=9)
    cfg = SegmenterConfig(max_segment_tokens=200, placement=PAIR_ON)
    segs, dec = segment_turn_inputs(turns, cfg, mode="pair")
    assert_covers(turns, segs)
    assert all(0 < s.tokens <= 200 and s.num_turns >= 1 for s in segs)
    assert all(len({r.session_index for r in s.turns}) == 1 for s in segs)
    assert sum(s.num_turns for s in segs) == n
    assert any(d.placement == 1 for d in dec) or any(d.placement == -1 for d in dec)


def test_save_restore_with_placement_and_stream_threshold_is_exact():
    rng = np.random.default_rng(12)
    n = 150
    topics = [int(t) for t in np.repeat(rng.integers(0, 5, size=n // 5), 5)]
    tokens = [int(t) for t in rng.integers(1, 60, size=n)]
    turns = make_turns(topics, tokens=tokens, seed=3)
    cfg = SegmenterConfig(placement=PAIR_ON, calibration={"blend": 0.5, "min_history": 4})
    whole = make_segmenter(cfg, mode="pair")
    ref = whole.push_turns(turns) + whole.finish()
    assert any(d.placement in (-1, 1) for d in whole.decisions)
    for splits in ([1], [2, 3], [17, 18, 90], list(range(5, n, 11))):
        segs, decs = _run(make_segmenter(cfg, mode="pair"), turns, splits)
        assert [s.model_dump() for s in segs] == [s.model_dump() for s in ref]
        assert [d.model_dump() for d in decs] == [d.model_dump() for d in whole.decisions]




# ---- the stream threshold ------------------------------------------------------------------


def test_stream_threshold_blends_the_fixed_and_the_stream_quantile():
    cfg = CalibrationConfig(blend=0.5, segment_turns=4.0, window=100, min_history=10, max_rate=0.5)
    st = StreamThreshold(cfg)
    fixed = logit(0.5)
    for z in range(9):
        st.observe(float(z) + 1.0, pressure=1.0, turns=2)
    assert not st.active and st.threshold(fixed) == fixed  # too little history: the fixed rule
    st.observe(12.0, pressure=3.0, turns=2)
    st.observe(None, pressure=0.0, turns=2)  # a unit without a decision counts its turns, adds no score
    assert st.rate() == pytest.approx(0.5)  # 2 turns per unit / 4 turns per segment
    q = float(np.quantile(np.arange(10.0), 0.5)) + 1.2  # evidence quantile + mean pressure
    assert st.threshold(fixed) == pytest.approx(0.5 * fixed + 0.5 * q)
    back = StreamThreshold(cfg)
    back.load(json.loads(json.dumps(st.state_dict())))
    assert back.threshold(fixed) == st.threshold(fixed) and back.units == 11
    assert StreamThreshold(cfg.model_copy(update={"blend": 0.0})).threshold(fixed) == fixed


def test_stream_threshold_sets_the_cut_rate_from_the_length_prior():
    """On a stream where every turn is a new direction the stream rule cuts about one turn in
    ``segment_turns`` and follows that prior; the fixed rule ignores it (its rate is whatever the
    weights make of this stream)."""
    rng = np.random.default_rng(0)
    topics = [int(t) for t in rng.integers(0, 32, size=400)]
    turns = make_turns(topics, seed=1)

    def run(blend: float, segment_turns: float) -> list:
        cfg = SegmenterConfig(calibration={"blend": blend, "segment_turns": segment_turns, "min_history": 16})
        return segment_turn_inputs(turns, cfg, mode="turn")[0]

    short, long = run(1.0, 6.0), run(1.0, 12.0)
    assert 4.0 <= 400 / len(short) <= 9.0
    assert len(long) < len(short)  # a longer prior, longer segments (the pressures add cuts of their own: not proportional)
    assert_covers(turns, short)
    fixed_a, fixed_b = run(0.0, 6.0), run(0.0, 12.0)
    assert [s.turn_ids for s in fixed_a] == [s.turn_ids for s in fixed_b]


# ---- cue gates -------------------------------------------------------------------------------


def test_cue_gates_follow_the_exchange_mode():
    """A cue counts only in the modes it is gated to: the answer cue in role units only, say."""
    texts = ["is it raining?", "yes it is.", "do you like jazz?", "yes, jazz records.", "what about football?", "football is fun."] * 3
    roles = ["user", "assistant"] * 9
    topics = [0] * 18
    gated = SegmenterConfig(cues={"w_question": 1.0, "w_answer": -1.0, "w_lexical": 1.0, "answer_modes": ["role"],
                                  "question_modes": ["role"], "lexical_modes": ["pair"]})
    _, turn_dec = segment_turn_inputs(make_turns(topics, texts=texts), gated, mode="turn")
    assert all(d.answer == 0.0 and d.question == 0.0 and d.lexical_novelty is None for d in turn_dec if d.p is not None)
    # role units: an assistant that ends with a question is answered by the next user turn
    role_texts = ["is it raining?", "do you want an umbrella?", "yes please.", "here it is.", "what about football?", "it is fun."] * 3
    _, role_dec = segment_turn_inputs(make_turns(topics, roles=roles, texts=role_texts), gated, mode="role")
    assert any(d.answer == 1.0 for d in role_dec) and any(d.question == 1.0 for d in role_dec)
    assert all(d.lexical_novelty is None for d in role_dec)
    _, pair_dec = segment_turn_inputs(make_turns(topics, texts=texts), gated, mode="pair")
    assert any(d.lexical_novelty is not None for d in pair_dec) and all(d.answer == 0.0 for d in pair_dec if d.p is not None)


def test_robust_stream_threshold_is_a_scale_not_a_rate():
    cfg = CalibrationConfig(blend=1.0, kind="robust", segment_turns=6.0, spread=2.0, mad_floor=0.05, window=100, min_history=5, max_rate=0.5)
    st = StreamThreshold(cfg)
    for z in [1.0, 2.0, 3.0, 4.0, 5.0]:
        st.observe(z, pressure=0.0, turns=1)
    # median 3, MAD 1 -> 3 + 2 * 1.4826
    assert st.threshold(0.0) == pytest.approx(3.0 + 2.0 * 1.4826)
    flat = StreamThreshold(cfg)
    for _ in range(5):
        flat.observe(1.0, pressure=0.5, turns=1)
    assert flat.threshold(0.0) == pytest.approx(0.5 + 2.0 * 0.05 + 0.5)  # evidence 1.0 - 0.5; the MAD floor keeps a spread
    # topics of 20 turns (pressures off, to see the threshold alone): the robust rule cuts the shifts and
    # nothing else, the quantile rule keeps its rate of one cut in ~6 turns and cuts inside topics too
    turns = make_turns([t for t in range(8) for _ in range(20)], seed=4)
    base = {"w_count": 0.0, "w_length": 0.0}
    robust, _ = segment_turn_inputs(turns, SegmenterConfig(**base, calibration={"blend": 1.0, "kind": "robust", "spread": 3.0, "min_history": 16}), mode="turn")
    quant, _ = segment_turn_inputs(turns, SegmenterConfig(**base, calibration={"blend": 1.0, "kind": "quantile", "segment_turns": 6.0, "min_history": 16}), mode="turn")
    assert cut_points(robust) == [20, 40, 60, 80, 100, 120, 140]
    assert len(quant) > len(robust)


# ---- the question cue's gate on the stream's words per turn -----------------------------------


def test_word_rate_is_a_windowed_mean_known_after_min_history():
    wr = WordRate(window=4, min_history=3)
    wr.observe([5, 0])  # an empty turn is no evidence
    assert wr.mean() is None and not wr.at_most(100.0) and wr.at_most(0.0)  # 0 = no gate
    wr.observe([7, 9])
    assert wr.mean() == pytest.approx(7.0) and wr.at_most(7.0) and not wr.at_most(6.9)
    wr.observe([20, 20])  # the window keeps the last 4: 7, 9, 20, 20
    assert wr.mean() == pytest.approx(14.0)
    assert count_words("Don't you like 2023's jazz? Oui!") == 6


def _question_stream(words_per_turn: int, n: int = 24) -> list:
    filler = " ".join(["word"] * (words_per_turn - 1))
    texts = [f"why {filler}?" if i % 3 == 0 else f"so {filler}." for i in range(n)]
    return make_turns([0] * n, texts=texts)


def test_question_cue_counts_only_on_short_utterance_streams():
    cfg = SegmenterConfig(cues={"w_question": 1.0, "question_max_words": 15.0, "words_min_history": 4, "words_window": 8})
    _, short = segment_turn_inputs(_question_stream(10), cfg, mode="turn")
    _, long = segment_turn_inputs(_question_stream(30), cfg, mode="turn")
    decided = [d for d in short if d.p is not None]
    # shut until the stream has shown 4 turns, then open: the questions among later units count
    assert all(d.question == 0.0 and d.words_per_turn is None for d in decided if d.exchange_index < 4)
    assert any(d.question == 1.0 for d in decided) and all(d.words_per_turn == 10.0 for d in decided if d.exchange_index >= 4)
    assert all(d.question == 0.0 for d in long if d.p is not None)  # 30 words per turn: the gate stays shut
    ungated = cfg.model_copy(update={"cues": cfg.cues.model_copy(update={"question_max_words": 0.0})})
    _, long_ungated = segment_turn_inputs(_question_stream(30), ungated, mode="turn")
    assert any(d.question == 1.0 for d in long_ungated)


def test_question_gate_survives_save_restore_and_new_stream():
    cfg = SegmenterConfig(cues={"w_question": 2.0, "question_max_words": 15.0, "words_min_history": 4, "words_window": 6})
    turns = _question_stream(10, n=30)
    whole = make_segmenter(cfg, mode="turn")
    ref = whole.push_turns(turns) + whole.finish()
    for splits in ([2], [3, 5], list(range(1, 30, 4))):
        segs, decs = _run(make_segmenter(cfg, mode="turn"), turns, splits)
        assert [s.model_dump() for s in segs] == [s.model_dump() for s in ref]
        assert [d.model_dump() for d in decs] == [d.model_dump() for d in whole.decisions]
    whole.new_stream()  # the next dialogue of the stream: the gate is open from its first unit on
    whole.decisions = []
    whole.push_turns(_question_stream(10, n=6))
    assert [d.words_per_turn for d in whole.decisions if d.p is not None][0] == 10.0





# ---- the look-ahead (cues.ahead_modes) -----------------------------------------------------------

AHEAD = {"w_ahead": 1.5, "ahead_modes": ["role", "pair", "turn"]}


def _ahead_stream(n: int = 150, seed: int = 12) -> list:
    rng = np.random.default_rng(seed)
    topics = [int(t) for t in np.repeat(rng.integers(0, 5, size=n // 5), 5)]
    tokens = [int(t) for t in rng.integers(1, 60, size=n)]
    return make_turns(topics, tokens=tokens, seed=3)


@pytest.mark.parametrize("mode", ["turn", "pair"])
def test_look_ahead_with_zero_weight_changes_only_the_latency(mode):
    """A held unit is decided on the same logit when H_t has no weight: the same segments, one unit later."""
    turns = _ahead_stream()
    off = make_segmenter(SegmenterConfig(placement=PAIR_ON), mode=mode)
    ref = off.push_turns(turns) + off.finish()
    on = make_segmenter(SegmenterConfig(placement=PAIR_ON, cues={**AHEAD, "w_ahead": 0.0}), mode=mode)
    early = on.push_turns(turns[:20])
    assert len(early) < len([s for s in ref if s.turns[-1].position < turns[20].ref.position]) + 1
    got = early + on.push_turns(turns[20:]) + on.finish()
    assert [s.model_dump() for s in got] == [s.model_dump() for s in ref]
    assert [d.model_dump(exclude={"ahead"}) for d in on.decisions] == [d.model_dump(exclude={"ahead"}) for d in off.decisions]
    assert any((d.ahead or 0.0) > 0 for d in on.decisions) and any((d.ahead or 0.0) < 0 for d in on.decisions)


def test_look_ahead_tells_a_shift_from_a_one_unit_digression():
    """At a real shift the next unit sides with the new unit (H_t > 0); after a one-unit digression it
    returns to the open segment (H_t < 0), so the digression is less likely cut."""
    cfg = SegmenterConfig(cues=AHEAD, center_embeddings=False)
    seg = make_segmenter(cfg, mode="turn")
    seg.push_turns(make_turns([0] * 6 + [1] + [0] * 5 + [2] * 6, seed=5))
    seg.finish()
    h = {i: d.ahead for i, d in enumerate(d for d in seg.decisions if d.exchange_index is not None)}
    assert h[6] < 0 < h[12]  # unit 6: the digression; unit 12: the shift to topic 2
    assert h[17] == 0.0  # the last unit has no next one


def test_held_unit_is_decided_at_a_session_end_and_before_a_system_prompt():
    cfg = SegmenterConfig(cues=AHEAD)
    turns = make_turns([0] * 5 + [1] * 4, sessions=[0] * 5 + [1] * 4)
    seg = make_segmenter(cfg, mode="turn")
    segs = seg.push_turns(turns)
    last_of_session = [d for d in seg.decisions if d.turn_ids == ["D0:4"]]
    assert len(last_of_session) == 1 and last_of_session[0].ahead == 0.0  # never looks into the next session
    segs += seg.finish()
    assert_covers(turns, segs)
    # a system turn opening a later session closes the open segment after the held unit is decided
    prompt = make_turns([3], sessions=[2], roles=["system"])
    seg = make_segmenter(cfg, mode="role")
    segs = seg.push_turns(turns[:5]) + seg.push_turns(prompt) + seg.finish()
    assert [s.reason for s in segs][-1] == "system_prompt" and sum(s.num_turns for s in segs) == 6


@pytest.mark.parametrize("mode", ["turn", "pair"])
def test_save_restore_with_a_held_unit_is_exact(mode):
    turns = _ahead_stream()
    cfg = SegmenterConfig(placement=PAIR_ON, cues=AHEAD, calibration={"blend": 1.0, "min_history": 4})
    whole = make_segmenter(cfg, mode=mode)
    ref = whole.push_turns(turns) + whole.finish()
    for splits in ([1], [2, 3], [17, 18, 90], list(range(5, len(turns), 11))):
        segs, decs = _run(make_segmenter(cfg, mode=mode), turns, splits)
        assert [s.model_dump() for s in segs] == [s.model_dump() for s in ref]
        assert [d.model_dump() for d in decs] == [d.model_dump() for d in whole.decisions]


def test_held_turns_are_open_turns_of_a_resume_point():
    turns = make_turns([0] * 7)
    res = segment_stream(turns, SegmenterConfig(cues=AHEAD, exchange_mode="turn"), finish=False)
    held = res.state["held"]["unit"]["turns"]
    assert [r["turn_id"] for r in held] == ["D0:6"]
    assert [r.turn_id for r in open_turn_refs(res.state)][-1] == "D0:6"
    closed = {r.turn_id for s in res.closed for r in s.turns}
    assert closed | {r.turn_id for r in open_turn_refs(res.state)} == {t.ref.turn_id for t in turns}


@pytest.mark.parametrize("version", [3, 4, 5])
def test_older_state_versions_are_still_read(version):
    """A state saved by an older version (without the fields added since) continues the stream."""
    seg = make_segmenter(SegmenterConfig(placement=PAIR_ON), mode="pair")
    first = seg.push_turns(make_turns([0] * 5))
    state = json.loads(json.dumps(seg.state_dict()))
    assert state["version"] == 6 and state["turn_words"] and "held" in state
    state["version"] = version
    del state["held"]  # 6: the unit held for the look-ahead
    if version < 5:
        del state["turn_words"]  # 5: the question gate's words per turn
    if version < 4:
        del state["calibration"], state["open"]["tail"]  # 4: the stream threshold, placement's last turns
    restored = BaseSegmenter.from_state(state)
    if version < 5:
        assert restored._word_rate.mean() is None  # a state from before the gate: no words seen
    out = restored.push_turns(make_turns([1] * 6, sessions=[1] * 6)) + restored.finish()
    assert sum(s.num_turns for s in first + out) == 11
