"""CPU of the build's turn embedding with batches formed by token count against batches formed by
character count (the encoder before issue 37's agent-log profile), on one corpus, in one process.

    python benchmarks/embed_batching.py --input ../shared/data/agentlogs/tau_airline_dev.jsonl --format openai \
        --out benchmarks/results/embed_batching_tau.json

Takes the distinct texts a build embeds for the corpus's turns (``turn_embedding_text``) and embeds
them with the build's fp32 turn model (``embedding.for_build()``: one intra-op thread, no spinning)
both ways, alternating, ``--repeats`` times each: **characters** — sorted by character count, cut
into ``embedding.batch_size`` batches, each tokenized alone (padded to its longest text) — and
**tokens** — ``OnnxEncoder.encode`` (tokenized ``embedding.length_sort_window`` at a time, batched by
token count). Reports process CPU seconds per text (median of the repeats), their ratio, the tokens
run including padding, and the largest difference between the two vectors of a text.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lychee_ray.ingest.segment.conversation import turn_embedding_text  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.embed import get_embedder  # noqa: E402
from lychee_ray.io.adapters import read_input  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True)
    ap.add_argument("--format", required=True)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--max-texts", type=int, default=0, help="embed at most this many texts (every k-th); 0 = all")
    ap.add_argument("--out", required=True, help="JSON result file")
    args = ap.parse_args()
    cfg = load_config(env={})
    ecfg = cfg.embedding.for_build()
    texts = sorted({turn_embedding_text(t, cfg.segmenter.max_turn_chars)
                    for item in read_input(args.format, args.input) if item.conversation is not None
                    for *_, t in item.conversation.iter_turns()})
    if args.max_texts and len(texts) > args.max_texts:
        texts = texts[:: -(-len(texts) // args.max_texts)]
    enc = getattr(get_embedder(ecfg), "_onnx", None)
    if enc is None:
        raise SystemExit("the configured embedder does not run on ONNX Runtime here")
    bs = ecfg.batch_size
    by_chars = np.argsort([-len(t) for t in texts], kind="stable")
    enc.encode(texts[:32], bs)  # warm-up

    def chars() -> np.ndarray:
        out: list[np.ndarray] = [np.empty(0)] * len(texts)
        enc._encode_tokenizing_batches(texts, by_chars, bs, out)
        return np.asarray(out, dtype=np.float32)

    def tokens() -> np.ndarray:
        return enc.encode(texts, bs)

    runs: dict[str, list[float]] = {"characters": [], "tokens": []}
    padded: dict[str, int] = {}
    vecs: dict[str, np.ndarray] = {}
    for _ in range(args.repeats):
        for name, fn in (("characters", chars), ("tokens", tokens)):
            before, t0 = enc.padded_tokens, cpu_s()
            vecs[name] = fn()
            runs[name].append(cpu_s() - t0)
            padded[name] = enc.padded_tokens - before
    real = int(sum(len(enc._tokenize([t])["attention_mask"][0]) for t in texts))
    med = {k: float(np.median(v)) for k, v in runs.items()}
    out = {"input": args.input, "format": args.format, "texts": len(texts), "batch_size": bs,
           "length_sort_window": ecfg.length_sort_window, "repeats": args.repeats, "tokens_real": real,
           "tokens_run_with_padding": padded,
           "cpu_ms_per_text_median": {k: round(v / len(texts) * 1000, 3) for k, v in med.items()},
           "cpu_s_runs": {k: [round(x, 2) for x in v] for k, v in runs.items()},
           "ratio_tokens_to_characters": round(med["tokens"] / med["characters"], 3),
           "max_abs_vector_difference": float(np.abs(vecs["tokens"] - vecs["characters"]).max()),
           "load_avg_1m_at_end": round(os.getloadavg()[0], 2)}
    write_result(out, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
