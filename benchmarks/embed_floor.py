"""The embedding model's floor under a build's CPU per turn, on this machine.

    python benchmarks/embed_floor.py --memory /tmp/bulk_locomo --input ../shared/data/locomo --format locomo \
        --out benchmarks/results/embed_floor_locomo.json

A build embeds three kinds of text: each turn (fp32: the segmenter's cuts depend on it), each record
and each node that links ``nodes.min_records_to_embed`` records or more (int8, one text per run).
This counts the tokens of each kind a build of ``--input`` embeds (read back from the store
``--memory`` built from it: records and node texts as stored; distinct texts per conversation, as
one model call deduplicates them), and measures on a sample of each kind the process CPU per token
of the four ways the local model can run — fp32 in the build's batches (``embedding.batch_size``,
by token count), fp32 one text per run, int8 one text per run (the build's record model), int8 in
batches (not used by builds: dynamic quantization makes a text's vector depend on its batch) —
median of ``--repeats`` runs each, alternating.

It reports core-seconds per turn of the embedding as builds run it, and the **floor**: every kind run its
cheapest way, whatever that does to the vectors. A target below the floor cannot be met on
this machine by anything but embedding fewer tokens (which changes what is stored) or a cheaper model.

Two more kinds: ``passages`` (the passages of long turns, embedded by the record model) and
``one_pass``, the per-message unit: every message once, cut into passages of at most
``passages.max_tokens`` tokens (a short message is one passage, itself) — what embedding the input
once costs. ``build_over_one_pass`` compares the build's embedding with it, each as built.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lychee_ray.ingest.passages import conversation_passages  # noqa: E402
from lychee_ray.ingest.segment.conversation import turn_embedding_text  # noqa: E402
from lychee_ray.text.passages import split_passages  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.embed import get_embedder  # noqa: E402
from lychee_ray.io.adapters import read_input  # noqa: E402
from lychee_ray.io.store import StoreReader  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402

# (name, model, batch size or None for the configured one, forced batching of the int8 model)
WAYS = (("fp32_batched", "fp32", None), ("fp32_one_per_run", "fp32", 1), ("int8_one_per_run", "int8", 1),
        ("int8_batched", "int8", None))
# the kinds the record model embeds (turns are the fp32 turn model's)
MEMORY_KINDS = ("records", "nodes", "passages", "one_pass")


def cpu_s() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def kind_texts(args: argparse.Namespace, cfg: Any) -> tuple[dict[str, list[str]], int]:
    """Each kind's texts as a build embeds them (distinct per conversation), and the input's turns."""
    texts: dict[str, list[str]] = {"turns": [], "records": [], "nodes": [], "passages": [], "one_pass": []}
    turns = 0
    enc = cfg.tokenizer.encoding
    for item in read_input(args.format, args.input):
        conv = item.conversation
        if conv is None:
            continue
        ts = [turn_embedding_text(t, cfg.segmenter.max_turn_chars) for *_, t in conv.iter_turns()]
        turns += len(ts)
        texts["turns"] += sorted(set(ts))
        texts["passages"] += sorted({p.text for p in conversation_passages(conv, cfg.passages, enc)})
        unit = {t.text[s.start:s.end] for *_, t in conv.iter_turns() if t.text.strip()
                for s in split_passages(t.text, cfg.passages.max_tokens, enc, cfg.passages.max_turn_chars).spans}
        texts["one_pass"] += sorted(unit)
    reader = StoreReader(args.memory)
    for cid in sorted(reader.markers):
        data = reader.load(cid)
        texts["records"] += sorted(set(data.records.column("text").to_pylist()))
        nodes = data.tables["nodes"].select(["text", "record_ids"]).to_pylist()
        texts["nodes"] += sorted({n["text"] for n in nodes if len(n["record_ids"]) >= cfg.nodes.min_records_to_embed})
    return texts, turns


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--memory", required=True, help="a store built from --input")
    ap.add_argument("--input", required=True)
    ap.add_argument("--format", required=True)
    ap.add_argument("--sample", type=int, default=1500, help="texts of each kind timed (every k-th)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", required=True, help="JSON result file")
    args = ap.parse_args()
    cfg = load_config(env={})
    ecfg = cfg.embedding.for_build()
    memory_model = get_embedder(ecfg, memory=True)
    turn_model = get_embedder(ecfg)
    fp32_way = "fp32_batched" if getattr(turn_model, "_batch", ecfg.batch_size) > 1 else "fp32_one_per_run"
    memory_way = "int8_one_per_run" if getattr(memory_model, "runtime", "") == "onnx-int8" else fp32_way
    as_built = {"turns": fp32_way, **{k: memory_way for k in MEMORY_KINDS}}
    # the int8 model as the query path loads it
    encoders = {"fp32": getattr(turn_model, "_onnx", None),
                "int8": getattr(get_embedder(ecfg.model_copy(update={"query_quantization": "int8"}), queries=True), "_onnx", None)}
    if any(e is None for e in encoders.values()):
        raise SystemExit("the configured embedder does not run on ONNX Runtime here")
    texts, turns = kind_texts(args, cfg)
    tokenize = encoders["fp32"]._tokenize

    def n_tokens(ts: list[str]) -> int:
        return int(sum(int(np.asarray(tokenize([t])["attention_mask"][0]).sum()) for t in ts))

    kinds: dict[str, Any] = {}
    for kind, ts in texts.items():
        sample = ts[:: max(1, -(-len(ts) // args.sample))]
        sample_tokens = n_tokens(sample)
        runs: dict[str, list[float]] = {w: [] for w, *_ in WAYS}
        for enc in encoders.values():
            enc.encode(sample[:16], ecfg.batch_size)  # warm-up
        for _ in range(args.repeats):
            for way, model, bs in WAYS:
                enc = encoders[model]
                saved = enc.quantize
                if bs is None:
                    enc.quantize = "none"  # the encoder runs int8 one text per run otherwise
                t0 = cpu_s()
                try:
                    enc.encode(sample, bs or ecfg.batch_size)
                finally:
                    enc.quantize = saved
                runs[way].append(cpu_s() - t0)
        ms_per_token = {w: round(float(np.median(v)) / sample_tokens * 1000, 5) for w, v in runs.items()}
        tokens = n_tokens(ts)
        kinds[kind] = {"texts": len(ts), "tokens": tokens, "tokens_per_text": round(tokens / max(1, len(ts)), 2),
                       "tokens_per_turn": round(tokens / turns, 2), "sampled": len(sample),
                       "cpu_ms_per_token": ms_per_token,
                       "core_s_per_turn": {w: round(tokens * ms / 1000 / turns, 5) for w, ms in ms_per_token.items()}}
    built_kinds = ("turns", "records", "nodes", "passages")
    built = sum(kinds[k]["core_s_per_turn"][as_built[k]] for k in built_kinds)
    floor = sum(min(kinds[k]["core_s_per_turn"].values()) for k in built_kinds)
    one_pass = kinds["one_pass"]["core_s_per_turn"][as_built["one_pass"]]
    out = {"input": args.input, "memory": args.memory, "turns": turns, "batch_size": ecfg.batch_size,
           "repeats": args.repeats, "kinds": kinds, "as_built": as_built,
           "embedding_core_s_per_turn_as_built": round(built, 5),
           "embedding_core_s_per_turn_floor": round(floor, 5),
           "one_pass_core_s_per_turn": round(one_pass, 5),
           "one_pass_core_s": round(one_pass * turns, 2),
           "build_embedding_core_s_as_built": round(built * turns, 2),
           "build_over_one_pass": round(built / one_pass, 3) if one_pass else None,
           "load_avg_1m_at_end": round(os.getloadavg()[0], 2)}
    write_result(out, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
