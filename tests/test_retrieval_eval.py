"""Evidence-recall evaluation: coverage maths, naive baseline, report shape, and the CLI end to end."""

from __future__ import annotations

import json

import pytest

from lychee_ray.models import QAItem
from lychee_ray.retrieval_eval import NaiveTurnRAG, coverage, evaluate_retrieval, last_session_date
from lychee_ray.tokens import count_tokens
from tests.test_query import conversation_spec, make_store


def test_coverage():
    assert coverage(["a", "b"], ["b", "c"]) == (0.5, True, False)
    assert coverage(["a"], ["a"]) == (1.0, True, True)
    assert coverage(["a", "b"], []) == (0.0, False, False)
    assert coverage([], ["a"]) == (0.0, False, False)


@pytest.fixture(scope="module")
def store(tmp_path_factory, embedder):
    from lychee_ray.query import MemoryStore

    root = make_store(tmp_path_factory.mktemp("reval"), embedder, [conversation_spec("c-1")])
    with MemoryStore.open(root, embedder=embedder, llm="rules") as st:
        yield st


def qa(qid, question, evidence, cat="4"):
    return QAItem(conversation_id="c-1", question_id=qid, question=question, answer="x", category=cat, evidence=evidence)


def test_naive_baseline_respects_budget(store, embedder):
    view = store.view("c-1")
    naive = NaiveTurnRAG(view)
    qv = embedder.encode(["pottery class"])[0]
    covered, ctx, tokens = naive.select(qv, 60)
    assert 0 < tokens == count_tokens(ctx) <= 60 and covered[0] == "D2:2" or "D2:2" in covered
    assert ctx.startswith("## session ")
    assert naive.select(qv, 0) == ([], "", 0)
    everything = naive.select(qv, 10_000)[0]
    assert sorted(everything) == sorted(view.turn_ids)


def test_evaluate_report_shape(store):
    qs = [
        qa("q1", "When did Melanie sign up for a pottery class?", ["D2:2"]),
        qa("q2", "Where did Caroline move from?", ["D2:3"], cat="1"),
        qa("q3", "What do Melanie's kids like?", ["D1:4", "D2:4"], cat="1"),
    ]
    report, rows = evaluate_retrieval(store, qs, budget_tokens=120)
    assert report["questions"] == 3 and report["budget_tokens"] == 120
    for system in ("lychee", "naive_rag"):
        s = report[system]
        assert set(s) >= {"recall", "any", "all", "context_tokens", "query_prompt_tokens", "per_category"}
        assert set(s["per_category"]) == {"1", "4"} and s["per_category"]["1"]["questions"] == 2
        assert 0 <= s["all"] <= s["any"] <= 1 and 0 <= s["recall"] <= 1
        assert s["context_tokens"] <= 120
    assert report["lychee"]["query_prompt_tokens"] > report["lychee"]["context_tokens"]
    by = {r.question_id: r for r in rows}
    assert by["q1"].lychee.recall == 1.0 and by["q2"].lychee.recall == 1.0
    assert last_session_date(store.view("c-1")).date().isoformat() == "2023-06-09"


LOCOMO_SAMPLE = {
    "sample_id": "t1",
    "conversation": {
        "speaker_a": "Caroline", "speaker_b": "Melanie",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [
            {"speaker": "Caroline", "dia_id": "D1:1", "text": "I went to a LGBTQ support group yesterday and it was so powerful."},
            {"speaker": "Melanie", "dia_id": "D1:2", "text": "That's amazing! I painted a sunrise over the lake last week."},
            {"speaker": "Caroline", "dia_id": "D1:3", "text": "I'm researching adoption agencies because I want a family."},
            {"speaker": "Melanie", "dia_id": "D1:4", "text": "My kids love dinosaurs and we go camping in the mountains."},
        ],
        "session_2_date_time": "10:00 am on 9 June, 2023",
        "session_2": [
            {"speaker": "Caroline", "dia_id": "D2:1", "text": "I gave a speech at a school last week about my journey."},
            {"speaker": "Melanie", "dia_id": "D2:2", "text": "I signed up for a pottery class yesterday, it is so relaxing."},
        ],
    },
    "qa": [
        {"question": "When did Caroline go to the LGBTQ support group?", "answer": "7 May 2023", "evidence": ["D1:1"], "category": 2},
        {"question": "What did Caroline research?", "answer": "Adoption agencies", "evidence": ["D1:3"], "category": 1},
        {"question": "What did Melanie sign up for?", "answer": "pottery class", "evidence": ["D2:2"], "category": 4},
        {"question": "Adversarial?", "answer": "n/a", "evidence": ["D1:2"], "category": 5},
    ],
}


def test_build_and_eval_retrieval_cli(tmp_path, embedder, capsys):
    from lychee_ray.cli import main
    from lychee_ray.config import LycheeConfig
    from lychee_ray.runner import make_context, run_local_build

    data = tmp_path / "locomo"
    data.mkdir()
    (data / "t1.json").write_text(json.dumps(LOCOMO_SAMPLE))
    cfg = LycheeConfig()
    summary = run_local_build(cfg, "locomo", data, tmp_path / "mem", backend="rules", ctx=make_context(cfg, "rules", embedder=embedder))
    assert summary.built == 1
    out = tmp_path / "r.json"
    assert main(["eval-retrieval", "--memory", str(tmp_path / "mem"), "--data", str(data), "--budget-tokens", "300",
                 "--out", str(out), "--per-question"]) == 0
    rep = json.loads(out.read_text())
    assert rep["questions"] == 3  # category 5 excluded
    assert rep["lychee"]["recall"] == 1.0 and rep["lychee"]["context_tokens"] <= 300
    assert len(rep["details"]) == 3 and "naive_rag" in rep
    capsys.readouterr()
    # the query command on the same store
    assert main(["query", "--memory", str(tmp_path / "mem"), "--conversation", "locomo-t1", "--llm", "rules",
                 "--question-date", "2023-07-01", "--json", "What did Melanie sign up for?"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert "pottery" in res["answer"] and res["usage"]["query_prompt_tokens"] > 0
    assert main(["query", "--memory", str(tmp_path / "mem"), "--conversation", "nope", "--llm", "rules", "q?"]) == 2
