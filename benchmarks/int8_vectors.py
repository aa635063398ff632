"""How far the build's int8 record vectors are from fp32 (issue 37's stated tolerance).

    python benchmarks/int8_vectors.py --memory /tmp/bulk_locomo --out benchmarks/results/int8_record_vectors_locomo.json

Samples record texts of a built store and embeds them with the record/node embedder the build uses
(``embedding.memory_quantization=int8``: the int8 query model, one text per run) and with the fp32
model (``none``, the baseline), and reports the cosine between the two vectors of each text
(median, 1st percentile, min). Retrieval with each precision is measured by ``lychee-ray
eval-retrieval`` on stores built both ways (docs/build-cost.md).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.embed import get_embedder  # noqa: E402
from lychee_ray.io.store import StoreReader  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memory", required=True, help="a built store")
    ap.add_argument("--sample", type=int, default=3000, help="record texts sampled (seeded)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True, help="JSON result file")
    args = ap.parse_args()
    cfg = load_config(env={})
    reader = StoreReader(args.memory)
    texts: list[str] = []
    for cid in sorted(reader.markers):
        texts += reader.load(cid).records.column("text").to_pylist()
    rng = np.random.default_rng(args.seed)
    sample = [texts[i] for i in rng.choice(len(texts), size=min(args.sample, len(texts)), replace=False)]
    int8 = get_embedder(cfg.embedding.model_copy(update={"memory_quantization": "int8"}), memory=True)
    fp32 = get_embedder(cfg.embedding.model_copy(update={"memory_quantization": "none"}), memory=True)
    cos = (int8.encode(sample) * fp32.encode(sample)).sum(axis=1)
    out = {"memory": args.memory, "records_total": len(texts), "sampled": len(sample),
           "runtime": getattr(int8, "runtime", ""), "cosine_median": round(float(np.median(cos)), 4),
           "cosine_p1": round(float(np.percentile(cos, 1)), 4), "cosine_min": round(float(cos.min()), 4),
           "cosine_mean": round(float(cos.mean()), 4)}
    write_result(out, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
