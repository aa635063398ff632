"""``lychee-ray eval``: build memory, answer every benchmark question, judge, report (DESIGN §5).

Everything lives in one run directory (:mod:`lychee_ray.eval.setup.layout`) and every step resumes:

1. **Questions** (:mod:`~lychee_ray.eval.setup.datasets`): the selected conversations and questions.
2. **Stores** (:mod:`~lychee_ray.eval.runners.stores`): one per distinct build, reused when a store's
   fingerprint matches, else built by the executor.
3. **Answers** (:mod:`~lychee_ray.eval.runners.evaluators`, :mod:`~lychee_ray.eval.runners.resume`):
   each variant's unanswered questions, appended in parts; a re-run skips question ids already
   answered with the same variant key and redoes failed ones.
4. **Judge** (``openai`` only, :mod:`~lychee_ray.eval.runners.judge`): CORRECT/WRONG per answer; on
   BEAM with ``eval.beam.judge: rubric`` (the default) the benchmark's rubric judge, a score per
   rubric statement (``rubric_score``). With ``rules`` no judge runs and ``judge_accuracy`` is null.
5. **Metrics and costs** (:mod:`~lychee_ray.eval.runners.aggregate`, :mod:`~lychee_ray.eval.runners.costs`).

The executor runs steps 2-3: :class:`~lychee_ray.eval.runners.executors.LocalExecutor` in this process
(``local=True``, ``lychee-ray eval --local``; Ray is never imported) or
:class:`lychee_ray.ray.eval_job.RayExecutor` (Ray build job + Ray Data answering).
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from collections.abc import Callable

from lychee_ray.config import LycheeConfig
from lychee_ray.eval.reports.report import write_report
from lychee_ray.eval.runners.aggregate import (
    ANSWER_METRICS_NOTE,
    aggregate,
    score_row,
    write_answers_table,
)
from lychee_ray.eval.runners.costs import construction_costs
from lychee_ray.eval.runners.executors import Executor, LocalExecutor
from lychee_ray.eval.runners.judge import judge_config
from lychee_ray.eval.runners.resume import RunState, done_ok, load_answers
from lychee_ray.eval.runners.stores import StoreInfo, VariantStores, markers_for
from lychee_ray.eval.setup.datasets import (
    Dataset,
    load_dataset,
    question_payload,
    write_subset,
)
from lychee_ray.eval.setup.errors import EvalError
from lychee_ray.eval.setup.layout import RunLayout
from lychee_ray.eval.setup.variants import Variant, query_config, variant_key, with_rule_twins
from lychee_ray.io.store.fs import is_remote, root_string, store_root
from lychee_ray.llm.backend import resolve_backend
from lychee_ray.progress import EtaPolicy, ProgressDisplay
from lychee_ray.names import ANSWER_JUDGE, BEAM, DatasetName, JudgeProtocol, LLMBackend, LOCOMO, LONGMEMEVAL, OPENAI_BACKEND, RUBRIC_JUDGE

log = logging.getLogger(__name__)


@dataclass
class EvalOptions:
    """What ``lychee-ray eval`` was asked to do (the CLI's arguments, as a library call takes them)."""

    dataset: DatasetName
    data: str | Path
    out: str | Path
    variants: list[Variant]
    llm: str | None = None
    judge_model: str | None = None
    judge: bool = True
    limit: int | None = None
    conversations: str | int | None = None
    reuse_stores: list[str | Path] = field(default_factory=list)
    progress: bool = True
    report: bool = True
    local: bool = False  # build and answer in this process, without Ray


ExecutorFactory = Callable[[LycheeConfig, LLMBackend], Executor]


def local_executor(cfg: LycheeConfig, backend: LLMBackend) -> Executor:
    """The in-process executor (no Ray)."""
    return LocalExecutor(cfg, backend)


def _progress_printer(name: str, enabled: bool, cfg: LycheeConfig) -> Callable[[int, int], None] | None:
    """The build's progress display (lychee_ray.progress), for questions answered: a line from the
    first answer, then one per ``ray.progress_interval_s``, with an ETA once ``ray.progress_eta_*``
    say enough is done."""
    if not enabled:
        return None
    rc = cfg.ray
    display: list[ProgressDisplay] = []

    def show(done: int, total: int) -> None:
        if not display:
            display.append(ProgressDisplay(f"eval {name}", total, "questions", interval_s=rc.progress_interval_s,
                                           eta=EtaPolicy(rc.progress_eta_min_done_fraction, rc.progress_eta_min_elapsed_s)))
        d = display[0]
        d.total = total

        def rate() -> str:
            return f"{done / max(1e-9, d.clock.elapsed()):.2f} q/s"

        d.update(done, rate)
        if done >= total:
            d.close(rate())

    return show


def judge_protocol(cfg: LycheeConfig, dataset: DatasetName) -> JudgeProtocol:
    """How answers are judged: ``rubric`` on BEAM when ``eval.beam.judge`` says so, else ``answer``."""
    return cfg.eval.beam.judge if dataset == BEAM else ANSWER_JUDGE


def _key_extra(v: Variant, cfg: LycheeConfig, protocol: str) -> dict[str, Any]:
    """What else an answer depends on: the rubric judge and its pass score, the passage size."""
    extra: dict[str, Any] = {}
    if protocol == RUBRIC_JUDGE:
        extra["judge_protocol"] = [protocol, cfg.eval.beam.rubric_pass_score]
    if v.kind == "passage_rag":
        extra["passage_rag_max_tokens"] = cfg.eval.passage_rag_max_tokens
    return extra


def _evaluate_variant(v: Variant, info: StoreInfo, cfg: LycheeConfig, ds: Dataset, opts: EvalOptions, backend: LLMBackend,
                      jcfg: LycheeConfig | None, state: RunState, executor: Executor,
                      run_dir: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Answer what is missing for one variant, then score and aggregate all its answers."""
    judged = jcfg is not None
    cids = ds.conversation_ids
    qcfg = query_config(v, cfg)
    protocol = judge_protocol(cfg, ds.name)
    key = variant_key(v, qcfg, info.fingerprint, backend, jcfg.llm.model if jcfg is not None else None,
                      _key_extra(v, cfg, protocol if judged else "answer"))
    vstate = state.variant(v.name, key)
    have = {qid: r for qid, r in load_answers(run_dir, v.name, key).items() if done_ok(r, judged)}
    ok_cids = set(markers_for(info.path, cids)) if info.path is not None else set()
    todo = [question_payload(q) for q in ds.questions if q.question_id not in have and q.conversation_id in ok_cids]
    skipped = [q for q in ds.questions if q.conversation_id not in ok_cids]
    if skipped:
        log.warning("%s: %d question(s) skipped: their conversation is not in store %s", v.name, len(skipped), info.key)
    log.info("%s: %d answered earlier, %d to answer", v.name, len(have), len(todo))
    if todo:
        assert info.path is not None  # (todo holds only questions of conversations in the store)
        spec = {"cfg_json": qcfg.model_dump_json(), "backend": backend, "kind": v.kind, "variant": v.name,
                "variant_key": key, "store": root_string(info.path), "in_flight": cfg.eval.questions_in_flight,
                "judge_cfg_json": jcfg.model_dump_json() if jcfg is not None else None, "judge_protocol": protocol}
        t0 = time.perf_counter()
        executor.answer_questions(spec, todo, run_dir, _progress_printer(v.name, opts.progress, cfg))
        vstate["query_wall_s"] = round(float(vstate.get("query_wall_s", 0.0)) + time.perf_counter() - t0, 3)
        state.save()
    by_qid = {q.question_id: q for q in ds.questions}
    sessions = ds.turn_sessions()
    rows = [r for qid, r in load_answers(run_dir, v.name, key).items() if qid in by_qid]
    for r in rows:
        r.update(score_row(r, by_qid[r["question_id"]], ds.name, sessions.get(r["conversation_id"], {}),
                           cfg.eval.content_coverage_thresholds))
    rows.sort(key=lambda r: (cids.index(r["conversation_id"]), r["question_id"]))
    costs = construction_costs(info, ds, run_dir) if info.path is not None else None
    res = aggregate(ds, v, rows, judged, backend=backend, costs=costs, store=info,
                    query_wall_s=float(vstate.get("query_wall_s", 0.0)), cfg=cfg)
    res["questions_skipped"] = len(skipped)
    return res, rows


def run_eval(cfg: LycheeConfig, opts: EvalOptions, executor: Executor | None = None,
             executor_factory: ExecutorFactory | None = None) -> dict[str, Any]:
    """Everything ``lychee-ray eval`` does; returns the results.json content.

    The steps run on ``executor`` (kept open), or on one made by ``executor_factory(cfg, backend)``
    (closed here). With neither, ``opts.local`` runs in this process; the Ray executor lives in a
    higher layer (:func:`lychee_ray.api.evaluate` picks it), so this package never imports Ray.
    """
    t_run = time.perf_counter()
    run_dir = Path(opts.out).resolve()
    run_dir.mkdir(parents=True, exist_ok=True)
    layout = RunLayout(run_dir)
    backend = resolve_backend(cfg.llm, opts.llm)
    if backend == OPENAI_BACKEND and not (cfg.llm.base_url or cfg.llm.api_key):
        raise EvalError("no_endpoint", "--llm openai needs an endpoint: set OPENAI_BASE_URL / LYCHEE_LLM_BASE_URL or "
                                       "OPENAI_API_KEY (or llm.base_url)")
    judged = backend == OPENAI_BACKEND and opts.judge
    ds = load_dataset(opts.dataset, opts.data, cfg, opts.conversations, opts.limit)
    cids = ds.conversation_ids
    variants = with_rule_twins(opts.variants, cfg.eval.ablation_rule_twins)  # query rules reported both ways
    log.info("eval %s: %d conversation(s), %d question(s), variants %s, backend %s%s", ds.name, len(cids),
             len(ds.questions), ", ".join(v.name for v in variants), backend, "" if judged else " (no judge)")
    input_path = write_subset(ds, run_dir)
    state = RunState(run_dir)
    reuse = [store_root(p) if is_remote(p) else Path(p).resolve() for p in opts.reuse_stores]  # a store on s3:// too
    own_executor = executor is None
    if executor is None:
        if executor_factory is None:
            if not opts.local:
                raise EvalError("no_executor", "run_eval needs an executor for a Ray run: use lychee_ray.api.evaluate, "
                                               "or pass executor= / executor_factory=, or set local=True")
            executor_factory = local_executor
        ex = executor_factory(cfg, backend)
    else:
        ex = executor
    jcfg = judge_config(cfg, opts.judge_model) if judged else None
    results: dict[str, Any] = {}
    scored_rows: list[dict[str, Any]] = []
    try:
        stores = VariantStores(cfg, ds, backend, run_dir, input_path, state, reuse, ex.build_store, opts.progress)
        variant_store = stores.resolve(variants)
        for v in variants:
            results[v.name], rows = _evaluate_variant(v, variant_store[v.name], cfg, ds, opts, backend, jcfg, state, ex,
                                                      run_dir)
            scored_rows.extend(rows)
    finally:
        if own_executor:
            ex.close()

    out = {
        "dataset": ds.name,
        "backend": backend,
        "judge": {"enabled": judged, "model": jcfg.llm.model if jcfg is not None else None,
                  "note": None if judged else "no LLM judge with the rules backend: judge_accuracy is null; "
                                              "evidence recall, F1 and BLEU-1 are LLM-free",
                  **({"protocol": judge_protocol(cfg, ds.name)} if ds.name == BEAM else {})},
        "evidence_unit": "answer session" if ds.name == LONGMEMEVAL else "turn",
        "answer_metrics": ANSWER_METRICS_NOTE,
        "content_thresholds": list(cfg.eval.content_coverage_thresholds),
        "splits": {"dev": list(cfg.eval.locomo_split.dev), "test": list(cfg.eval.locomo_split.test)}
        if ds.name == LOCOMO else None,
        "conversations": cids,
        "questions": len(ds.questions),
        "limit_per_conversation": opts.limit,
        "variants": results,
        "stores": {k: {"path": str(s.path), "reused_from": s.reused_from, "fingerprint": s.fingerprint, "backend": s.backend,
                       "failed_conversations": s.failed} for k, s in stores.stores.items()},
        "budget_tokens": cfg.query.select.budget_tokens,
        "written_at": datetime.now(timezone.utc).isoformat(),
        "wall_s": round(time.perf_counter() - t_run, 2),
    }
    layout.results_path.write_text(json.dumps(out, indent=1), encoding="utf-8")
    write_answers_table(run_dir, scored_rows)
    if opts.report:
        write_report(run_dir, out)
    return out


__all__ = ["EvalOptions", "ExecutorFactory", "local_executor", "run_eval"]
