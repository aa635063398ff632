"""In-process query latency, excluding LLM time: median and p95 per stage over the LoCoMo questions.

    python benchmarks/query_latency.py --memory /tmp/locomo_rules --out benchmarks/results/query_latency.json

Runs ``MemoryStore.search`` with the rules planner (no LLM call; planning is a few string matches)
for every question of the dataset with gold evidence, after loading every conversation once (the
serving steady state: conversations are in the LRU cache). Stages: plan, embed (the one batched
query-embedding call), channels (all recall channels of all routes), fusion, rerank (off by
default), selection; total = all of them. Conversation load time (tables, FAISS, BM25 build) is
reported separately, and the process's peak resident memory.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.eval.runners.retrieval import LOCOMO_CATEGORIES, last_session_date, load_questions  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402

STAGES = ("plan", "embed", "channels", "fusion", "rerank", "selection", "total")


def peak_rss_mib() -> float:
    """This process's peak resident memory: Linux's VmHWM (its own since exec; ``ru_maxrss`` also
    counts the memory of the process that forked it), else ``ru_maxrss``."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return round(int(line.split()[1]) / 1024, 1)
    except OSError:
        pass
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memory", required=True)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"))
    ap.add_argument("--format", default="locomo")
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit", type=int, default=None, help="first N questions only")
    ap.add_argument("--budget-tokens", type=int, default=None)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)

    cfg = load_config(sets=args.set)
    load_before = os.getloadavg()
    questions = load_questions(args.format, args.data, LOCOMO_CATEGORIES if args.format == "locomo" else None)
    if args.limit:
        questions = questions[: args.limit]
    store = MemoryStore.open(args.memory, cfg, llm="rules")
    cids = sorted({q.conversation_id for q in questions} & set(store.conversation_ids()))
    loads = {}
    for cid in cids:
        t0 = time.perf_counter()
        store.view(cid)
        loads[cid] = (time.perf_counter() - t0) * 1000
    dates = {cid: last_session_date(store.view(cid)) for cid in cids}
    store.search(cids[0], "warm-up question about the weekend", dates[cids[0]])  # model + thread pool warm
    per_stage: dict[str, list[float]] = {s: [] for s in STAGES}
    t_all = time.perf_counter()
    n = 0
    for q in questions:
        if q.conversation_id not in dates:
            continue
        res = store.search(q.conversation_id, q.question, dates[q.conversation_id], args.budget_tokens)
        for s in STAGES:
            per_stage[s].append(res.timings_ms.get(s, 0.0))
        n += 1
    wall = time.perf_counter() - t_all
    store.close()
    report = {
        "questions": n,
        "wall_s": round(wall, 2),
        "queries_per_s": round(n / wall, 2) if wall else None,
        "stages_ms": {s: {"median": round(statistics.median(v), 3), "p95": round(pct(v, 0.95), 3), "mean": round(statistics.fmean(v), 3)}
                      for s, v in per_stage.items() if v},
        # the process's peak resident memory: the loaded views, their indexes, the model
        "peak_rss_mib": peak_rss_mib(),
        "conversation_load_ms": {"median": round(statistics.median(loads.values()), 1), "max": round(max(loads.values()), 1),
                                 "conversations": len(loads)},
        "config": {"budget_tokens": args.budget_tokens or cfg.query.select.budget_tokens, "recall_threads": cfg.query.recall.threads,
                   "faiss_threads": cfg.query.recall.faiss_threads, "torch_threads": cfg.embedding.num_threads or "default",
                   "embedding": cfg.embedding.model or "all-MiniLM-L6-v2 (offline)"},
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform(),
                    # other work on the box inflates the tails: 1-minute load average before / after
                    "load_avg_1m": [round(load_before[0], 2), round(os.getloadavg()[0], 2)]},
        "note": "LLM time excluded: the rules planner makes no call and search() stops before the answer",
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
