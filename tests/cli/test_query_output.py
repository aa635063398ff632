"""What ``lychee-ray query`` prints: counts with the right plural, and the evidence in one order — by
score, highest first — in the text, in ``--json`` and in every result, while the context stays by date."""

from __future__ import annotations

import argparse
import json

from lychee_ray.query.explain import EvidenceRanks, SearchExplain
from lychee_ray.query.plan.model import QueryPlan, Route
from lychee_ray.query.rerank import RerankReport
from lychee_ray.query.results import EvidenceItem, QueryResult, QueryUsage


def item(i: str, score: float, day: str) -> EvidenceItem:
    return EvidenceItem(id=i, kind="record", conversation_id="trip-1", text=f"Note {i} about the lighthouse trip.",
                        type="event", session_date=f"{day}T10:00:00", source_turn_ids=[f"t-{i}"], score=score,
                        channels=["bm25"], routes=[0], tokens=8)


def result(evidence: list[EvidenceItem], explain: SearchExplain | None = None, routes: int = 1) -> QueryResult:
    plan = QueryPlan(question="When was the lighthouse trip?", backend="rules",
                     routes=[Route(goal="trip", search_texts=[f"lighthouse trip {n}"]) for n in range(routes)])
    return QueryResult(question_id="q-1", question=plan.question, question_date="2024-03-01", conversation_ids=["trip-1"],
                       plan=plan, evidence=evidence, context="(by date)", budget_tokens=500, pool_size=9,
                       usage=QueryUsage(backend="rules", context_tokens=30), timings_ms={"total": 1.0},
                       rerank=RerankReport(), explain=explain, answer="In March.")


def printed(res: QueryResult, capsys, as_json: bool = False) -> str:
    from lychee_ray.cli.query import print_result

    assert print_result(res, argparse.Namespace(json=as_json, search_only=False)) == 0
    return capsys.readouterr().out


def test_counts_are_singular_for_one_and_plural_otherwise(capsys):
    one = printed(result([item("a", 0.9, "2024-01-05")]), capsys)
    assert "Evidence (1 item, 30/500 tokens" in one and ", 1 route: " in one
    two = printed(result([item("a", 0.9, "2024-01-05"), item("b", 0.4, "2024-02-05")], routes=2), capsys)
    assert "Evidence (2 items, 30/500 tokens" in two and ", 2 routes: " in two
    assert "Evidence (0 items," in printed(result([]), capsys)


def test_text_and_json_list_the_evidence_by_score(capsys):
    by_date = [item("early", 0.2, "2024-01-01"), item("middle", 0.9, "2024-01-15"), item("late", 0.5, "2024-02-01"),
               item("tie", 0.5, "2024-02-20")]
    res = result(by_date)
    assert [e.id for e in res.evidence] == ["middle", "late", "tie", "early"]  # equal scores keep their date order
    text = printed(res, capsys)
    lines = [ln.strip() for ln in text.splitlines() if ln.startswith("  ")]
    assert [ln.split("[t-")[1].split("]")[0] for ln in lines] == ["middle", "late", "tie", "early"]
    body = json.loads(printed(res, capsys, as_json=True))
    assert [e["id"] for e in body["evidence"]] == ["middle", "late", "tie", "early"]
    assert body["evidence_order"] == "score" and body["context"] == "(by date)"
    assert [e["session_date"][:10] for e in body["evidence"]] == ["2024-01-15", "2024-02-01", "2024-02-20", "2024-01-01"]


def test_the_explain_figures_follow_their_evidence():
    ev = [item("a", 0.1, "2024-01-01"), item("b", 0.8, "2024-01-02")]
    ranks = [EvidenceRanks(id=e.id, kind="record", fused_score=e.score, ranks={"bm25": n + 1}, pool_positions=[n + 1])
             for n, e in enumerate(ev)]
    explain = SearchExplain(channels=["bm25"], pool=[], evidence=ranks, dropped=[], skipped={}, remaining_tokens=0)
    res = result(ev, explain)
    assert [e.id for e in res.evidence] == [r.id for r in res.explain.evidence] == ["b", "a"]
    again = QueryResult.model_validate_json(res.model_dump_json())  # a client reading the service's JSON
    assert [e.id for e in again.evidence] == ["b", "a"]


def test_an_extractive_answer_says_so_in_text_and_json(capsys):
    quoted = result([item("a", 0.9, "2024-01-05")]).model_copy(update={"answer_kind": "extractive"})
    assert printed(quoted, capsys).startswith("Answer (extractive, quoted from memory): In March.")
    assert json.loads(printed(quoted, capsys, as_json=True))["answer_kind"] == "extractive"
    assert printed(result([item("a", 0.9, "2024-01-05")]), capsys).startswith("Answer: In March.")
