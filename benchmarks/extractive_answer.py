"""How often the `rules` (extractive) answer prints the gold answer when the context holds it.

    python benchmarks/extractive_answer.py --memory /tmp/ans/store --data /tmp/ans/dev --out /tmp/ans/after.json

For every LoCoMo question of categories 1–4 with gold evidence whose conversation is in the store:
``MemoryStore.query`` with the rules backend at the default budget, then LoCoMo's normalised
whole-word match (:func:`~lychee_ray.eval.metrics.context.answer_in_context`) of the gold answer in
the context shown and in the printed answer. The figure is ``answer_holds_gold`` over the questions
whose context holds it (``in_context``); per category beside it, with the answers' median length in
words (a longer answer holds more by chance) and LoCoMo's token F1 of the answer. ``--data`` is a
folder of LoCoMo files (the dev split: locomo-26, 41, 43, 47, 49); with ``--format openai`` (agent logs) the
questions are the ones ``eval-retrieval`` derives from the logs' tool traffic (another corpus than the one the
answer's weights were chosen on).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.eval.metrics.context import answer_in_context  # noqa: E402
from lychee_ray.eval.metrics.locomo import locomo_f1  # noqa: E402
from lychee_ray.eval.runners.retrieval import LOCOMO_CATEGORIES, last_session_date, load_questions  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402
from lychee_ray.query.request import QueryRequest  # noqa: E402


def summary(rows: list[dict]) -> dict:
    held = [r for r in rows if r["in_context"]]
    return {
        "questions": len(rows),
        "in_context": len(held),
        "answer_holds_gold": sum(r["in_answer"] for r in held),
        "share": round(sum(r["in_answer"] for r in held) / len(held), 4) if held else None,
        "f1_mean": round(statistics.fmean(r["f1"] for r in rows), 4) if rows else None,
        "answer_words_median": statistics.median(len(r["answer"].split()) for r in rows) if rows else None,
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memory", required=True)
    ap.add_argument("--data", required=True, help="a LoCoMo file or a folder of them (or an input of --format)")
    ap.add_argument("--format", default="locomo",
                    help="locomo (categories 1-4), or an agent-log format (questions derived from its tool traffic)")
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit", type=int, default=None, help="first N questions only")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)

    cfg = load_config(sets=args.set)
    questions = load_questions(args.format, args.data, LOCOMO_CATEGORIES if args.format == "locomo" else None)
    store = MemoryStore.open(args.memory, cfg, llm="rules")
    have = set(store.conversation_ids())
    questions = [q for q in questions if q.conversation_id in have][: args.limit]
    rows = []
    t0 = time.perf_counter()
    for q in questions:
        qd = last_session_date(store.view(q.conversation_id))
        res = store.query(QueryRequest(conversation_id=q.conversation_id, question=q.question, question_date=qd,
                                       llm="rules", question_id=q.question_id))
        gold = q.answer
        rows.append({
            "question_id": q.question_id, "category": str(q.category), "question": q.question, "gold": str(gold),
            "answer": res.answer, "in_context": bool(answer_in_context(gold, str(q.category), res.context)),
            "in_answer": bool(answer_in_context(gold, str(q.category), res.answer)),
            "f1": locomo_f1(res.answer, gold, str(q.category)),
        })
    by_cat: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        by_cat[r["category"]].append(r)
    out = {
        "memory": args.memory, "data": args.data, "seconds": round(time.perf_counter() - t0, 1),
        "all": summary(rows), "by_category": {c: summary(rs) for c, rs in sorted(by_cat.items())}, "rows": rows,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1))
    print(json.dumps({"all": out["all"], "by_category": out["by_category"]}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
