"""BEAM knowledge-update and contradiction scores (eval/metrics/beam_current.py): which gold message
is the updated one, what counts as stale and unmarked, and both statements marked."""

from __future__ import annotations

from lychee_ray.eval.metrics.beam_current import beam_current_scores, qualified_groups

UPDATE = {"original_info": ["4"], "updated_info": ["6", "12"]}
CONTRA = {"first_statement": ["0"], "second_statement": ["8", "10"]}


def order(t: str) -> int:
    return int(t)


def test_the_latest_updated_message_must_be_cited():
    assert beam_current_scores("knowledge_update", UPDATE, [(["12"], "current")], order)["updated_in_context"] == 1.0
    only_first = beam_current_scores("knowledge_update", UPDATE, [(["6"], "current")], order)
    assert only_first["updated_in_context"] == 0.0 and only_first["original_only"] == 0.0


def test_an_original_shown_unmarked_is_stale_and_marked_is_not():
    stale = beam_current_scores("knowledge_update", UPDATE, [(["3", "4"], "current"), (["12"], "current")], order)
    assert stale == {"updated_in_context": 1.0, "updated_marked": 0.0, "original_only": 0.0, "stale_unmarked": None,
                     "stale_message_unmarked": 1.0}
    marked = beam_current_scores("knowledge_update", UPDATE, [(["4"], "superseded"), (["12"], "current")], order)
    assert marked["stale_message_unmarked"] == 0.0
    alone = beam_current_scores("knowledge_update", UPDATE, [(["4"], "current")], order)
    assert alone["original_only"] == 1.0 and alone["updated_in_context"] == 0.0 and alone["stale_message_unmarked"] == 1.0


def test_stale_by_value_counts_an_unmarked_unit_showing_the_replaced_value():
    units = [(["4"], "current"), (["5"], "current"), (["12"], "current")]

    def score(texts, statuses=("current",) * 3, replaced=("3 PM",)):
        return beam_current_scores("knowledge_update", UPDATE, [(u, st) for (u, _), st in zip(units, statuses)],
                                   order, texts, list(replaced))["stale_unmarked"]

    # the original message's other statement does not show the old time: not stale by value
    assert score(["User is preparing slides for the call.", "ok", "The call moved to 4 PM."]) == 0.0
    # an assistant reply repeating the old time is stale too; "13 pm" or "3 PMs" is not "3 PM"
    assert score(["slides", "Your call is at 3   pm.", "4 PM"]) == 1.0
    assert score(["at 13 pm", "3 PMs", "4 PM"]) == 0.0
    # marked, or shown beside the update by a unit citing the updated message: not stale
    assert score(["at 3 PM", "ok", "4 PM"], ("superseded", "current", "current")) == 0.0
    assert score(["ok", "ok", "moved from 3 PM to 4 PM"]) == 0.0
    # no annotation, or an original message that states no replaced value: not measured
    assert score(["at 3 PM", "ok", "4 PM"], replaced=()) is None
    assert beam_current_scores("knowledge_update", UPDATE, units, order)["stale_unmarked"] is None


def test_the_update_shown_alone_and_marked_is_the_current_value_called_stale():
    wrong = beam_current_scores("knowledge_update", UPDATE, [(["12"], "superseded")], order)
    assert wrong["updated_marked"] == 1.0
    beside = beam_current_scores("knowledge_update", UPDATE, [(["4", "12"], "superseded"), (["12"], "current")], order)
    assert beside["updated_marked"] == 0.0  # a unit showing the original too may be marked for it


def test_an_original_that_is_also_the_update_is_never_stale():
    same = {"original_info": ["9"], "updated_info": ["9"]}
    s = beam_current_scores("knowledge_update", same, [(["9"], "current")], order)
    assert s["updated_in_context"] == 1.0 and s["stale_message_unmarked"] is None


def test_contradiction_needs_both_statements_and_both_marked():
    both = [(["0"], "conflicting"), (["10"], "conflicting")]
    assert beam_current_scores("contradiction_resolution", CONTRA, both, order) == {
        "contradiction_in_context": 1.0, "contradiction_marked": 1.0}
    half = [(["0"], "conflicting"), (["8"], "current")]
    assert beam_current_scores("contradiction_resolution", CONTRA, half, order) == {
        "contradiction_in_context": 1.0, "contradiction_marked": 0.0}
    one = [(["0"], "conflicting")]
    assert beam_current_scores("contradiction_resolution", CONTRA, one, order)["contradiction_in_context"] == 0.0


def test_other_abilities_and_missing_groups_score_nothing():
    assert beam_current_scores("information_extraction", UPDATE, [(["12"], "current")], order) == {}
    assert beam_current_scores("knowledge_update", None, [(["12"], "current")], order) == {}
    assert beam_current_scores("knowledge_update", {"original_info": ["4"], "updated_info": []}, [], order) == {}
    assert beam_current_scores("contradiction_resolution", {"first_statement": ["0"]}, [], order) == {}


def test_groups_qualified_for_a_user_scope():
    meta = {"rubric": [], "gold_groups": UPDATE}
    q = qualified_groups(meta, lambda t: f"c/{t}")
    assert q["gold_groups"] == {"original_info": ["c/4"], "updated_info": ["c/6", "c/12"]} and meta["gold_groups"] is UPDATE
    assert qualified_groups({"rubric": []}, lambda t: t) == {"rubric": []}
