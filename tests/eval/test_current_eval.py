"""Evaluating memory that stays current on agent logs: the current-state and history questions a log
gives (eval/setup/current_questions.py), their scores (eval/metrics/current.py) and the collateral of
a store's supersession links judged from structure (eval/metrics/collateral.py)."""

from __future__ import annotations

import asyncio

from lychee_ray.config import load_config
from lychee_ray.eval.metrics.collateral import conversation_collateral
from lychee_ray.eval.metrics.current import current_scores
from lychee_ray.eval.setup.current_questions import derive_current_questions
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.pipeline import build_conversation
from tests.ingest.test_current_memory import agent_log
from tests.reliability.test_bad_input import HashEmbedder


def test_a_log_gives_one_question_per_successful_change_after_a_lookup():
    qs = derive_current_questions(agent_log())
    cur = {q.meta["object"]: q for q in qs if q.category == "current"}
    # the flight change and the cancellation; the failed change gives none
    assert sorted(cur) == ["reservation M05KNL", "reservation UHDAHF"]
    flights, cancel = cur["reservation M05KNL"], cur["reservation UHDAHF"]
    assert flights.question == "What are the flights of reservation M05KNL now?"
    assert flights.meta["current"] == ["HAT110"] and flights.meta["replaced"] == ["HAT227"]
    assert flights.meta["replaced_turns"] == ["t1", "t2"] and flights.evidence == ["a3", "t3"]
    assert cancel.meta["field"] == "status" and cancel.meta["current"] == ["cancelled"]
    assert cancel.meta["state_ids"] == ["HAT001"]  # its old state's code no call named
    hist = [q for q in qs if q.category == "history"]
    assert len(hist) == 2 and hist[0].question.startswith("What were the flights of reservation M05KNL before it changed")


def test_scores_read_marks_and_replaced_values():
    meta = derive_current_questions(agent_log())[0].meta
    ctx = "flights: HAT110\nflights: HAT227"
    stale = [(["a1", "t1"], "returned: flights: HAT227", "current"), (["a3", "t3"], "flights: HAT110", "current")]
    marked = [(["a1", "t1"], "returned: flights: HAT227", "superseded"), (["a3", "t3"], "flights: HAT110", "current")]
    assert current_scores(meta, stale, ctx, False) == {"current_in_context": 1.0, "stale_unmarked": 1.0, "clean": 0.0,
                                                       "history_answerable": None}
    assert current_scores(meta, marked, ctx, False)["clean"] == 1.0
    assert current_scores(meta, marked[1:], "flights: HAT110", False)["clean"] == 1.0  # the old one not shown at all
    assert current_scores(meta, marked, ctx + " 2024-05-15", True)["history_answerable"] == 1.0
    assert current_scores(meta, marked, ctx, True)["history_answerable"] == 0.0  # no date of the change
    # the procedure line citing the old result names no replaced value: not stale
    assert current_scores(meta, [(["t1"], "ran get_reservation_details(reservation_id=M05KNL)", "current")],
                          "HAT110", False)["stale_unmarked"] == 0.0


def test_collateral_counts_links_whose_old_value_still_held():
    cfg = load_config(env={})
    conv = agent_log()
    recs = [r.to_row() for r in asyncio.run(build_conversation(conv, make_context(cfg, "rules", HashEmbedder()))).records]
    got = conversation_collateral(conv, recs)
    assert got.links > 0 and got.collateral == 0 and got.ended > 0 and got.judged > 0
    # a wrong link: the change's passengers record "replaces" the lookup's unchanged passengers
    old = next(r for r in recs if r["slot"] == "reservation m05knl · passengers" and "t1" in r["source_turn_ids"])
    new = next(r for r in recs if r["slot"] == "reservation m05knl · passengers" and "t3" in r["source_turn_ids"])
    new["supersedes"] = [*new["supersedes"], old["record_id"]]
    wrong = conversation_collateral(conv, recs)
    assert wrong.collateral == 1 and wrong.report()["collateral_share"] == round(1 / wrong.judged, 4)
