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
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from calibrate_segmenter import load_locomo  # noqa: E402
from segmenter_loco import add_corpus_files, corpus_paths  # noqa: E402

from lychee_ray.ingest.segment import count_words, is_question  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.eval.runners.segmentation import load_seg_corpus  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402


def spread(values: list[float]) -> dict[str, float]:
    """10th percentile, median and 90th percentile, rounded."""
    return {k: round(float(np.percentile(values, q)), 3) for k, q in (("p10", 10), ("median", 50), ("p90", 90))}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_corpus_files(ap)
    ap.add_argument("--out", required=True, help="JSON result file")
    args = ap.parse_args()
    cfg = load_config(env={})
    result: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as tmp:
        paths = corpus_paths(args, load_locomo(Path(args.locomo)), set(cfg.eval.locomo_split.dev), Path(tmp))
        for name, path in paths.items():
            ds = load_seg_corpus(path)
            # the segmenter's own readings: the words its question gate counts, the questions its cue sees
            words = [float(np.mean([count_words(u) for u in d.utterances])) for d in ds]
            questions = [float(np.mean([is_question(u) for u in d.utterances])) for d in ds]
            result[name] = {"dialogues": len(ds), "words_per_utterance": spread(words),
                            "question_share": spread(questions), "roles": any(d.roles for d in ds)}
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
