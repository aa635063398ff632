"""``lychee-ray eval {locomo,longmemeval,beam}``: variants × questions → results.json, answers.parquet, report.md."""

from __future__ import annotations

import argparse
import json
import sys

from lychee_ray.api import evaluate
from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.eval.runners.run import EvalOptions
from lychee_ray.eval.setup.errors import EvalError
from lychee_ray.eval.setup.variants import DEFAULT_VARIANTS, VARIANTS, UnknownVariant, select_variants
from lychee_ray.names import DATASETS, JUDGE_PROTOCOLS, LLM_BACKENDS


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = ("Build memory with the Ray job (or reuse a store whose fingerprint matches), answer every "
                     "question on a Ray Data pipeline, judge (openai backend), and write RUN_DIR/results.json, "
                     "RUN_DIR/answers.parquet and RUN_DIR/report.md with plots. Re-running resumes. With --local "
                     "everything runs in this process, without Ray.")
    p.add_argument("dataset", choices=DATASETS)
    p.add_argument("--data", required=True, help="LoCoMo directory / LongMemEval JSON file / BEAM folder of conversation "
                                                 "folders (e.g. ../shared/data/beam/100K)")
    p.add_argument("--out", required=True, metavar="RUN_DIR", help="run directory (stores, answers, results, report)")
    p.add_argument("--variant", nargs="+", default=None, metavar="NAME",
                   help=f"variants to run (default: {' '.join(DEFAULT_VARIANTS)}; 'all' = every one): {', '.join(VARIANTS)}")
    p.add_argument("--llm", choices=LLM_BACKENDS, default=None, help="LLM backend (default: llm.backend / auto)")
    p.add_argument("--judge-model", default=None, metavar="M", help="judge model (default: eval.judge_model or llm.model)")
    p.add_argument("--no-judge", action="store_true", help="skip the LLM judge (judge_accuracy = null)")
    p.add_argument("--judge", choices=JUDGE_PROTOCOLS, default=None, dest="judge_protocol",
                   help="BEAM with a judge: rubric = the benchmark's LLM judge over the rubric statements (score per "
                        "statement; default: eval.beam.judge) | answer = CORRECT/WRONG against the gold answer")
    p.add_argument("--limit", type=int, default=None, metavar="N", help="first N questions per conversation")
    p.add_argument("--conversations", default=None, metavar="N|ID,ID",
                   help="the first N conversations, or a comma-separated list of conversation ids")
    p.add_argument("--reuse-store", action="append", default=[], metavar="DIR",
                   help="an existing store to reuse when its fingerprint matches (repeatable)")
    p.add_argument("--no-report", action="store_true", help="skip report.md and the plots")
    p.add_argument("--quiet", action="store_true", help="no progress lines")
    p.add_argument("--local", action="store_true",
                   help="build and answer in this process (threads, no Ray); same results and run directory")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if args.judge_protocol is not None:
        beam = cfg.eval.beam.model_copy(update={"judge": args.judge_protocol})
        cfg = cfg.model_copy(update={"eval": cfg.eval.model_copy(update={"beam": beam})})
    try:
        variants = select_variants(args.variant)
    except UnknownVariant as e:
        print(f"lychee-ray eval: {e}", file=sys.stderr)
        return 2
    if args.limit is not None and args.limit < 1:
        print("lychee-ray eval: --limit must be >= 1", file=sys.stderr)
        return 2
    opts = EvalOptions(
        dataset=args.dataset, data=args.data, out=args.out, variants=variants, llm=args.llm, judge_model=args.judge_model,
        judge=not args.no_judge, limit=args.limit, conversations=args.conversations, reuse_stores=args.reuse_store,
        progress=not args.quiet, report=not args.no_report, local=args.local,
    )
    try:
        res = evaluate(cfg, opts)
    except EvalError as e:
        print(f"lychee-ray eval: {e}", file=sys.stderr)
        return 2
    shown = ("judge_accuracy", "rubric_score", "evidence_recall", "answer_in_context", "f1", "bleu1", "context_tokens",
             "query_prompt_tokens", "construction_tokens_per_conversation", "query_tokens_per_question", "questions",
             "failed_questions")
    summary = {name: {k: v.get(k) for k in (*shown, *[c for c in v if c.startswith("content_recall_")])}
               for name, v in res["variants"].items()}
    print(json.dumps({"dataset": res["dataset"], "backend": res["backend"], "out": str(args.out), "variants": summary}, indent=1))
    failed = sum(v.get("failed_questions", 0) for v in res["variants"].values())
    return 1 if failed else 0
