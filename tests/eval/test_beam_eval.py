"""``lychee-ray eval beam``: answers end to end in one process — with ``rules`` (no judge) and with
the scripted OpenAI-compatible test server as the model and the benchmark's rubric judge (no real
model; synthetic folders: tests/beam_data.py)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pyarrow.parquet as pq
import pytest

from lychee_ray.config import load_config
from lychee_ray.eval.runners.judge import LLMJudge, RubricReply, rubric_messages
from lychee_ray.eval.runners.run import EvalOptions, run_eval
from lychee_ray.eval.setup.datasets import load_dataset, question_payload
from lychee_ray.eval.setup.variants import select_variants
from lychee_ray.testing.fake_llm import eval_reply, rubric_reply
from lychee_ray.testing.openai_server import OpenAIServer
from tests.beam_data import write_split


def sets(srv: OpenAIServer) -> list[str]:
    """Pseudo-embeddings from the test server (no model load)."""
    return ["embedding.backend=openai", f"embedding.base_url={srv.base_url}", "llm.api_key=test", "eval.flush_every=2"]


def test_dataset_questions_carry_their_rubric(tmp_path: Path):
    data = write_split(tmp_path / "100K", 2)
    ds = load_dataset("beam", data, load_config(env={}), conversations="1")
    assert ds.conversation_ids == ["beam-1"] and len(ds.questions) == 7  # every ability, abstention included
    q = question_payload(next(q for q in ds.questions if q.category == "knowledge_update"))
    assert q["rubric"] == ["LLM response should state: 4 PM"] and q["evidence"] == ["4", "6"] and not q["abstention"]
    assert question_payload(next(q for q in ds.questions if q.category == "abstention"))["abstention"]


def test_rubric_reply_and_scores_snap():
    msgs = rubric_messages("When?", ["LLM response should state: March 29", "LLM response should state: 4 PM"],
                           "It ends on March 29.")
    assert rubric_reply({"messages": msgs})["scores"] == [1.0, 0.0]
    assert RubricReply.model_validate({"scores": [0.4, 2, -1, 0.8]}).scores == [0.5, 1.0, 0.0, 1.0]


def test_rubric_judge_wrong_count_is_no_verdict():
    class Client:
        def chat_json_sync(self, stage, msgs, model, **kw):
            usage = SimpleNamespace(prompt_tokens=10, completion_tokens=2, cached_tokens=0, estimated=False)
            return SimpleNamespace(parsed=model.model_validate({"scores": [1]}), usage=usage)

    out = LLMJudge(Client()).judge_rubric("q", ["a", "b"], "answer", 1.0, question_id="q1")
    assert out.verdict is None and "1 score(s) for 2 statement(s)" in out.error and out.calls == 1


def test_eval_beam_rules_without_a_judge(tmp_path: Path):
    data = write_split(tmp_path / "100K", 1)
    with OpenAIServer() as srv:
        cfg = load_config(sets=sets(srv), env={})
        res = run_eval(cfg, EvalOptions(dataset="beam", data=data, out=tmp_path / "run",
                                        variants=select_variants(["lychee", "passage_rag"]), llm="rules", local=True,
                                        progress=False))
    assert res["dataset"] == "beam" and res["judge"]["enabled"] is False and res["judge"]["protocol"] == "rubric"
    for v in res["variants"].values():
        assert v["questions"] == 7 and v["failed_questions"] == 0 and v["judge_accuracy"] is None
        assert v.get("rubric_score") is None and 0 <= v["evidence_recall"] <= 1 and v["answer_in_context"] is not None
        assert {"knowledge_update", "abstention", "preference_following"} <= set(v["per_category"])
    rows = pq.read_table(tmp_path / "run" / "answers.parquet").to_pylist()
    pref = next(r for r in rows if r["category"] == "preference_following")
    assert pref["f1"] is None and pref["judge_score"] is None  # a rubric, no gold answer: no F1
    assert "lychee-ray eval — beam" in (tmp_path / "run" / "report.md").read_text()


@pytest.mark.heavy
def test_eval_beam_with_the_rubric_judge(tmp_path: Path):
    data = write_split(tmp_path / "100K", 1)
    with OpenAIServer(handler=eval_reply) as srv:
        cfg = load_config(sets=[*sets(srv), f"llm.base_url={srv.base_url}", "llm.model=test-model"], env={})
        opts = EvalOptions(dataset="beam", data=data, out=tmp_path / "run", variants=select_variants(["lychee"]),
                           llm="openai", judge_model="judge-model", local=True, progress=False)
        res = run_eval(cfg, opts)
        rubric_calls = [r.body for r in srv.chat_requests() if "\nRubric:\n" in json.dumps(r.body).replace("\\n", "\n")]
        # six questions have a rubric; the one without is judged against its gold answer
        assert len(rubric_calls) == 6 and all(b["model"] == "judge-model" for b in rubric_calls)
        v = res["variants"]["lychee"]
        assert res["judge"] == {"enabled": True, "model": "judge-model", "note": None, "protocol": "rubric"}
        assert v["failed_questions"] == 0 and 0 <= v["rubric_score"] <= 1 and 0 <= v["judge_accuracy"] <= 1
        rows = pq.read_table(tmp_path / "run" / "answers.parquet").to_pylist()
        scored = [r for r in rows if r["judge_score"] is not None]
        assert len(scored) == 6 and all(0 <= r["judge_score"] <= 1 for r in scored)
        assert all(r["judge_verdict"] == ("CORRECT" if r["judge_score"] >= 1.0 else "WRONG") for r in scored)
        assert all(r["judge_verdict"] in ("CORRECT", "WRONG") for r in rows)
        assert "rubric score" in (tmp_path / "run" / "report.md").read_text()
        n = len(srv.chat_requests())
        run_eval(cfg, opts)  # resume: nothing is answered or judged again
        assert len(srv.chat_requests()) == n
        # the answer judge instead (CLI --judge answer): the answers are judged again, against the gold answer
        answer_cfg = load_config(sets=[*sets(srv), f"llm.base_url={srv.base_url}", "llm.model=test-model",
                                       "eval.beam.judge=answer"], env={})
        again = run_eval(answer_cfg, opts)
        assert again["judge"]["protocol"] == "answer" and "rubric_score" not in again["variants"]["lychee"]
        assert any("Gold answer:" in json.dumps(r.body) for r in srv.chat_requests()[n:])


@pytest.mark.parametrize("dataset", ["beam"])
def test_eval_cli_lists_beam(dataset: str, capsys):
    from lychee_ray.cli.main import main

    with pytest.raises(SystemExit):
        main(["eval", "--help"])
    assert dataset in capsys.readouterr().out
