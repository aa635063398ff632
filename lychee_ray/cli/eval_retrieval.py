"""``lychee-ray eval-retrieval``: id and content coverage of the selected context vs baselines at the same budget (no LLM)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.eval.baselines.factory import BASELINES
from lychee_ray.eval.reports.retrieval_table import retrieval_markdown
from lychee_ray.eval.runners.evaluators import RetrievalEvaluator
from lychee_ray.eval.runners.retrieval import LOCOMO_CATEGORIES, question_rows
from lychee_ray.io.adapters.registry import format_names
from lychee_ray.io.adapters import detect_format
from lychee_ray.memory import MemoryStore
from lychee_ray.names import BEAM, CONVERSATION_SCOPE, LOCOMO, RULES_BACKEND, SCOPES


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory", required=True, help="memory store directory")
    p.add_argument("--data", required=True,
                   help="dataset with QA and gold evidence (e.g. ../shared/data/locomo, ../shared/data/beam/100K)")
    p.add_argument("--format", default=None, choices=format_names(),
                   help="format of --data (default: detected; agent logs get questions derived from their tool traffic)")
    p.add_argument("--budget-tokens", type=int, default=None, help="context token budget (default: query.select.budget_tokens)")
    p.add_argument("--categories", default=None, help="comma-separated categories (default for locomo: 1,2,3,4; else all)")
    p.add_argument("--limit", type=int, default=None, help="first N questions only (quick checks)")
    p.add_argument("--scope", choices=SCOPES, default=CONVERSATION_SCOPE,
                   help="ask each question of its conversation (default) or of all of its owner's conversations "
                        "(lychee's user-scoped search; the baselines over the union of those turns)")
    p.add_argument("--baselines", default=None,
                   help="comma-separated baselines (turn_rag,sentence_rag,hybrid_rag,passage_rag,full_context; "
                        "default: eval.retrieval_baselines, on BEAM eval.beam.retrieval_baselines; 'none' for lychee only)")
    p.add_argument("--per-question", action="store_true", help="add per-question rows to the output file")
    p.add_argument("--markdown", default=None, help="also write the tables (overall, per category, per split) here")
    p.add_argument("--replaced-values", default=None, metavar="JSON",
                   help="question id -> the values its update replaced (a JSON object of lists): knowledge-update "
                        "questions are then scored stale by value (docs/current-memory.md)")
    p.add_argument("--out", default=None, help="write the JSON report here (it is printed either way)")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if not Path(args.data).exists():
        print(f"lychee-ray eval-retrieval: data not found: {args.data}", file=sys.stderr)
        return 2
    try:
        store = MemoryStore.open(args.memory, cfg, llm=RULES_BACKEND)
    except FileNotFoundError as e:
        print(f"lychee-ray eval-retrieval: {e}", file=sys.stderr)
        return 2
    if args.format is None:
        found = detect_format(args.data)
        if found is None:
            print(f"lychee-ray eval-retrieval: cannot tell the format of {args.data}; give --format", file=sys.stderr)
            return 2
        args.format = found.format
    cats = args.categories.split(",") if args.categories else (LOCOMO_CATEGORIES if args.format == LOCOMO else None)
    baselines = None
    if args.baselines is not None:
        baselines = [] if args.baselines.strip() == "none" else [b.strip() for b in args.baselines.split(",") if b.strip()]
        bad = [b for b in baselines if b not in BASELINES]
        if bad:
            print(f"lychee-ray eval-retrieval: unknown baseline(s) {', '.join(bad)}; known: {', '.join(BASELINES)}",
                  file=sys.stderr)
            return 2
    elif args.format == BEAM:
        baselines = list(cfg.eval.beam.retrieval_baselines)
    evaluate = RetrievalEvaluator.from_data(args.format, args.data, cats, args.limit, args.budget_tokens, baselines,
                                            cfg.eval.agentlog, args.scope)
    if not evaluate.questions:
        print("lychee-ray eval-retrieval: no questions with gold evidence", file=sys.stderr)
        return 1
    if args.replaced_values:
        try:
            values = json.loads(Path(args.replaced_values).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            print(f"lychee-ray eval-retrieval: cannot read --replaced-values: {e}", file=sys.stderr)
            return 2
        if not isinstance(values, dict) or not all(isinstance(v, list) and all(isinstance(x, str) for x in v)
                                                   for v in values.values()):
            print("lychee-ray eval-retrieval: --replaced-values must be a JSON object of question id -> list of "
                  "strings", file=sys.stderr)
            return 2
        matched = evaluate.annotate_replaced_values(values)
        if matched["unknown_question_ids"]:
            print(f"eval-retrieval: {len(matched['unknown_question_ids'])} annotated question id(s) not among the "
                  f"questions: {matched['unknown_question_ids'][:5]}", file=sys.stderr)

    def progress(done: int, total: int) -> None:
        if done % 200 == 0 or done == total:
            print(f"eval-retrieval: {done}/{total} questions", file=sys.stderr)

    with store:
        report, results = evaluate(store, progress)
    print(json.dumps(report, indent=1))
    if args.out:
        out = dict(report)
        if args.per_question:
            out["details"] = question_rows(results, with_covered=True)
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(json.dumps(out, indent=1), encoding="utf-8")
    if args.markdown:
        Path(args.markdown).parent.mkdir(parents=True, exist_ok=True)
        Path(args.markdown).write_text(retrieval_markdown(report), encoding="utf-8")
    return 0 if report["questions"] else 1
