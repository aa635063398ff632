"""Choose the query defaults on the LoCoMo **dev** split (issue 27), and check them on the test split.

    python benchmarks/tune_retrieval.py --memory /tmp/figs/base_store --split dev \
        --out benchmarks/results/retrieval_tuning_dev.json

Loads one store once and runs ``eval-retrieval``'s own measurement (:func:`evaluate_retrieval`) for
every variant of a small grid of query settings (``--variant NAME:key=value,key=value``; the
built-in grid when none is given) at every budget (``--budgets``), next to the hybrid BM25 + dense
turn RAG baseline at the same budget. Questions are restricted to one half of ``eval.locomo_split``
(``--split dev`` chooses; ``--split test`` only reports).

Choice rule (fixed before running): the variant with the highest mean content coverage (>=50 %)
over the budgets, among those whose median query prompt (planner + answer) at the smallest budget
is <= ``--max-query-tokens``; ties within ``--tie`` go to the higher answer-in-context. The JSON
holds every variant's figures, per budget, and the pick.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.config import load_config
from lychee_ray.eval.runners.retrieval import LOCOMO_CATEGORIES, evaluate_retrieval, load_questions
from lychee_ray.eval.setup.datasets import conversation_split
from lychee_ray.memory import MemoryStore

DATA = ROOT.parent / "shared" / "data" / "locomo"

# The grid: one knob moved at a time from the defaults, plus the previous selection (``items``).
GRID: dict[str, list[str]] = {
    "defaults": [],
    "window1": ["query.select.turn_window=1"],
    "window0": ["query.select.turn_window=0"],
    "notes0": ["query.select.notes_per_turn=0"],
    "notes2": ["query.select.notes_per_turn=2"],
    "lift0.5": ["query.select.record_lift=0.5"],
    "lift2": ["query.select.record_lift=2.0"],
    "cost0": ["query.select.cost_exponent=0"],
    "mmr1": ["query.select.mmr_lambda=1.0"],
    "hybrid_heavy": ["query.fusion.weights.turns=2", "query.fusion.weights.turn_bm25=2"],
    "no_turn_bm25": ["query.recall.turn_bm25_depth=0"],
    "items": ["query.select.units=items"],
}

SUMMARY_KEYS = ("recall", "content_recall_50", "content_recall_80", "answer_in_context", "context_tokens",
                "plain_tokens", "query_prompt_tokens")


def parse_variant(text: str) -> tuple[str, list[str]]:
    """``NAME:key=value,key=value`` → (name, ``--set`` items)."""
    name, _, sets = text.partition(":")
    return name, [s for s in sets.split(",") if s]


def figures(report: dict[str, Any], results: list[Any], system: str) -> dict[str, Any]:
    """One system's headline figures plus the median query prompt and plain-token share."""
    out = {k: report[system].get(k) for k in SUMMARY_KEYS}
    prompts = [r.systems[system].query_prompt_tokens for r in results]
    out["query_prompt_tokens_median"] = statistics.median(prompts) if prompts else None
    ctx = out["context_tokens"] or 0
    out["plain_share"] = round(out["plain_tokens"] / ctx, 4) if ctx else None
    out["per_category"] = {c: {k: v.get(k) for k in ("content_recall_50", "answer_in_context")}
                           for c, v in report[system].get("per_category", {}).items()}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memory", required=True, help="a rules store of the LoCoMo conversations")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--split", choices=("dev", "test"), default="dev")
    ap.add_argument("--budgets", default="1500,2000")
    ap.add_argument("--variant", action="append", default=[], help="NAME:key=value,... (repeatable; default: GRID)")
    ap.add_argument("--max-query-tokens", type=int, default=2000)
    ap.add_argument("--tie", type=float, default=0.002, help="content-coverage difference counted as a tie")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    budgets = [int(b) for b in args.budgets.split(",")]
    variants = dict(parse_variant(v) for v in args.variant) if args.variant else GRID
    base = load_config(env={})
    questions = [q for q in load_questions("locomo", args.data, LOCOMO_CATEGORIES)
                 if conversation_split(base, q.conversation_id) == args.split]
    out: dict[str, Any] = {"split": args.split, "questions": len(questions), "budgets": budgets, "memory": args.memory,
                           "variants": {}, "hybrid_rag": {}}
    store = MemoryStore.open(args.memory, base, llm="rules")
    try:
        for budget in budgets:
            t0 = time.perf_counter()
            report, results = evaluate_retrieval(store, questions, budget, baselines=["hybrid_rag"])
            out["hybrid_rag"][str(budget)] = figures(report, results, "hybrid_rag")
            out["variants"].setdefault("defaults", {})[str(budget)] = figures(report, results, "lychee")
            print(f"budget {budget}: hybrid_rag {out['hybrid_rag'][str(budget)]['content_recall_50']} "
                  f"defaults {out['variants']['defaults'][str(budget)]['content_recall_50']} "
                  f"({time.perf_counter() - t0:.0f} s)", flush=True)
        for name, sets in variants.items():
            if name == "defaults" and not sets:
                continue
            cfg = load_config(sets=sets, env={})
            store.config, store.qcfg = cfg, cfg.query
            for budget in budgets:
                report, results = evaluate_retrieval(store, questions, budget, baselines=[])
                f = out["variants"].setdefault(name, {"sets": sets})[str(budget)] = figures(report, results, "lychee")
                print(f"{name} @ {budget}: content50 {f['content_recall_50']} answer {f['answer_in_context']} "
                      f"prompt median {f['query_prompt_tokens_median']}", flush=True)
    finally:
        store.close()

    def key(name: str) -> tuple[float, float]:
        v = out["variants"][name]
        return (sum(v[str(b)]["content_recall_50"] for b in budgets) / len(budgets),
                sum(v[str(b)]["answer_in_context"] for b in budgets) / len(budgets))

    feasible = [n for n, v in out["variants"].items()
                if v[str(min(budgets))]["query_prompt_tokens_median"] <= args.max_query_tokens]
    best = max((key(n)[0] for n in feasible), default=None)
    tied = [n for n in feasible if best is not None and key(n)[0] >= best - args.tie]
    out["pick"] = max(tied, key=lambda n: key(n)[1]) if tied else None
    out["rule"] = (f"max mean content_recall_50 over {budgets}; median query prompt <= {args.max_query_tokens} at "
                   f"{min(budgets)}; ties within {args.tie} -> higher answer_in_context")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print("pick:", out["pick"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
