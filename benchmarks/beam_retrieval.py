"""BEAM retrieval, measured: lychee's selected context vs the hybrid passage RAG, turn RAG, hybrid
turn RAG and full context at the same budgets (no LLM), on BEAM conversation folders.

    python benchmarks/beam_retrieval.py --data ../shared/data/beam/100K --memory /tmp/h-beam/store \
        --out benchmarks/results/beam_retrieval.json

The store is built with the README's defaults (``--llm rules``, in-process) when ``--memory`` does
not exist. For every budget (``--budgets``, default 1,000 / 1,500 / 2,000) and system, over the
questions with gold message ids: gold-message recall (id coverage), all-gold, content coverage (the
mean share of each gold message's content words in the text of the units citing it) and content
recall at 50 %, answer-in-context on the rubric short answers, recall on user-message gold vs
assistant-message gold, per ability and per conversation; at the headline budget (the middle one)
the paired difference lychee − passage_rag per question with its bootstrap 95 % interval. The
per-question rows of every budget are written next to ``--out`` (``<stem>_<budget>.json``, the
``eval-retrieval --per-question`` shape: ``benchmarks/retrieval_paired.py`` reads them). The store's
records, size and build time (its manifest) are reported beside.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.api import build_memory  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.embed import get_embedder  # noqa: E402
from lychee_ray.embed.memo import MemoEmbedder  # noqa: E402
from lychee_ray.eval.metrics.segmentation import paired_bootstrap  # noqa: E402
from lychee_ray.eval.runners.retrieval import evaluate_retrieval, load_questions, question_rows  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402

BASELINES = ["passage_rag", "turn_rag", "hybrid_rag", "full_context"]
# Texts the passage embedder keeps across budgets (every passage of the slice fits).
MEMO_TEXTS = 1_000_000
METRICS = ("recall", "all", "content_coverage", "content_recall_50", "answer_in_context")


def _figures(s: dict[str, Any]) -> dict[str, Any]:
    roles = s.get("gold_role_recall") or {}
    out = {k: s.get(k) for k in ("questions", *METRICS, "context_tokens")}
    out.update({f"recall_{r}_gold": (roles.get(r) or {}).get("recall") for r in ("user", "assistant")})
    if "fits_budget" in s:
        out["fits_budget"] = s["fits_budget"]
    return out


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """Per system: the overall figures, per ability and per conversation."""
    out: dict[str, Any] = {}
    for name in report["systems"]:
        s = report[name]
        out[name] = {**_figures(s),
                     "per_ability": {c: _figures(v) for c, v in s["per_category"].items()},
                     "per_conversation": {c: _figures(v) for c, v in (s.get("per_conversation") or {}).items()}}
    return out


def paired(rows: list[dict[str, Any]], a: str, b: str) -> dict[str, Any]:
    """Per metric: the mean per-question difference a − b and its paired bootstrap 95 % interval."""
    out: dict[str, Any] = {}
    for metric in ("recall", "all", "content_coverage"):
        x = np.asarray([float(r["systems"][a][metric]) for r in rows])
        y = np.asarray([float(r["systems"][b][metric]) for r in rows])
        bs = paired_bootstrap(x, y)
        out[metric] = {"a": round(float(x.mean()), 4), "b": round(float(y.mean()), 4), "diff": round(bs["mean"], 4),
                       "ci95": [round(bs["boot_low"], 4), round(bs["boot_high"], 4)], "questions": len(rows)}
    return out


def store_facts(root: Path) -> dict[str, Any]:
    manifest = json.loads((root / "manifest.json").read_text())
    size = sum(f.stat().st_size for f in root.rglob("*") if f.is_file())
    run = manifest.get("last_run") or {}
    return {"path": str(root), "bytes": size, "counts": manifest.get("counts"), "build_wall_s": run.get("wall_s"),
            "records": run.get("records"), "backend": manifest.get("backend"), "runner": manifest.get("runner")}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--data", required=True, help="a folder of BEAM conversation folders (or one)")
    p.add_argument("--memory", required=True, help="its store (built with the defaults when missing)")
    p.add_argument("--budgets", type=int, nargs="+", default=[1000, 1500, 2000])
    p.add_argument("--out", default="benchmarks/results/beam_retrieval.json")
    args = p.parse_args()
    cfg = load_config()
    t0 = time.perf_counter()
    if not Path(args.memory).exists():
        s = build_memory(args.data, args.memory, format="beam", llm="rules")
        print(f"built {s.built} conversations in {s.wall_s} s", file=sys.stderr)
    questions = load_questions("beam", args.data, None)
    doc_embedder = MemoEmbedder(get_embedder(cfg.embedding, cfg.llm), MEMO_TEXTS)
    out: dict[str, Any] = {"data": str(args.data), "memory": str(args.memory), "questions_with_gold": len(questions),
                           "baselines": BASELINES, "budgets": {}}
    head = args.budgets[len(args.budgets) // 2]
    out_path = Path(args.out)
    with MemoryStore.open(args.memory, cfg, llm="rules") as store:
        for b in args.budgets:
            report, results = evaluate_retrieval(store, questions, b, baselines=BASELINES, doc_embedder=doc_embedder)
            rows = question_rows(results, with_covered=False)
            details = out_path.with_name(f"{out_path.stem}_{b}.json")
            details.parent.mkdir(parents=True, exist_ok=True)
            details.write_text(json.dumps({**report, "details": rows}, indent=1), encoding="utf-8")
            out["budgets"][str(b)] = {"systems": summary(report), "per_question": str(details),
                                      "wall_s": report["wall_s"]}
            if b == head:
                out["paired_lychee_minus_passage_rag"] = {"budget": b, **paired(rows, "lychee", "passage_rag")}
            print(f"budget {b}: " + ", ".join(f"{n} {report[n]['recall']}" for n in report["systems"]), file=sys.stderr)
    out["store"] = store_facts(Path(args.memory))
    out["wall_s"] = round(time.perf_counter() - t0, 1)
    write_result(out, out_path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
