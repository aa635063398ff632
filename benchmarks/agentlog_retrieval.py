"""Agent-log memory, measured (issue 35): retrieval of tool-traffic questions vs the baselines at the
same budget, what the store holds, how it was segmented, and what construction costs.

    python benchmarks/agentlog_retrieval.py --data ../shared/data/agentlogs/tau_airline_dev.jsonl \
        --memory /tmp/tau_store --locomo-memory /tmp/locomo_store --out benchmarks/results/agentlog_retrieval.json

* **Retrieval** (no LLM): the questions ``eval-retrieval`` derives from the logs' tool traffic
  (lookup / change / failure; eval/setup/agentlog_questions.py), answered by lychee (rules planner)
  and by hybrid BM25 + dense message RAG, dense message RAG and full context, at every ``--budgets``
  value: answer in context, gold-message coverage, per question kind — each question asked of its own
  conversation, and of all of its user's conversations (lychee's user-scoped search; the baselines
  over the union of those conversations' messages: the scope an agent serving that user has).
* **Records**: counts per type, the share written from system prompts, attribution by role
  (eval/metrics/attribution.py), an example per type.
* **Segments**: turns per segment and cut reasons on the logs, next to LoCoMo's (``--locomo-memory``).
* **Construction cost** (dry run, no LLM): encode calls and prompt tokens vs one call per message.

The store is built with the embedded defaults (rules backend) when ``--memory`` does not exist.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.api import build_memory  # noqa: E402
from lychee_ray.ingest.dryrun import dry_run  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.eval.metrics.attribution import AttributionFigures, measure_attribution  # noqa: E402
from lychee_ray.eval.runners.retrieval import evaluate_retrieval, load_questions  # noqa: E402
from lychee_ray.io.adapters import detect_format  # noqa: E402
from lychee_ray.io.store import StoreReader  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402

BASELINES = ["hybrid_rag", "turn_rag", "full_context"]


def retrieval(store: MemoryStore, questions: list[Any], budgets: list[int]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for scope in ("conversation", "user"):
        for b in budgets:
            report, _ = evaluate_retrieval(store, questions, b, baselines=BASELINES, scope=scope)
            row: dict[str, Any] = {}
            for s in report["systems"]:
                r = report[s]
                row[s] = {"answer_in_context": r["answer_in_context"], "gold_message_recall": r["recall"],
                          "gold_message_all": r["all"], "context_tokens": r["context_tokens"],
                          "per_kind": {k: {"questions": v["questions"], "answer_in_context": v["answer_in_context"],
                                           "gold_message_recall": v["recall"]} for k, v in r["per_category"].items()}}
            row["lychee_minus_hybrid_rag"] = round(row["lychee"]["answer_in_context"] - row["hybrid_rag"]["answer_in_context"], 4)
            out.setdefault(scope, {})[str(b)] = row
    return out


def records(reader: StoreReader) -> dict[str, Any]:
    types: Counter[str] = Counter()
    context = 0
    attribution = AttributionFigures()
    examples: dict[str, str] = {}
    for cid in reader.conversation_ids():
        d = reader.load(cid)
        recs, turns, segs = d.records.to_pylist(), d.turns.to_pylist(), d.segments.to_pylist()
        ctx_segments = {s["segment_id"] for s in segs if s["close_reason"] == "system_prompt"}
        for r in recs:
            types[r["type"]] += 1
            context += r["segment_id"] in ctx_segments
            examples.setdefault(r["type"], r["text"])
        attribution.add(measure_attribution(recs, turns, d.user_id))
    n = sum(types.values())
    return {"records": n, "per_type": dict(sorted(types.items())), "types_present": len(types),
            "from_system_prompts": context, "from_system_prompts_share": round(context / max(1, n), 4),
            "attribution": attribution.to_dict(), "example_per_type": examples}


def segments(reader: StoreReader) -> dict[str, Any]:
    reasons: Counter[str] = Counter()
    sizes: list[int] = []
    for cid in reader.conversation_ids():
        for s in reader.load(cid, tables=["segments"]).segments.to_pylist():
            reasons[s["close_reason"]] += 1
            if s["close_reason"] != "system_prompt":
                sizes.append(len(s["turn_ids"]))
    return {"segments": sum(reasons.values()), "dialogue_segments": len(sizes),
            "turns_per_segment_mean": round(statistics.mean(sizes), 3) if sizes else None,
            "turns_per_segment_median": statistics.median(sizes) if sizes else None,
            "cut_reasons": dict(reasons.most_common())}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="agent-log file (openai / anthropic / chatgpt format)")
    p.add_argument("--memory", required=True, help="its store (built with the defaults when missing)")
    p.add_argument("--locomo-memory", default=None, help="a LoCoMo store: its segments are reported beside")
    p.add_argument("--budgets", type=int, nargs="+", default=[1000, 1500, 2000])
    p.add_argument("--no-dry-run", action="store_true", help="skip the construction-cost dry run")
    p.add_argument("--out", default="benchmarks/results/agentlog_retrieval.json")
    args = p.parse_args()
    cfg = load_config()
    fmt = detect_format(args.data)
    if fmt is None:
        print(f"cannot tell the format of {args.data}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    if not Path(args.memory).exists():
        summary = build_memory(args.data, args.memory, format=fmt.format, llm="rules")
        print(f"built {summary.built} conversations", file=sys.stderr)
    questions = load_questions(fmt.format, args.data, None, cfg.eval.agentlog)
    out: dict[str, Any] = {"data": str(args.data), "format": fmt.format, "memory": str(args.memory),
                           "questions": len(questions), "questions_per_kind": dict(Counter(q.category for q in questions))}
    with MemoryStore.open(args.memory, cfg, llm="rules") as store:
        out["retrieval"] = retrieval(store, questions, args.budgets)
    reader = StoreReader(args.memory)
    out["records"] = records(reader)
    out["segments"] = {"agent_logs": segments(reader)}
    if args.locomo_memory:
        out["segments"]["locomo"] = segments(StoreReader(args.locomo_memory))
    if not args.no_dry_run:
        total = dry_run(cfg, fmt.format, args.data)["total"]
        out["construction_dry_run"] = {k: total[k] for k in ("conversations", "turns", "encode_calls", "prompt_tokens",
                                                             "prompt_tokens_max", "eager_calls", "eager_prompt_tokens",
                                                             "eager_over_lychee_prompt_tokens")}
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1), encoding="utf-8")
    for scope, rows in out["retrieval"].items():
        for b, row in rows.items():
            print(f"{scope} scope, budget {b}: " + ", ".join(f"{s} {row[s]['answer_in_context']}" for s in ["lychee", *BASELINES])
                  + f"; lychee - hybrid {row['lychee_minus_hybrid_rag']:+.4f}")
    print(json.dumps({k: out[k] for k in ("records", "segments")}, indent=1))
    if "construction_dry_run" in out:
        print(json.dumps(out["construction_dry_run"]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
