"""Segmentation metrics: hand-made cases and agreement with NLTK."""

from __future__ import annotations

import math
import random

import pytest

from lychee_ray.eval.metrics.segmentation import (
    BoundaryCounts,
    boundary_string,
    evaluate_corpus,
    lengths_to_boundaries,
    match_boundaries,
    pk,
    window_k,
    windowdiff,
)


def test_boundaries_and_strings():
    assert lengths_to_boundaries([4, 2, 2, 8]) == [3, 5, 7]
    assert lengths_to_boundaries([5]) == []
    assert boundary_string([2, 3]) == "01000"
    assert boundary_string([1, 1, 1]) == "110"
    with pytest.raises(ValueError):
        lengths_to_boundaries([2, 0])


def test_pk_windowdiff_hand_cases():
    ref = boundary_string([3, 3])  # "001000"
    assert pk(ref, ref, 2) == 0.0 and windowdiff(ref, ref, 2) == 0.0
    hyp = boundary_string([6])  # no boundary: windows over position 2 disagree
    # windows of 2 over 6 positions: [0,1] [1,2] [2,3] [3,4] [4,5]; the two containing index 2 differ
    assert pk(ref, hyp, 2) == pytest.approx(2 / 5)
    assert windowdiff(ref, hyp, 2) == pytest.approx(2 / 5)
    # a near miss: Pk and WindowDiff forgive part of it
    near = boundary_string([4, 2])  # "000100"
    assert pk(ref, near, 2) == pytest.approx(2 / 5)
    assert windowdiff(ref, near, 3) == pytest.approx(2 / 4)
    # two hypothesised boundaries where gold has one: Pk blind to it, WindowDiff not
    ref2, hyp2 = "0100", "0110"
    assert pk(ref2, hyp2, 2) == pytest.approx(1 / 3)
    assert windowdiff(ref2, hyp2, 2) == pytest.approx(2 / 3)


def test_nltk_docstring_examples():
    s1, s2, s3 = "000100000010", "000010000100", "100000010000"
    assert f"{windowdiff(s1, s2, 3):.2f}" == "0.30"
    assert f"{windowdiff(s2, s3, 3):.2f}" == "0.80"
    assert f"{pk('0100' * 100, '1' * 400, 2):.2f}" == "0.50"
    assert f"{pk('0100' * 100, '0' * 400, 2):.2f}" == "0.50"


def _random_lengths(rng: random.Random, n: int) -> list[int]:
    out, left = [], n
    while left:
        k = min(left, rng.randint(1, 6))
        out.append(k)
        left -= k
    return out


def test_agrees_with_nltk_on_random_segmentations():
    seg = pytest.importorskip("nltk.metrics.segmentation")
    rng = random.Random(7)
    for _ in range(300):
        n = rng.randint(2, 40)
        ref, hyp = boundary_string(_random_lengths(rng, n)), boundary_string(_random_lengths(rng, n))
        k = rng.randint(1, n)
        assert pk(ref, hyp, k) == pytest.approx(seg.pk(ref, hyp, k))
        assert windowdiff(ref, hyp, k) == pytest.approx(seg.windowdiff(ref, hyp, k))


def test_window_errors():
    with pytest.raises(ValueError):
        pk("010", "01", 2)
    with pytest.raises(ValueError):
        windowdiff("010", "010", 4)


def test_boundary_matching_and_f1():
    exact = match_boundaries([3, 5, 7], [3, 6, 9], tolerance=0)
    assert exact == BoundaryCounts(tp=1, n_hyp=3, n_ref=3)
    assert exact.f1 == pytest.approx(1 / 3)
    tol = match_boundaries([3, 5, 7], [3, 6, 9], tolerance=1)
    assert tol.tp == 2  # 6 matches 5 (or 7) once, never twice
    assert match_boundaries([5], [4, 6], tolerance=1).tp == 1  # one-to-one
    assert match_boundaries([4, 5], [5], tolerance=1).tp == 1  # exact match taken first
    assert BoundaryCounts().f1 == 1.0  # no boundaries anywhere: perfect
    assert BoundaryCounts(0, 2, 0).f1 == 0.0
    assert (BoundaryCounts(1, 2, 3) + BoundaryCounts(1, 1, 1)) == BoundaryCounts(2, 3, 4)


def test_window_k():
    assert window_k([4, 2, 2, 8]) == 2  # mean 4 -> 2
    assert window_k([5, 5]) == 3  # mean 5 -> 2.5 rounds half up
    assert window_k([1, 1, 1, 1]) == 2  # at least 2
    assert window_k([2]) == 2
    assert window_k([1]) == 1  # never longer than the dialogue


def test_evaluate_corpus_small():
    gold = [[3, 3], [2, 2, 2]]
    perfect = evaluate_corpus(gold, gold)
    assert perfect["pk"] == 0 and perfect["windowdiff"] == 0
    assert perfect["f1"] == perfect["f1_tol1"] == 1.0
    assert perfect["mean_segment_len"] == pytest.approx(12 / 5)
    off = evaluate_corpus(gold, [[4, 2], [3, 3]])
    # boundaries: gold {2} vs hyp {3}; gold {1,3} vs hyp {2}: exact 0/3, within ±1: 2 matches
    assert off["f1"] == 0.0
    assert off["precision"] == 0.0
    assert off["f1_tol1"] == pytest.approx(2 * (2 / 2) * (2 / 3) / (2 / 2 + 2 / 3))
    assert off["mean_segment_len"] == pytest.approx(3.0)
    with pytest.raises(ValueError):
        evaluate_corpus(gold, [[3, 3], [2, 2]])


# ---- eval-seg library: corpus reading, role-aware protocol, reference points --------------------


def _corpus_file(tmp_path, dialogues):
    import json

    path = tmp_path / "corpus.json"
    path.write_text(json.dumps(dialogues), encoding="utf-8")
    return path


def _topic_vectors(topics, dim=16, seed=0):
    import numpy as np

    rng = np.random.default_rng(seed)
    return np.stack([np.eye(dim)[t % dim] + 0.1 * rng.standard_normal(dim) / 4 for t in topics])


def test_texttiling_oracle_finds_planted_boundaries():
    from lychee_ray.eval.baselines.texttiling import depth_scores, texttiling_oracle

    vecs = _topic_vectors([0] * 5 + [3] * 4 + [7] * 6)
    assert texttiling_oracle(vecs, 2) == [5, 4, 6]
    assert texttiling_oracle(vecs, 0) == [15]
    assert texttiling_oracle(vecs[:1], 3) == [1]  # never more boundaries than gaps
    assert sum(texttiling_oracle(vecs, 20)) == 15
    assert list(depth_scores([1.0, 0.2, 1.0])) == pytest.approx([0.0, 1.6, 0.0])


def test_standard_texttiling_finds_planted_boundaries_without_the_count():
    from lychee_ray.eval.baselines.texttiling import texttiling_hearst

    for seed in range(3):
        assert texttiling_hearst(_topic_vectors([0] * 5 + [3] * 4 + [7] * 6, seed=seed)) == [5, 4, 6]
    assert texttiling_hearst(_topic_vectors([0])) == [1] and texttiling_hearst(_topic_vectors([0, 4])) == [2]
    lengths = texttiling_hearst(_topic_vectors([0] * 8))  # no planted shift: noise valleys only
    assert sum(lengths) == 8 and all(n > 0 for n in lengths)


def test_load_seg_corpus_reads_roles_and_reports_bad_records(tmp_path):
    from lychee_ray.eval.runners.segmentation import (
        SegCorpusError,
        eval_exchange_mode,
        load_seg_corpus,
    )

    good = [{"dial_id": "a", "utterances": ["q", "a", "q2"], "roles": ["user", "agent", "user"], "segments": [2, 1]}]
    dialogues = load_seg_corpus(_corpus_file(tmp_path, good))
    assert dialogues[0].roles == ["user", "agent", "user"] and eval_exchange_mode(dialogues) == "role"
    plain = [{"dial_id": "b", "utterances": ["x", "y"], "segments": [2]}]
    assert eval_exchange_mode(load_seg_corpus(_corpus_file(tmp_path, plain))) == "turn"
    bad = [{"dial_id": "c", "utterances": ["x", "y"], "roles": ["user"], "segments": [2]}]
    with pytest.raises(SegCorpusError) as err:
        load_seg_corpus(_corpus_file(tmp_path, bad))
    assert err.value.dialogue == "c"
    with pytest.raises(SegCorpusError):
        load_seg_corpus(tmp_path / "missing.json")


def test_role_aware_eval_cuts_only_at_user_turns_and_reports_reference_points():
    from lychee_ray.config import SegmenterConfig
    from lychee_ray.eval.runners.segmentation import (
        SegDialogue,
        dialogue_turn_inputs,
        evaluate_dialogues,
        segment_dialogues,
    )

    topics = [0, 0, 0, 0, 5, 5, 5, 5, 9, 9, 9, 9]
    roles = ["user", "agent"] * 6
    dialogues = [SegDialogue(f"d{i}", [f"u{j}" for j in range(12)], [4, 4, 4], roles=roles) for i in range(6)]
    import numpy as np

    vectors = np.concatenate([_topic_vectors(topics, seed=i) for i in range(6)])
    hyp = segment_dialogues(dialogue_turn_inputs(dialogues, vectors), SegmenterConfig(), mode="role")
    for lengths in hyp:
        assert all(n % 2 == 0 for n in lengths)  # every segment starts at a user turn
    report = evaluate_dialogues(dialogues, vectors, SegmenterConfig())
    assert report["exchange_mode"] == "role"
    assert {"lychee", "fixed_window", "no_boundary", "texttiling", "texttiling_oracle"} <= set(report)
    assert report["texttiling_oracle"]["windowdiff"] == 0.0  # planted shifts, true count
    assert report["no_boundary"]["mean_segment_len"] == 12.0
    # a paired comparison against every reference, consistent with the corpus means
    assert set(report["paired"]) == {"fixed_window", "no_boundary", "texttiling", "texttiling_oracle"}
    for name, pair in report["paired"].items():
        wd = pair["windowdiff"]
        assert wd["mean"] == pytest.approx(report["lychee"]["windowdiff"] - report[name]["windowdiff"], abs=2e-4)
        assert wd["ci95_low"] <= wd["mean"] <= wd["ci95_high"]
    from lychee_ray.eval.runners.segmentation import format_report

    text = format_report(report)
    assert "texttiling_oracle" in text and "[95% CI]" in text


def test_paired_difference_hand_case():
    from lychee_ray.eval.metrics.segmentation import Z_95, paired_difference, per_dialogue_scores

    d = paired_difference([0.5, 0.4, 0.3], [0.6, 0.6, 0.6])  # differences -0.1, -0.2, -0.3
    assert d["mean"] == pytest.approx(-0.2)
    assert d["se"] == pytest.approx(0.1 / math.sqrt(3))
    assert d["ci95_high"] == pytest.approx(-0.2 + Z_95 * 0.1 / math.sqrt(3)) and d["ci95_high"] < 0
    # identical systems: zero difference, zero width (the shared dialogue variance cancels)
    same = paired_difference([0.1, 0.9, 0.5], [0.1, 0.9, 0.5])
    assert same["mean"] == 0.0 and same["ci95_low"] == same["ci95_high"] == 0.0
    with pytest.raises(ValueError):
        paired_difference([0.1], [0.1, 0.2])
    scores = per_dialogue_scores([[2, 2], [4]], [[4], [4]])
    assert scores["windowdiff"] == [pytest.approx(windowdiff("0100", "0000", 2)), 0.0]
