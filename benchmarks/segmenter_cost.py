"""The segmenter's own cost per exchange against the cost of embedding the turns.

    python benchmarks/segmenter_cost.py --out benchmarks/results/segmenter_cost.json

For each LoCoMo conversation: (a) embed all turn texts in one batched call, as the builder does;
(b) count the turn tokens; (c) run the segmenter on the precomputed vectors and token counts
(exchange building, the token cap, every decision and its trace record). Each stage is timed
``--repeats`` times and the median is kept. The segmenter must be a small fraction of (a).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.ingest.segment import (  # noqa: E402
    conversation_turn_inputs,
    resolve_exchange_mode,
    segment_turn_inputs,
    turn_embedding_text,
)
from lychee_ray.text.tokens import count_tokens  # noqa: E402

DEFAULT_LOCOMO = ROOT.parent / "shared" / "data" / "locomo"


def median_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Median wall time of ``repeats`` calls and the last result."""
    times, out = [], None
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--locomo", default=str(DEFAULT_LOCOMO))
    ap.add_argument("--out", required=True)
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per stage (median kept)")
    ap.add_argument("--segment-repeats", type=int, default=5, help="timed segmenter runs (cheap, so more)")
    ap.add_argument("--limit", type=int, default=0, help="only the first N conversations (0 = all)")
    ap.add_argument("--config", action="append", default=[])
    args = ap.parse_args(argv)

    from lychee_ray.io.adapters import read_locomo
    from lychee_ray.embed import get_embedder

    cfg = load_config(files=args.config)
    enc = cfg.tokenizer.encoding
    convs = [it.conversation for it in read_locomo(args.locomo) if it.conversation is not None]
    if args.limit:
        convs = convs[: args.limit]
    embedder = get_embedder(cfg.embedding, cfg.llm)
    embedder.encode(["warm-up"])  # first call pays one-off initialisation
    count_tokens("warm-up", enc)

    rows = []
    for conv in convs:
        texts = [turn_embedding_text(t) for *_, t in conv.iter_turns()]
        embed_s, vecs = median_time(lambda: embedder.encode(texts), args.repeats)
        tok_s, _ = median_time(lambda: [count_tokens(t, enc) for t in texts], args.repeats)
        turns = conversation_turn_inputs(conv, vecs, enc)
        mode = resolve_exchange_mode(cfg.segmenter.exchange_mode, (t.role for t in turns), cfg.segmenter.auto_without_roles)
        seg_s, (segments, decisions) = median_time(
            lambda: segment_turn_inputs(turns, cfg.segmenter, mode=mode, encoding=enc), args.segment_repeats
        )
        exchanges = sum(1 for d in decisions if d.exchange_index is not None)
        row = {
            "conversation_id": conv.conversation_id,
            "turns": conv.num_turns,
            "exchanges": exchanges,
            "segments": len(segments),
            "mean_turns_per_segment": round(conv.num_turns / len(segments), 3),
            "embed_s": round(embed_s, 4),
            "tokenize_s": round(tok_s, 4),
            "segment_s": round(seg_s, 5),
            "embed_ms_per_exchange": round(1000 * embed_s / exchanges, 4),
            "segment_ms_per_exchange": round(1000 * seg_s / exchanges, 4),
            "segment_over_embed": round(seg_s / embed_s, 5),
        }
        rows.append(row)
        print(json.dumps(row), file=sys.stderr)

    ex = sum(r["exchanges"] for r in rows)
    emb = sum(r["embed_s"] for r in rows)
    seg = sum(r["segment_s"] for r in rows)
    tok = sum(r["tokenize_s"] for r in rows)
    result = {
        "embedding_model": getattr(embedder, "name", "?"),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
        "repeats": {"embed_and_tokenize": args.repeats, "segment": args.segment_repeats, "statistic": "median"},
        "segmenter_config": cfg.segmenter.model_dump(mode="json"),
        "per_conversation": rows,
        "totals": {
            "conversations": len(rows),
            "exchanges": ex,
            "embed_s": round(emb, 3),
            "tokenize_s": round(tok, 4),
            "segment_s": round(seg, 4),
            "embed_ms_per_exchange": round(1000 * emb / ex, 4),
            "tokenize_ms_per_exchange": round(1000 * tok / ex, 4),
            "segment_ms_per_exchange": round(1000 * seg / ex, 4),
            "segment_over_embed": round(seg / emb, 5),
            "median_segment_over_embed": round(statistics.median(r["segment_over_embed"] for r in rows), 5),
        },
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print(json.dumps(result["totals"], indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
