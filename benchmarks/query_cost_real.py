"""Query cost and plan validity against a real model (issue 27; not run in CI).

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=sk-local LYCHEE_LLM_MODEL=local \\
      python benchmarks/query_cost_real.py --memory /tmp/figs/base_store --questions 12 \\
      --out benchmarks/results/query_cost_real.json

Runs the first ``--questions`` LoCoMo dev-split questions (spread over the dev conversations) through
``MemoryStore.query`` with the ``openai`` backend — planner and answer calls to whatever endpoint
is configured — at ``--budget`` context tokens, on an existing store. Per question it records the
provider-reported plan and answer prompt tokens, the offline estimate of the same prompts (what the
``rules`` backend reports, schema included), whether the plan parsed (no fallback) and what it
produced (routes, time constraints), the answer, and whether the gold answer occurs in it. The
summary gives medians and the fallback rate.
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

from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.eval.metrics.context import answer_in_context  # noqa: E402
from lychee_ray.eval.runners.retrieval import LOCOMO_CATEGORIES, last_session_date, load_questions  # noqa: E402
from lychee_ray.eval.setup.datasets import conversation_split  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402
from lychee_ray.text.dates import as_datetime  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "locomo"


def spread(questions: list[Any], n: int) -> list[Any]:
    """``n`` questions taken round-robin over the conversations (every conversation gets a turn)."""
    by: dict[str, list[Any]] = {}
    for q in questions:
        by.setdefault(q.conversation_id, []).append(q)
    out: list[Any] = []
    while len(out) < n and any(by.values()):
        for cid in list(by):
            if by[cid] and len(out) < n:
                out.append(by[cid].pop(0))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memory", required=True)
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--split", choices=("dev", "test"), default="dev")
    ap.add_argument("--questions", type=int, default=12)
    ap.add_argument("--budget", type=int, default=1500)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    cfg = load_config(sets=args.set)
    qs = [q for q in load_questions("locomo", args.data, LOCOMO_CATEGORIES)
          if conversation_split(cfg, q.conversation_id) == args.split]
    rows: list[dict[str, Any]] = []
    with MemoryStore.open(args.memory, cfg, llm="openai") as store:
        offline = MemoryStore.open(args.memory, cfg, llm="rules", embedder=store.embedder)
        for q in spread(qs, args.questions):
            qd = as_datetime(q.question_date) if q.question_date else last_session_date(store.view(q.conversation_id))
            t0 = time.perf_counter()
            res = store.query(q.conversation_id, q.question, qd, args.budget, question_id=q.question_id)
            wall = time.perf_counter() - t0
            est = offline.search(q.conversation_id, q.question, qd, args.budget, question_id=q.question_id).usage
            u = res.usage
            rows.append({
                "question_id": q.question_id, "category": q.category, "question": q.question, "gold": q.answer,
                "answer": res.answer, "answer_error_kind": res.answer_error_kind,
                "gold_in_answer": bool(answer_in_context(q.answer, q.category, res.answer or "")),
                "plan_fallback": res.plan.fallback, "plan_fallback_kind": res.plan.fallback_kind,
                "routes": [{"search_texts": r.search_texts, "entities": r.entities, "topics": r.topics,
                            "record_types": r.record_types, "time": r.time.model_dump() if r.time else None}
                           for r in res.plan.routes],
                "plan_prompt_tokens": u.plan_prompt_tokens, "answer_prompt_tokens": u.answer_prompt_tokens,
                "query_prompt_tokens": u.query_prompt_tokens, "reported": not u.estimated,
                "estimate_plan_prompt_tokens": est.plan_prompt_tokens,
                "estimate_answer_prompt_tokens": est.answer_prompt_tokens,
                "estimate_query_prompt_tokens": est.query_prompt_tokens,
                "context_tokens": u.context_tokens, "completion_tokens": u.plan_completion_tokens + u.answer_completion_tokens,
                "wall_s": round(wall, 2),
            })
            print(json.dumps({k: rows[-1][k] for k in ("question", "answer", "plan_fallback", "query_prompt_tokens",
                                                         "estimate_query_prompt_tokens")}), flush=True)
        offline.close()

    def med(k: str) -> float | None:
        vals = [r[k] for r in rows if r[k] is not None]
        return float(statistics.median(vals)) if vals else None

    out = {
        "endpoint": cfg.llm.base_url, "model": cfg.llm.model, "budget_tokens": args.budget, "questions": len(rows),
        "plan_fallback_rate": sum(r["plan_fallback"] for r in rows) / max(1, len(rows)),
        "gold_in_answer_rate": sum(r["gold_in_answer"] for r in rows) / max(1, len(rows)),
        **{f"median_{k}": med(k) for k in ("plan_prompt_tokens", "answer_prompt_tokens", "query_prompt_tokens",
                                            "estimate_plan_prompt_tokens", "estimate_answer_prompt_tokens",
                                            "estimate_query_prompt_tokens", "completion_tokens", "wall_s")},
        "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=2))
    print(json.dumps({k: v for k, v in out.items() if k != "rows"}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
