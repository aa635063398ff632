"""What the segmentation corpora of the leave-one-corpus-out selection look like in the stream
itself, before any model runs (issue 38; docs/segmenter.md §3.5).

    python benchmarks/seg_corpus_stats.py --out benchmarks/results/seg_corpus_stats.json

A cue can only be gated by what the segmenter observes. The question cue ``Q_t`` helps TIAGE and
SuperDialseg and hurts ``locomo_mix`` and ``tau_mix`` held out, and TIAGE, ``locomo_turn`` and
``tau_turn`` are all ``turn`` units without roles. This reports per corpus, over its dialogues, the
words per utterance and the share of utterances that end with a question mark (10th percentile,
median, 90th percentile of the per-dialogue means): statistics a stream shows in its first turns.
The corpora are the four groups of ``benchmarks/segmenter_loco.py`` (the derived ones built the same
way from LoCoMo's dev conversations and the tau-bench airline dev trajectories); no other corpus is read.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_segmenter import DATA, load_locomo  # noqa: E402

from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.eval.runners.segmentation import load_seg_corpus  # noqa: E402
from lychee_ray.eval.setup.seg_corpora import locomo_mix, tau_mix  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402


def spread(values: list[float]) -> dict[str, float]:
    """10th percentile, median and 90th percentile, rounded."""
    return {k: round(float(np.percentile(values, q)), 3) for k, q in (("p10", 10), ("median", 50), ("p90", 90))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tiage", default=str(DATA / "segmentation" / "tiage.json"))
    ap.add_argument("--superdialseg", default=str(DATA / "segmentation" / "superdialseg_validation.json"))
    ap.add_argument("--locomo", default=str(DATA / "locomo"))
    ap.add_argument("--tau", default=str(DATA / "agentlogs" / "tau_airline_dev.jsonl"))
    ap.add_argument("--out", required=True, help="JSON result file")
    args = ap.parse_args()
    cfg = load_config(env={})
    dev = set(cfg.eval.locomo_split.dev)
    convs = [c for c in load_locomo(Path(args.locomo)) if c.conversation_id in dev]
    trajectories = [json.loads(line) for line in Path(args.tau).read_text(encoding="utf-8").splitlines() if line.strip()]
    result: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = {"tiage": Path(args.tiage), "superdialseg": Path(args.superdialseg)}
        for name, dialogues in (("locomo_mix", locomo_mix(convs)), ("tau_mix", tau_mix(trajectories))):
            paths[name] = Path(tmp) / f"{name}.json"
            paths[name].write_text(json.dumps(dialogues, ensure_ascii=False), encoding="utf-8")
        for name, path in paths.items():
            ds = load_seg_corpus(path)
            words = [float(np.mean([len(u.split()) for u in d.utterances])) for d in ds]
            questions = [float(np.mean([u.rstrip().endswith("?") for u in d.utterances])) for d in ds]
            result[name] = {"dialogues": len(ds), "words_per_utterance": spread(words),
                            "question_share": spread(questions), "roles": any(d.roles for d in ds)}
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
