"""Where a cut one utterance off its gold boundary lands, and why (issue 38 item 4; docs/segmenter.md §3.4).

    python benchmarks/segmenter_offbyone.py --out benchmarks/results/segmenter_offbyone.json

For issue 29's defaults (as they were: placement off, fixed threshold) and for the current defaults,
on every view of benchmarks/segmenter_loco.py: every predicted boundary is exact, one early (before
the utterance that precedes the gold start) or one late (before the utterance after it). Each
off-by-one cut is described by the unit it landed before:

* ``pair`` / ``role`` views: whether the gold boundary lies *inside* a unit (not at a unit's first turn) — a cut
  taken per pair can then only land one early or one late, whatever the decision;
* ``turn`` / ``role`` views: whether the utterance that opens the gold segment asks a question (a late
  cut then lands on the reply to it: the answer cue's case), and whether the utterance the cut landed
  before (early or late) is a question (the question cue's case).

Same corpora, views and embeddings as segmenter_loco.py (its --cache-dir).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from segmenter_loco import ISSUE29, VIEWS, Bench, add_corpus_arguments  # noqa: E402

from calibrate_segmenter import with_overrides  # noqa: E402
from lychee_ray.ingest.segment import make_segmenter  # noqa: E402
from lychee_ray.ingest.segment.cues import is_question  # noqa: E402
from lychee_ray.eval.metrics.segmentation import lengths_to_boundaries  # noqa: E402


def diagnose(bench: Bench, view: str, cfg: Any) -> dict[str, Any]:
    """Exact / one early / one late cuts on ``view``, the off-by-one ones broken down (module docstring)."""
    name, mode = VIEWS[view]
    hyp = bench.segment(view, cfg)
    out: dict[str, Any] = {"exact": 0, "one_early": 0, "one_late": 0, "elsewhere": 0, "gold_boundaries": 0,
                           "gold_inside_unit": 0, "early_gold_inside_unit": 0, "late_gold_inside_unit": 0,
                           "early_gold_opens_with_question": 0, "late_gold_opens_with_question": 0,
                           "early_cut_before_question": 0, "late_cut_before_question": 0}
    seg = make_segmenter(cfg, mode=mode, encoding=bench.enc)  # type: ignore[arg-type]
    for d, tl, h in zip(bench.dialogues[name], bench.turns[view], hyp):
        # a boundary b of the metrics is the last utterance before a cut: the segment opens at b + 1
        gold = {b + 1 for b in lengths_to_boundaries(d.segments)}
        # the units' first utterances (where a cut lands without placement), from the segmenter's trace
        seg.decisions = []
        seg.push_turns(tl)
        seg.new_stream()
        starts = {int(dec.turn_ids[0].rsplit(":", 1)[1]) for dec in seg.decisions if dec.turn_ids}
        inside = gold - starts
        out["gold_boundaries"] += len(gold)
        out["gold_inside_unit"] += len(inside)
        u = d.utterances
        for c in (b + 1 for b in lengths_to_boundaries(h)):  # the cut opens a segment at utterance c
            if c in gold:
                out["exact"] += 1
            elif c + 1 in gold:
                out["one_early"] += 1
                out["early_gold_inside_unit"] += c + 1 in inside
                out["early_gold_opens_with_question"] += is_question(u[c + 1])
                out["early_cut_before_question"] += is_question(u[c])
            elif c - 1 in gold:
                out["one_late"] += 1
                out["late_gold_inside_unit"] += c - 1 in inside
                out["late_gold_opens_with_question"] += is_question(u[c - 1])
                out["late_cut_before_question"] += is_question(u[c])
            else:
                out["elsewhere"] += 1
    cuts = out["exact"] + out["one_early"] + out["one_late"] + out["elsewhere"]
    out["cuts"] = cuts
    out["off_by_one_share"] = round((out["one_early"] + out["one_late"]) / max(1, cuts), 3)
    out["mode"] = mode
    return {k: int(v) if isinstance(v, (bool, np.bool_)) else v for k, v in out.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    add_corpus_arguments(ap)
    ap.add_argument("--resamples", type=int, default=0)
    args = ap.parse_args(argv)
    bench = Bench(args)
    configs = {"issue29_as_is": with_overrides(bench.base, {**ISSUE29, "placement.modes": []}),
               "issue29_placement_pair": with_overrides(bench.base, {**ISSUE29, "placement.modes": ["pair"]}),
               "defaults": bench.base}
    result = {label: {v: diagnose(bench, v, cfg) for v in VIEWS} for label, cfg in configs.items()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    for label, views in result.items():
        for v, e in views.items():
            print(f"{label:24s} {v:13s} cuts {e['cuts']:5d} exact {e['exact']:5d} early {e['one_early']:4d} late {e['one_late']:4d} "
                  f"off-by-one {e['off_by_one_share']:.2f} | gold inside a unit {e['gold_inside_unit']}/{e['gold_boundaries']} "
                  f"early/late with gold inside a unit {e['early_gold_inside_unit']}/{e['late_gold_inside_unit']} | "
                  f"late on the reply to a new-topic question {e['late_gold_opens_with_question']} early before a question {e['early_cut_before_question']} "
                  f"early gold opens with a question {e['early_gold_opens_with_question']} late before a question {e['late_cut_before_question']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
