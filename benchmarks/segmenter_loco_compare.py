"""Paired held-out comparison of two leave-one-corpus-out runs (issue 38; docs/segmenter.md §3.5-3.6).

    python benchmarks/segmenter_loco_compare.py --runs benchmarks/results/segmenter_loco_runs.jsonl \\
        --pair "embedding+lexical+role_answer+stream1:embedding+lexical+role_answer" --out FILE.json

``--runs``: the JSON-lines checkpoint of benchmarks/segmenter_loco.py (one finished LOCO run a line).
For each ``A:B`` pair and every held-out view: WindowDiff of A, of B, and the mean per-dialogue
difference A − B with its paired bootstrap 95 % interval over dialogues (negative = A is better).
A cue's held-out effect is the pair (design with the cue : the same design without it, each refitted
on every fold); the stream threshold's is (stream design : the same design with the fixed threshold).

``--views VA:VB --designs D1,D2``: within each run, two views of the same held-out corpus (the same
dialogues, e.g. ``locomo_turn:locomo_pair`` = turn units against pair units, docs/segmenter.md §3.11),
paired the same way.
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


def compare(a: dict[str, Any], b: dict[str, Any], resamples: int) -> dict[str, Any]:
    """Per held-out view: WD of ``a`` and ``b`` and the paired difference a − b (bootstrap 95 % CI)."""
    out: dict[str, Any] = {}
    for g, r in a["held_out"].items():
        for v, e in r["test"].items():
            x = np.asarray(e["per_dialogue_windowdiff"])
            y = np.asarray(b["held_out"][g]["test"][v]["per_dialogue_windowdiff"])
            bs = paired_bootstrap(x, y, resamples=resamples)
            out[v] = {"a": float(x.mean()), "b": float(y.mean()), "diff": bs["mean"], "ci95": [bs["boot_low"], bs["boot_high"]],
                      "a_margin": e["margin"], "b_margin": b["held_out"][g]["test"][v]["margin"]}
    return out


def compare_views(run: dict[str, Any], va: str, vb: str, resamples: int) -> dict[str, Any]:
    """Views ``va`` and ``vb`` of one held-out corpus in ``run``: WD of each and the paired difference va − vb."""
    (test,) = [r["test"] for r in run["held_out"].values() if va in r["test"]]
    if vb not in test:
        raise SystemExit(f"{va} and {vb} are not views of one held-out corpus")
    x, y = (np.asarray(test[v]["per_dialogue_windowdiff"]) for v in (va, vb))
    bs = paired_bootstrap(x, y, resamples=resamples)
    return {"a": float(x.mean()), "b": float(y.mean()), "diff": bs["mean"], "ci95": [bs["boot_low"], bs["boot_high"]]}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", required=True, help="segmenter_loco.py --checkpoint file")
    ap.add_argument("--pair", action="append", default=[], help="A:B (run names in --runs); repeatable")
    ap.add_argument("--views", action="append", default=[], help="VA:VB (two views of one corpus) within each of --designs; repeatable")
    ap.add_argument("--designs", default="", help="comma-separated run names for --views")
    ap.add_argument("--resamples", type=int, default=2000)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    runs: dict[str, dict[str, Any]] = {}
    for line in Path(args.runs).read_text(encoding="utf-8").splitlines():
        if line.strip():
            rec = json.loads(line)
            runs[rec["name"]] = rec["run"]
    result: dict[str, Any] = {}
    for pair in args.pair:
        a, _, b = pair.partition(":")
        missing = [n for n in (a, b) if n not in runs]
        if missing:
            raise SystemExit(f"not in {args.runs}: {missing}")
        result[pair] = compare(runs[a], runs[b], args.resamples)
        print(f"{a}  −  {b}")
        for v, e in result[pair].items():
            print(f"   {v:13s} {e['a']:.3f} vs {e['b']:.3f}: {e['diff']:+.3f} [{e['ci95'][0]:+.3f}, {e['ci95'][1]:+.3f}]"
                  f"   margins {e['a_margin']:+.3f} / {e['b_margin']:+.3f}")
    for views in args.views:
        va, _, vb = views.partition(":")
        result[views] = {}
        for name in filter(None, args.designs.split(",")):
            if name not in runs:
                raise SystemExit(f"not in {args.runs}: {name}")
            e = result[views][name] = compare_views(runs[name], va, vb, args.resamples)
            print(f"{name}: {va} {e['a']:.3f} vs {vb} {e['b']:.3f}: {e['diff']:+.3f} [{e['ci95'][0]:+.3f}, {e['ci95'][1]:+.3f}]")
    if not result:
        raise SystemExit("nothing to compare: give --pair or --views with --designs")
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
