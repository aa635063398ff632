"""Where the gold messages go: for every gold message of every question, which recall channel found it
(as a turn, through a record made from it, or through one of its passages) and at what rank, where it
stood in the fused pool, and whether the selection showed it, refused it for the budget or left it out;
and what filled the budget instead.

    python benchmarks/gold_trace.py --memory STORE --data DIR --format beam --budget-tokens 1500 \
        --out benchmarks/results/gold_trace.json

Runs ``MemoryStore.search`` with the rules planner and ``explain`` (no LLM). Per gold message the
outcome is one of: ``shown`` (an evidence unit cites it), ``budget`` (in the pool, refused for the
budget), ``pooled`` (in the pool, not selected), ``missed`` (no channel returned it or anything made
from it). Aggregates: the share of each outcome, per channel the share of gold messages it returned
and their median rank, the median fused position of pooled gold, and the context tokens spent on units
that cite no gold message — per ability and overall.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.eval.runners.retrieval import last_session_date, load_questions  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402
from lychee_ray.query.request import QueryRequest  # noqa: E402
from lychee_ray.text.tokens import count_tokens  # noqa: E402

OUTCOMES = ("shown", "budget", "pooled", "missed")


def trace_question(store: MemoryStore, q: Any, budget: int | None) -> dict[str, Any]:
    """One question's gold messages, each with its channel ranks, pool position and outcome."""
    view = store.view(q.conversation_id)
    qd = last_session_date(view) if not q.question_date else q.question_date
    res = store.search(QueryRequest(conversation_id=q.conversation_id, question=q.question, question_date=qd,
                                    budget_tokens=budget, llm="rules", explain=True))
    assert res.explain is not None
    gold = [str(t) for t in q.evidence]
    cited = {t for e in res.evidence for t in e.source_turn_ids}
    # the pool items that stand for each turn: the turn itself, a record made from it, a passage of it
    per_turn: dict[str, list[Any]] = defaultdict(list)
    for item in res.explain.pool:
        if item.kind == "turn":
            per_turn[item.id].append(item)
        elif item.kind == "record":
            p = view.record_pos.get(item.id)
            for tp in (view.record_turns[p] if p is not None else ()):
                per_turn[view.turn_ids[tp]].append(item)
        elif item.kind == "passage":
            p = view.passage_pos.get(item.id)
            if p is not None:
                per_turn[view.turn_ids[view.passage_turn(p)]].append(item)
    rows = []
    for t in gold:
        items = per_turn.get(t, [])
        ranks: dict[str, int] = {}
        for it in items:
            for ch, r in it.ranks.items():
                ranks[ch] = min(r, ranks.get(ch, r))
        if t in cited:
            outcome = "shown"
        elif any(it.outcome == "budget" for it in items):
            outcome = "budget"
        elif items:
            outcome = "pooled"
        else:
            outcome = "missed"
        rows.append({"turn": t, "outcome": outcome, "ranks": dict(sorted(ranks.items())),
                     "pool_position": min((it.position for it in items), default=None),
                     "kinds": sorted({it.kind for it in items})})
    enc = store.encoding
    waste = sum(count_tokens(e.text, enc) for e in res.evidence if not set(e.source_turn_ids) & set(gold))
    return {"question_id": q.question_id, "category": q.category, "question": q.question, "gold": rows,
            "pool_size": len(res.explain.pool), "context_tokens": res.usage.context_tokens,
            "tokens_without_gold": waste, "evidence_units": len(res.evidence)}


def aggregate(traces: list[dict[str, Any]], channels: list[str]) -> dict[str, Any]:
    golds = [g for t in traces for g in t["gold"]]
    n = len(golds)
    out: dict[str, Any] = {"questions": len(traces), "gold_messages": n}
    if not n:
        return out
    c = Counter(g["outcome"] for g in golds)
    out["outcome_share"] = {o: round(c[o] / n, 4) for o in OUTCOMES}
    per_channel = {}
    for ch in channels:
        rs = [g["ranks"][ch] for g in golds if ch in g["ranks"]]
        per_channel[ch] = {"found_share": round(len(rs) / n, 4),
                           "median_rank": statistics.median(rs) if rs else None}
    out["channels"] = per_channel
    pos = [g["pool_position"] for g in golds if g["pool_position"] is not None]
    out["pool_position_median"] = statistics.median(pos) if pos else None
    out["tokens_without_gold_share"] = round(sum(t["tokens_without_gold"] for t in traces)
                                             / max(1, sum(t["context_tokens"] for t in traces)), 4)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memory", required=True)
    ap.add_argument("--data", required=True)
    ap.add_argument("--format", default="beam")
    ap.add_argument("--budget-tokens", type=int, default=None)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    cfg = load_config(sets=args.set)
    questions = [q for q in load_questions(args.format, args.data, None) if q.evidence]
    traces = []
    channels: list[str] = []
    with MemoryStore.open(args.memory, cfg, llm="rules") as store:
        have = set(store.conversation_ids())
        for q in questions:
            if q.conversation_id in have:
                traces.append(trace_question(store, q, args.budget_tokens))
        channels = sorted({ch for t in traces for g in t["gold"] for ch in g["ranks"]})
    by_cat: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for t in traces:
        by_cat[str(t["category"])].append(t)
    report = {"memory": args.memory, "data": args.data, "budget_tokens": args.budget_tokens,
              "overall": aggregate(traces, channels),
              "per_ability": {c: aggregate(ts, channels) for c, ts in sorted(by_cat.items())},
              "questions": traces}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1), encoding="utf-8")
    print(json.dumps({"overall": report["overall"],
                      "per_ability": {c: v.get("outcome_share") for c, v in report["per_ability"].items()}}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
