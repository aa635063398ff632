"""``lychee-ray eval``: variants, question selection, answering kinds, resume, aggregation, report,
and two end-to-end runs on local Ray (rules; openai against the test server with the judge).

Embeddings come from the OpenAI-compatible test server (deterministic pseudo-vectors) so that no
test loads the MiniLM model; the conversations are a tiny LoCoMo-format sample.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from lychee_ray.api import evaluate
from lychee_ray.config import LycheeConfig, load_config
from lychee_ray.eval.runners.aggregate import aggregate, score_row
from lychee_ray.eval.runners.answerer import QuestionAnswerer
from lychee_ray.eval.runners.resume import done_ok, load_answers, write_part
from lychee_ray.eval.runners.run import EvalOptions, run_eval
from lychee_ray.eval.runners.stores import StoreInfo
from lychee_ray.eval.setup.datasets import (
    load_dataset,
    question_payload,
    select_conversations,
)
from lychee_ray.eval.setup.errors import EvalError
from lychee_ray.eval.setup.variants import (
    VARIANTS,
    UnknownVariant,
    build_config,
    build_key,
    expected_fingerprint,
    fixed_window_for,
    query_config,
    select_variants,
    variant_key,
)
from lychee_ray.testing.fake_llm import eval_reply
from lychee_ray.testing.openai_server import OpenAIServer

TURNS_1 = [
    ("Anna", "Hi Ben! I adopted a puppy named Max from the shelter yesterday."),
    ("Ben", "That's great, Anna! I started violin lessons with my teacher Priya."),
    ("Anna", "Max loves chasing squirrels in the park near my house."),
    ("Ben", "My recital is scheduled for the spring concert in Boston."),
]
TURNS_2 = [
    ("Anna", "I booked a trip to Lisbon for the summer holidays."),
    ("Ben", "The hotel in Lisbon is close to the old harbour, I heard."),
    ("Anna", "My manager Luis asked me to lead the new budget project."),
    ("Ben", "I practise scales for forty minutes every evening."),
]
QA = [
    {"question": "What is the name of Anna's puppy?", "answer": "Max", "evidence": ["D1:1"], "category": 4},
    {"question": "Who teaches Ben the violin?", "answer": "Priya", "evidence": ["D1:2"], "category": 4},
    {"question": "Where is Anna travelling for the summer holidays?", "answer": "Lisbon", "evidence": ["D2:1"], "category": 1},
    {"question": "When did Anna adopt Max?", "answer": "7 May 2023", "evidence": ["D1:1"], "category": 2},
    {"question": "What does Anna's dog chase?", "adversarial_answer": "cats", "evidence": ["D1:3"], "category": 5},
]


def locomo_dir(tmp_path: Path, n: int = 2) -> Path:
    d = tmp_path / "locomo"
    d.mkdir(exist_ok=True)
    for i in range(n):
        sample = {"sample_id": f"t{i + 1}", "conversation": {
            "speaker_a": "Anna", "speaker_b": "Ben",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [{"speaker": s, "dia_id": f"D1:{j + 1}", "text": t} for j, (s, t) in enumerate(TURNS_1)],
            "session_2_date_time": "10:00 am on 20 May, 2023",
            "session_2": [{"speaker": s, "dia_id": f"D2:{j + 1}", "text": t} for j, (s, t) in enumerate(TURNS_2)],
        }, "qa": QA}
        (d / f"t{i + 1}.json").write_text(json.dumps(sample))
    return d


def base_sets(srv: OpenAIServer) -> list[str]:
    """Pseudo-embeddings from the test server (no model load), small Ray pools."""
    return ["embedding.backend=openai", f"embedding.base_url={srv.base_url}", "llm.api_key=test",
            "eval.max_actors=1", "eval.batch_size=4", "eval.flush_every=2", "ray.stages.build.max_concurrency=0",
            "ray.progress_interval_s=1"]


# ------------------------------------------------------------------------------------------------
# variants
# ------------------------------------------------------------------------------------------------


def test_variant_selection():
    assert [v.name for v in select_variants(["turn_rag", "lychee"])] == ["lychee", "turn_rag"]  # canonical order
    assert [v.name for v in select_variants(["lychee,fixed_window", "lychee"])] == ["lychee", "fixed_window"]
    assert [v.name for v in select_variants(None)] == ["lychee", "turn_rag", "full_context"]
    assert len(select_variants(["all"])) == len(VARIANTS) == 11
    assert {"turn_rag", "sentence_rag", "hybrid_rag", "passage_rag", "full_context"} <= {v.name for v in VARIANTS.values() if v.turns_only}
    with pytest.raises(UnknownVariant, match="known: lychee"):
        select_variants(["lychee", "nope"])


def test_variant_configs_and_shared_stores():
    cfg = LycheeConfig()
    v = VARIANTS
    rv = query_config(v["record_vector_only"], cfg).query.recall
    assert rv.record_depth > 0 and rv.node_record_depth == rv.turn_depth == rv.bm25_depth == rv.time_depth == 0
    nf = query_config(v["no_fusion"], cfg).query
    assert nf.planner.max_routes == 1 and nf.select.mmr_lambda == 1.0 and nf.recall.turn_depth == 0
    eager = build_config(v["eager"], cfg).segmenter
    assert (eager.method, eager.fixed_window, eager.exchange_mode) == ("fixed", 1, "turn")
    assert build_config(v["summary"], cfg).encoder.mode == "summary"
    assert build_config(v["fixed_window"], cfg, fixed_window=4).segmenter.fixed_window == 4
    # the method and its query-side ablations share one store; build ablations get their own
    keys = {n: build_key(v[n].build_label, build_config(v[n], cfg), "rules") for n in v}
    assert keys["lychee"] == keys["record_vector_only"] == keys["no_fusion"]
    assert len({keys["lychee"], keys["eager"], keys["summary"], keys["fixed_window"]}) == 4
    assert build_key("default", cfg, "rules") != build_key("default", cfg, "openai")
    # the window reproduces the mean segment length (in exchanges)
    assert fixed_window_for(5.8, 2.0, 3) == 3 and fixed_window_for(None, 2.0, 3) == 3 and fixed_window_for(1.2, 2.0, 3) == 1
    # answers depend on the variant key: query config, store, backend, judge
    fp = expected_fingerprint(cfg, "rules")
    k1 = variant_key(v["lychee"], cfg, fp, "rules", None)
    assert k1 == variant_key(v["lychee"], cfg, fp, "rules", None)
    assert k1 != variant_key(v["lychee"], cfg, fp, "openai", "judge-m")
    assert k1 != variant_key(v["lychee"], load_config(sets=["query.select.budget_tokens=500"], env={}), fp, "rules", None)


def test_encoder_mode_keeps_existing_fingerprints_and_summary_merges():
    import asyncio

    from lychee_ray.ingest.encode.base import EncodeRequest, SegmentTurn
    from lychee_ray.ingest.encode.factory import make_encoder

    atomic = LycheeConfig()
    summary = load_config(sets=["encoder.mode=summary"], env={})
    from lychee_ray.config import EncoderConfig

    secs = {k: atomic.model_dump(mode="json")[k] for k in ("segmenter", "encoder", "nodes", "tokenizer")}
    # a store built before encoder.rules existed hashed the flat encoder.rules_* keys
    secs["encoder"] = EncoderConfig.fingerprint_form(secs["encoder"])
    # a store built before encoder.mode (and later keys) existed: they are left out at their defaults
    for key in ("mode", "max_turn_chars", "wrong_script_share", "tools", "currency", "artifact_floor"):
        secs["encoder" if key != "max_turn_chars" else "segmenter"].pop(key)
    for key in ("truncated_attempts", "truncated_reply"):  # runtime keys: never in a fingerprint
        secs["encoder"].pop(key)
    import hashlib

    legacy = hashlib.sha256(json.dumps(secs, sort_keys=True).encode()).hexdigest()[:16]
    assert atomic.fingerprint("segmenter", "encoder", "nodes", "tokenizer") == legacy
    assert summary.fingerprint("segmenter", "encoder", "nodes", "tokenizer") != legacy
    turns = [SegmentTurn(index=i, turn_id=f"D1:{i + 1}", session_id="s1", session_date="2023-05-08T13:56:00", speaker=s,
                         role="user", content=t) for i, (s, t) in enumerate(TURNS_1)]
    req = EncodeRequest(conversation_id="c", user_id="c", segment_id="c-s0", segment_index=0, turns=turns,
                        speakers=["Anna", "Ben"])
    many = asyncio.run(make_encoder(atomic, "rules").encode(req)).output.records
    one = asyncio.run(make_encoder(summary, "rules").encode(req)).output.records
    assert len(many) > 1 and len(one) == 1
    assert one[0].source_turns == sorted({i for r in many for i in r.source_turns})
    assert "Max" in one[0].text and "Priya" in one[0].text


# ------------------------------------------------------------------------------------------------
# questions, resume, answering, aggregation (plain Python)
# ------------------------------------------------------------------------------------------------


def test_dataset_selection(tmp_path):
    d = locomo_dir(tmp_path, 2)
    cfg = LycheeConfig()
    ds = load_dataset("locomo", d, cfg)
    assert [c.conversation_id for c in ds.conversations] == ["locomo-t1", "locomo-t2"]
    assert len(ds.questions) == 8 and {q.category for q in ds.questions} == {"1", "2", "4"}  # category 5 excluded
    ds = load_dataset("locomo", d, cfg, conversations="1", limit=2)
    assert [q.question_id for q in ds.questions] == ["locomo-t1-q0", "locomo-t1-q1"]
    ds = load_dataset("locomo", d, cfg, conversations="locomo-t2")
    assert {q.conversation_id for q in ds.questions} == {"locomo-t2"}
    assert select_conversations(["a", "b", "c"], "2") == ["a", "b"]
    with pytest.raises(EvalError, match="unknown conversation") as err:
        select_conversations(["a"], "zz")
    assert err.value.kind == "unknown_conversation"
    with pytest.raises(EvalError, match="not found") as err:
        load_dataset("locomo", tmp_path / "missing", cfg)
    assert err.value.kind == "data_not_found"
    with pytest.raises(EvalError, match="needs an endpoint"):  # fails before Ray starts
        run_eval(load_config(env={}), EvalOptions(dataset="locomo", data=d, out=tmp_path / "run",
                                                  variants=select_variants(None), llm="openai"))
    with pytest.raises(EvalError) as err:  # a Ray run needs the Ray executor, which only lychee_ray.api picks
        run_eval(load_config(env={}), EvalOptions(dataset="locomo", data=d, out=tmp_path / "run2",
                                                  variants=select_variants(None), llm="rules"))
    assert err.value.kind == "no_executor"


def _row(qid: str, key: str = "k1", **kw):
    base = {"variant": "lychee", "variant_key": key, "question_id": qid, "conversation_id": "c", "category": "4",
            "question": "q", "gold": "g", "answer": "a", "answered_at": kw.pop("t", 1.0)}
    return {**base, **kw}


def test_resume_keeps_finished_answers_and_redoes_failed_ones(tmp_path):
    write_part(tmp_path, "lychee", [_row("q1"), _row("q2", answer_error="boom"), _row("q3", key="old")])
    write_part(tmp_path, "lychee", [_row("q2", answer="fixed", t=2.0)])  # the redo of q2 wins (latest)
    rows = load_answers(tmp_path, "lychee", "k1")
    assert set(rows) == {"q1", "q2"} and rows["q2"]["answer"] == "fixed" and rows["q2"]["answer_error"] is None
    assert set(load_answers(tmp_path, "lychee")) == {"q1", "q2", "q3"}
    assert done_ok(rows["q1"], judged=False) and not done_ok(rows["q1"], judged=True)  # a missing verdict is redone
    assert not done_ok(_row("x", answer_error="e"), judged=False)
    assert load_answers(tmp_path, "other") == {}


@pytest.fixture(scope="module")
def small_store(tmp_path_factory):
    """A rules store of the two sample conversations (in-process build, server embeddings)."""
    from lychee_ray.ingest.runner import run_local_build

    tmp = tmp_path_factory.mktemp("evalstore")
    d = locomo_dir(tmp, 2)
    srv = OpenAIServer().start()
    cfg = load_config(sets=base_sets(srv), env={})
    run_local_build(cfg, "locomo", d, tmp / "store", backend="rules")
    yield srv, cfg, d, tmp / "store"
    srv.stop()


def test_question_answerer_kinds(small_store):
    srv, cfg, d, store = small_store
    ds = load_dataset("locomo", d, cfg, conversations="1")
    q = question_payload(ds.questions[0])
    out = {}
    for kind in ("memory", "turn_rag", "sentence_rag", "hybrid_rag", "full_context"):
        spec = {"cfg_json": cfg.model_dump_json(), "backend": "rules", "kind": kind, "variant": kind, "variant_key": "k",
                "store": str(store)}
        qa = QuestionAnswerer(spec)
        out[kind] = qa.answer(q)
        qa.close()
    for kind, r in out.items():
        assert r["answer_error"] is None and r["answer"], kind
        assert r["answer_prompt_tokens"] > 0 and r["query_tokens"] >= r["answer_prompt_tokens"] and r["llm_calls"] == 0
        assert r["tokens_estimated"] is True
        assert r["plain_context_tokens"] > 0 and len(r["gold_word_coverage"]) == len(q["evidence"]), kind
        assert r["answer_in_context"] in (True, False), kind
    assert out["memory"]["plan_prompt_tokens"] > 0 and out["turn_rag"]["plan_prompt_tokens"] == 0
    assert out["memory"]["plain_context_tokens"] < out["memory"]["context_tokens"]  # ids and headers not measured
    assert len(out["full_context"]["evidence_turn_ids"]) == 8 and not out["full_context"]["context_truncated"]
    assert out["full_context"]["context_tokens"] >= out["turn_rag"]["context_tokens"] > 0
    assert out["full_context"]["gold_word_coverage"] == [1.0] * len(q["evidence"])
    # a conversation longer than the limit keeps its latest turns
    small = load_config(sets=[*base_sets(srv), "eval.full_context_max_tokens=60"], env={})
    qa = QuestionAnswerer({"cfg_json": small.model_dump_json(), "backend": "rules", "kind": "full_context",
                           "variant": "full_context", "variant_key": "k", "store": str(store)})
    r = qa.answer(q)
    qa.close()
    assert r["context_truncated"] and 0 < len(r["evidence_turn_ids"]) < 8 and r["context_tokens"] <= 60
    assert r["evidence_turn_ids"][-1] == "D2:4"


def test_aggregate_scores_and_report(small_store, tmp_path):
    from lychee_ray.eval.reports.report import write_report
    from lychee_ray.eval.runners.costs import construction_costs

    srv, cfg, d, store = small_store
    ds = load_dataset("locomo", d, cfg, conversations="1")
    rows = []
    for q in ds.questions:
        r = _row(q.question_id, category=q.category, conversation_id=q.conversation_id, gold=q.answer,
                 answer=q.answer if q.category == "4" else "no idea", evidence_turn_ids=list(q.evidence),
                 judge_verdict="CORRECT" if q.category == "4" else "WRONG", llm_calls=2, query_tokens=100,
                 plan_prompt_tokens=40, plan_completion_tokens=10, answer_prompt_tokens=45, answer_completion_tokens=5,
                 context_tokens=30, judge_calls=1, judge_prompt_tokens=20, judge_completion_tokens=3, latency_ms=5.0,
                 tokens_estimated=False)
        r.update(gold_word_coverage=[1.0] * len(q.evidence), answer_in_context=True, plain_context_tokens=20)
        r.update(score_row(r, q, "locomo", {}, [0.5, 0.8]))
        rows.append(r)
    assert all(r["evidence_recall"] == 1.0 for r in rows)
    info = StoreInfo(key="k", label="default", backend="rules", cfg=cfg, fingerprint="fp", path=store)
    costs = construction_costs(info, ds, tmp_path)
    c = costs["locomo-t1"]
    assert c["estimated"] and c["prompt_tokens"] > 0 and c["completion_tokens"] > 0 and c["calls"] == c["segments"] > 0
    assert c["store_bytes"] > c["turns_bytes"] > 0
    assert (tmp_path / "costs" / "k.json").exists()  # the estimate is cached in the run directory
    res = aggregate(ds, VARIANTS["lychee"], rows, True, backend="openai", costs=costs, store=info, query_wall_s=1.5)
    assert res["judge_accuracy"] == 0.5 and res["f1"] == 0.5 and res["evidence_recall"] == 1.0
    assert res["per_category"]["4"] == {"name": "single-hop", "questions": 2, "evidence_recall": 1.0,
                                        "content_recall_50": 1.0, "content_recall_80": 1.0, "answer_in_context": 1.0,
                                        "f1": 1.0, "bleu1": 1.0, "judge_accuracy": 1.0, "context_tokens": 30,
                                        "plain_context_tokens": 20, "query_prompt_tokens": 85,
                                        "plain_share": round(20 / 30, 4), "query_prompt_tokens_median": 85.0}
    assert res["query_tokens"]["query_prompt"] == 85 and res["per_split"] == {}  # locomo-t1 is in no split
    assert res["query_tokens_per_question"] == 100 and res["llm_calls"] == 8 and res["llm_calls_detail"]["judge"] == 4
    assert res["construction_tokens_per_conversation"] == c["prompt_tokens"] + c["completion_tokens"]
    naive = aggregate(ds, VARIANTS["turn_rag"], rows, True, backend="openai", costs=costs, store=info, query_wall_s=1.0)
    assert naive["construction_tokens_per_conversation"] == 0 and naive["store_bytes"] == c["turns_bytes"]
    results = {"dataset": "locomo", "backend": "rules", "judge": {"enabled": False}, "conversations": ["locomo-t1"],
               "questions": 4, "variants": {"lychee": {**res, "judge_accuracy": None}, "turn_rag": naive},
               "budget_tokens": 2000, "stores": {}, "content_thresholds": [0.5, 0.8], "answer_metrics": "LoCoMo F1"}
    write_report(tmp_path, results)
    md = (tmp_path / "report.md").read_text()
    assert "no judge" in md and "89.22%" in md and "1459.9K" in md and "single-hop" in md
    assert "content ≥80%" in md and "answer metrics: LoCoMo F1" in md and "query prompt tok" in md
    for png in ("accuracy_vs_construction.png", "per_category.png", "coverage.png", "query_tokens.png"):
        assert (tmp_path / png).stat().st_size > 1000


def test_segmentation_evaluator_delegates_to_the_segmentation_protocol(tmp_path):
    import numpy as np

    from lychee_ray.config import SegmenterConfig
    from lychee_ray.eval.runners.evaluators import SegmentationEvaluator
    from lychee_ray.eval.runners.segmentation import evaluate_dialogues

    corpus = [{"dial_id": "a", "utterances": ["hi", "how are you", "rain is coming", "take an umbrella"], "segments": [2, 2]},
              {"dial_id": "b", "utterances": ["new job", "congrats", "pizza tonight?"], "segments": [2, 1]}]
    (tmp_path / "seg.json").write_text(json.dumps(corpus))
    ev = SegmentationEvaluator.from_corpus(tmp_path / "seg.json", baselines=False)
    vectors = np.random.default_rng(0).normal(size=(len(ev.utterances), 8)).astype(np.float32)
    report = ev(vectors, SegmenterConfig())
    expected = evaluate_dialogues(ev.dialogues, vectors, SegmenterConfig(), baselines=False)
    assert report["dialogues"] == 2 and report["utterances"] == 7 and "texttiling_oracle" not in report
    assert {k: v for k, v in report.items() if k != "segmenter_seconds"} == \
        {k: v for k, v in expected.items() if k != "segmenter_seconds"}


LONG_TURN = " ".join(f"On day {i} Anna walked Max along the river and met her neighbour Clara there." for i in range(12))


def test_cost_estimate_counts_the_pieces_the_encoder_reads(tmp_path):
    """A turn over the segment cap (and over max_turn_chars) is estimated with the pieces the encoder read."""
    from lychee_ray.ingest.dryrun import encode_prompt_tokens, segment_request
    from lychee_ray.ingest.encode.base import EncodeOutput
    from lychee_ray.ingest.pipeline import speakers_of
    from lychee_ray.ingest.context import make_context
    from lychee_ray.ingest.runner import run_local_build
    from lychee_ray.eval.runners.costs import estimate_encode_tokens, stored_segments
    from lychee_ray.io.store import iter_markers, read_part
    from lychee_ray.llm.schema import schema_for
    from lychee_ray.text.tokens import count_tokens

    class Recorder:  # the rules encoder, remembering every request the build sent
        def __init__(self, inner):
            self.inner, self.backend, self.model, self.requests = inner, inner.backend, inner.model, []

        async def encode(self, request):
            self.requests.append(request)
            return await self.inner.encode(request)

    d = tmp_path / "locomo"
    d.mkdir()
    turns = [("Anna", "I adopted a puppy named Max."), ("Ben", LONG_TURN), ("Anna", "Max loves the park.")]
    sample = {"sample_id": "long", "conversation": {
        "speaker_a": "Anna", "speaker_b": "Ben", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": s, "dia_id": f"D1:{j + 1}", "text": t} for j, (s, t) in enumerate(turns)]}, "qa": QA}
    (d / "long.json").write_text(json.dumps(sample))
    with OpenAIServer() as srv:
        cfg = load_config(sets=[*base_sets(srv), "segmenter.max_segment_tokens=48", "segmenter.max_turn_chars=400"], env={})
        ctx = make_context(cfg, "rules")
        ctx.encoder = Recorder(ctx.encoder)
        run_local_build(cfg, "locomo", d, tmp_path / "store", backend="rules", ctx=ctx)
    conv = load_dataset("locomo", d, cfg).conversations[0]
    marker = next(iter(iter_markers(tmp_path / "store")))
    records, segments = read_part(tmp_path / "store", "records", marker), read_part(tmp_path / "store", "segments", marker)
    sent = {r.segment_index: r for r in ctx.encoder.requests}
    rebuilt = stored_segments(conv, segments.to_pylist(), cfg.segmenter, cfg.tokenizer.encoding)
    assert len(rebuilt) == len(sent) > 3
    for seg in rebuilt:
        ours = segment_request(conv, seg, speakers_of(conv)).turns
        assert [(t.turn_id, t.content) for t in ours] == [(t.turn_id, t.content) for t in sent[seg.segment_index].turns]
    pieces = [t.content for r in sent.values() for t in r.turns if t.turn_id == "D1:2"]
    assert len(pieces) > 1 and "".join(pieces) == LONG_TURN[:400]  # split at the cap, cut at max_turn_chars
    schema = count_tokens(json.dumps(schema_for(EncodeOutput)[0]), cfg.tokenizer.encoding)
    est = estimate_encode_tokens(conv, records, segments, cfg)
    assert est["calls"] == len(sent)
    assert est["prompt_tokens"] == sum(encode_prompt_tokens(r, cfg) + schema for r in sent.values())


@pytest.mark.subprocess
def test_local_eval_runs_without_ray(tmp_path):
    """``lychee-ray eval --local``: the whole run in one process, Ray never imported."""
    import subprocess
    import sys

    d = locomo_dir(tmp_path, 1)
    with OpenAIServer() as srv:
        argv = ["eval", "locomo", "--data", str(d), "--out", str(tmp_path / "run"), "--local", "--llm", "rules",
                "--variant", "lychee", "turn_rag", "--limit", "2", "--quiet", "--no-report"]
        for s in base_sets(srv):
            argv += ["--set", s]
        code = ("import json, sys; from lychee_ray.cli.main import main; rc = main(json.loads(sys.argv[1])); "
                "print(json.dumps({'rc': rc, 'ray': 'ray' in sys.modules}))")
        proc = subprocess.run([sys.executable, "-c", code, json.dumps(argv)], capture_output=True, text=True, timeout=600,
                              cwd=Path(__file__).resolve().parents[2])
    assert proc.returncode == 0, proc.stderr[-3000:]
    lines = proc.stdout.strip().splitlines()
    assert json.loads(lines[-1]) == {"rc": 0, "ray": False}
    res = json.loads((tmp_path / "run" / "results.json").read_text())
    assert res["questions"] == 2 and set(res["variants"]) == {"lychee", "turn_rag"}
    for v in res["variants"].values():
        assert v["questions"] == 2 and v["failed_questions"] == 0 and 0 <= v["evidence_recall"] <= 1
    assert res["variants"]["lychee"]["construction_tokens"]["estimated"] is True
    assert len(pq.read_table(tmp_path / "run" / "answers.parquet")) == 4


# ------------------------------------------------------------------------------------------------
# end to end on local Ray
# ------------------------------------------------------------------------------------------------


@pytest.mark.ray
def test_eval_rules_end_to_end_and_resume(ray_session, tmp_path):
    d = locomo_dir(tmp_path, 2)
    with OpenAIServer() as srv:  # embeddings only
        cfg = load_config(sets=base_sets(srv), env={})
        opts = EvalOptions(dataset="locomo", data=d, out=tmp_path / "run", variants=select_variants(["lychee", "turn_rag"]),
                           llm="rules", conversations="1", progress=False)
        res = evaluate(cfg, opts)
        assert res["backend"] == "rules" and res["judge"]["enabled"] is False and res["questions"] == 4
        for name in ("lychee", "turn_rag"):
            v = res["variants"][name]
            assert v["judge_accuracy"] is None and v["questions"] == 4 and v["failed_questions"] == 0
            assert 0 <= v["evidence_recall"] <= 1 and v["f1"] is not None and v["bleu1"] is not None
            assert set(v["per_category"]) == {"1", "2", "4"} and v["store_bytes"] > 0
        assert res["variants"]["lychee"]["construction_tokens"]["estimated"] is True
        assert res["variants"]["lychee"]["construction_tokens_per_conversation"] > 0
        assert res["variants"]["lychee"]["index_build_s"] > 0
        assert res["variants"]["turn_rag"]["construction_tokens_per_conversation"] == 0
        run = tmp_path / "run"
        assert "no judge" in (run / "report.md").read_text() and (run / "per_category.png").exists()
        table = pq.read_table(run / "answers.parquet").to_pylist()
        assert len(table) == 8 and {r["variant"] for r in table} == {"lychee", "turn_rag"}
        assert all(r["judge_verdict"] is None for r in table)
        parts = sorted((run / "answers").rglob("*.parquet"))
        stores = sorted(p.name for p in (run / "stores").iterdir())
        assert len(stores) == 1  # turn_rag shares the lychee store
        # resume: nothing is rebuilt or re-answered
        again = evaluate(cfg, opts)
        assert sorted((run / "answers").rglob("*.parquet")) == parts
        assert again["variants"]["lychee"]["evidence_recall"] == res["variants"]["lychee"]["evidence_recall"]
        state = json.loads((run / "state.json").read_text())
        assert state["stores"][stores[0]]["last_build"]["built"] == 1


@pytest.mark.ray
def test_eval_openai_end_to_end_with_judge(ray_session, tmp_path):
    d = locomo_dir(tmp_path, 1)
    with OpenAIServer(handler=eval_reply) as srv:
        cfg = load_config(sets=[*base_sets(srv), f"llm.base_url={srv.base_url}", "llm.model=test-model"], env={})
        opts = EvalOptions(dataset="locomo", data=d, out=tmp_path / "run", variants=select_variants(["lychee", "turn_rag"]),
                           llm="openai", judge_model="judge-model", limit=3, progress=False)
        res = evaluate(cfg, opts)
        assert res["backend"] == "openai" and res["judge"] == {"enabled": True, "model": "judge-model", "note": None}
        lychee, naive = res["variants"]["lychee"], res["variants"]["turn_rag"]
        for v in (lychee, naive):
            assert v["questions"] == 3 and v["failed_questions"] == 0
            assert v["judge_accuracy"] is not None and 0 <= v["judge_accuracy"] <= 1
            assert v["llm_calls_detail"]["judge"] == 3 and v["judge_tokens_per_question"] > 0
            assert v["query_tokens"]["estimated"] is False and v["query_tokens_per_question"] > 0
        ct = lychee["construction_tokens"]
        assert ct["estimated"] is False and lychee["construction_tokens_per_conversation"] > 0
        assert lychee["llm_calls_detail"]["construction"] == ct["encode_calls_per_conversation"] > 0
        assert lychee["llm_calls_detail"]["query"] == 6  # plan + answer per question
        assert naive["llm_calls_detail"]["query"] == 3 and naive["query_tokens"]["plan_prompt"] == 0
        table = pq.read_table(tmp_path / "run" / "answers.parquet").to_pylist()
        assert len(table) == 6 and all(r["judge_verdict"] in ("CORRECT", "WRONG") for r in table)
        assert all(r["judge_prompt_tokens"] > 0 and r["answer_prompt_tokens"] > 0 for r in table)
        judge_bodies = [r.body for r in srv.chat_requests() if "Gold answer:" in json.dumps(r.body)]
        assert len(judge_bodies) == 6 and all(b["model"] == "judge-model" and b["temperature"] == 0 for b in judge_bodies)
        assert "judge accuracy" in (tmp_path / "run" / "report.md").read_text()
        # resume: no LLM call at all on a re-run
        n = len(srv.chat_requests())
        evaluate(cfg, opts)
        assert len(srv.chat_requests()) == n
