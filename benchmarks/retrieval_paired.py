"""Paired comparison of two ``lychee-ray eval-retrieval --per-question`` results (docs/segmenter.md §3.11).

    python benchmarks/retrieval_paired.py --a ER_turn.json --b ER_pair.json --out benchmarks/results/retrieval_turn_vs_pair.json

Both runs must score the same questions (the same data set and splits; two stores built differently).
For each split and metric: the mean of ``--system`` in A and in B over the questions both scored, and
the mean per-question difference A − B with its paired bootstrap 95 % interval (resampling questions).
A data set without a split (BEAM) is compared as one scope, ``all``. ``--system-b`` compares two
systems of one run (``--a`` = ``--b``: lychee vs ``passage_rag``). Metrics: ``content_recall_50``
(content coverage, the issue's "test content coverage"), ``recall`` (id coverage), ``all`` (every gold
turn in context), ``content_coverage`` (mean share of the gold turns' content words),
``answer_in_context`` (over the questions where both have a value).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.eval.metrics.segmentation import paired_bootstrap  # noqa: E402

METRICS = ("content_recall_50", "recall", "all", "content_coverage", "answer_in_context")


def per_question(result: dict[str, Any], system: str, metric: str, conversations: set[str]) -> dict[str, float | None]:
    """``metric`` of ``system`` per question id, over the questions of ``conversations``."""
    out: dict[str, float | None] = {}
    for q in result["details"]:
        if q["conversation_id"] not in conversations:
            continue
        s = q["systems"][system]
        v = s["content"][metric] if metric.startswith("content_recall_") else s.get(metric)
        out[q["question_id"]] = None if v is None else float(v)
    return out


def scopes(result: dict[str, Any]) -> dict[str, list[str]]:
    """The splits that hold scored questions, else one scope ``all`` of every scored conversation."""
    scored = {q["conversation_id"] for q in result["details"]}
    splits = {k: v for k, v in (result.get("splits") or {}).items() if scored & set(v)}
    return splits or {"all": sorted(scored)}


def compare(a: dict[str, Any], b: dict[str, Any], system: str, resamples: int, system_b: str | None = None) -> dict[str, Any]:
    """Per split and metric: A, B and the paired difference A − B over the questions both scored."""
    if scopes(a) != scopes(b):
        raise SystemExit("the two results use different splits")
    out: dict[str, Any] = {}
    for split, convs in scopes(a).items():
        out[split] = {}
        for metric in METRICS:
            x, y = per_question(a, system, metric, set(convs)), per_question(b, system_b or system, metric, set(convs))
            if set(x) != set(y):
                raise SystemExit(f"{split}: the two results scored different questions")
            common = sorted(k for k in x if x[k] is not None and y[k] is not None)
            if not common:
                continue
            xa, ya = np.asarray([x[k] for k in common]), np.asarray([y[k] for k in common])
            bs = paired_bootstrap(xa, ya, resamples=resamples)
            out[split][metric] = {"questions": len(common), "a": float(xa.mean()), "b": float(ya.mean()),
                                  "diff": bs["mean"], "ci95": [bs["boot_low"], bs["boot_high"]]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--a", required=True, help="eval-retrieval --per-question JSON (the change)")
    ap.add_argument("--b", required=True, help="eval-retrieval --per-question JSON (the baseline)")
    ap.add_argument("--system", default="lychee")
    ap.add_argument("--system-b", default=None, help="the system of --b (default: --system)")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    a, b = (json.loads(Path(p).read_text(encoding="utf-8")) for p in (args.a, args.b))
    result = {"a": args.a, "b": args.b, "system": args.system, "system_b": args.system_b or args.system,
              "resamples": args.resamples, "splits": compare(a, b, args.system, args.resamples, args.system_b)}
    for split, metrics in result["splits"].items():
        for metric, e in metrics.items():
            print(f"{split:5s} {metric:18s} {e['a']:.4f} vs {e['b']:.4f}: {e['diff']:+.4f} [{e['ci95'][0]:+.4f}, {e['ci95'][1]:+.4f}]"
                  f" ({e['questions']} questions)")
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
