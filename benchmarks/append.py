"""The daily incremental build: a corpus built from sessions 1..n, then re-run with sessions 1..n+1.

    python benchmarks/append.py --out benchmarks/results/append_daily.json

For a LoCoMo subset (``--conversations``, from ``../shared/data/locomo``) it measures, ``--repeats``
times, the re-run with one more session on a store holding sessions 1..n (the increment: only the
new turns are embedded, only the segments they close or re-open are encoded) against a full
rebuild of sessions 1..n+1 into an empty store. Rules backend; the LLM side is counted as the
encode calls made and the exact prompt tokens the ``openai`` encoder would have sent for them
(its prompt template with the real ρ; the dry-run's counter). Also checks that the incremental
store's segments, records and nodes equal the full rebuild's (equivalence with the real MiniLM
embedder; ``--embedding hash`` for a model-free run). Writes JSON with per-repeat figures, medians
and the increment / rebuild ratios.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import zlib
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lychee_ray.ingest.dryrun import encode_prompt_tokens  # noqa: E402
from lychee_ray.ingest.context import make_context  # noqa: E402
from lychee_ray.ingest.runner import run_local_build_items  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.io.adapters import AdapterItem, read_input  # noqa: E402
from lychee_ray.io.store import iter_markers, read_part  # noqa: E402
from lychee_ray.io.verify import verify_store  # noqa: E402

LOCOMO = Path(__file__).resolve().parent.parent.parent / "shared" / "data" / "locomo"


class CountingEncoder:
    """Wraps the rules encoder: counts encode calls and the openai prompt tokens they would cost."""

    def __init__(self, inner: Any, cfg: Any) -> None:
        self.inner, self.cfg = inner, cfg
        self.backend, self.model = inner.backend, inner.model
        self.calls = self.prompt_tokens = 0

    async def encode(self, request: Any) -> Any:
        self.calls += 1
        self.prompt_tokens += encode_prompt_tokens(request, self.cfg)
        return await self.inner.encode(request)


class HashEmbedder:
    """Model-free embedder (``--embedding hash``)."""

    name, dim = "hash-embedder", 64

    def encode(self, texts: Any) -> np.ndarray:
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split()[:64]:
                h = zlib.crc32(w.encode())
                out[i, h % self.dim] += 1.0 if (h >> 20) & 1 else -1.0
        n = np.linalg.norm(out, axis=1, keepdims=True)
        n[n == 0] = 1.0
        return out / n


def sessions(conv: Any, n: int) -> Any:
    return conv.model_copy(update={"sessions": [s for s in conv.sessions if s.turns][:n]})


def run(ctx: Any, counter: CountingEncoder, convs: list[Any], out: Path) -> dict[str, Any]:
    c0, p0, t0 = counter.calls, counter.prompt_tokens, time.perf_counter()
    s = run_local_build_items(ctx.cfg, [AdapterItem(file="bench", line=i, conversation=c) for i, c in enumerate(convs)],
                              out, backend="rules", ctx=ctx)
    assert s.failed == 0, s.errors
    return {"wall_s": round(time.perf_counter() - t0, 3), "encode_calls": counter.calls - c0,
            "prompt_tokens": counter.prompt_tokens - p0, "built": s.built, "appended": s.appended, "skipped": s.skipped,
            "turns": sum(c.num_turns for c in convs)}


def tables(root: Path) -> dict[str, Any]:
    return {m.conversation_id: [read_part(root, t, m) for t in ("records", "segments", "nodes")] for m in iter_markers(root)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--conversations", default="26,30,41", help="LoCoMo sample numbers (files NN.json)")
    ap.add_argument("--base-sessions", type=int, default=5, help="n: the store holds sessions 1..n, the re-run adds n+1")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--embedding", choices=("local", "hash"), default="local")
    ap.add_argument("--out", default="benchmarks/results/append_daily.json")
    args = ap.parse_args()

    cfg = load_config(env={})
    embedder = HashEmbedder() if args.embedding == "hash" else None
    ctx = make_context(cfg, "rules", embedder)
    counter = CountingEncoder(ctx.encoder, cfg)
    ctx.encoder = counter
    convs = [next(iter(read_input("locomo", LOCOMO / f"{n}.json"))).conversation for n in args.conversations.split(",")]
    n = args.base_sessions
    base, grown = [sessions(c, n) for c in convs], [sessions(c, n + 1) for c in convs]
    work = Path(tempfile.mkdtemp(prefix="lychee-append-bench-"))
    rows = []
    try:
        run(ctx, counter, grown, work / "warmup")  # the model's first calls are slower
        for r in range(args.repeats):
            seed = work / f"base-{r}"
            base_run = run(ctx, counter, base, seed)
            inc_store, full_store = work / f"inc-{r}", work / f"full-{r}"
            shutil.copytree(seed, inc_store)
            increment = run(ctx, counter, grown, inc_store)
            full = run(ctx, counter, grown, full_store)
            a, b = tables(inc_store), tables(full_store)
            same = {cid: all(x.equals(y) for x, y in zip(a[cid], b[cid])) for cid in b}
            rows.append({"base": base_run, "increment": increment, "full_rebuild": full, "identical_to_rebuild": same,
                         "verify_ok": verify_store(inc_store)["ok"]})
            print(f"repeat {r}: increment {increment['wall_s']} s / {increment['encode_calls']} calls; "
                  f"rebuild {full['wall_s']} s / {full['encode_calls']} calls; identical {all(same.values())}", flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    def med(phase: str, key: str) -> float:
        return statistics.median(r[phase][key] for r in rows)

    summary = {k: {"increment": med("increment", k), "full_rebuild": med("full_rebuild", k),
                   "ratio": round(med("increment", k) / med("full_rebuild", k), 4) if med("full_rebuild", k) else None}
               for k in ("wall_s", "encode_calls", "prompt_tokens")}
    report = {
        "benchmark": "append.daily_incremental_build",
        "conversations": [c.conversation_id for c in convs], "base_sessions": n, "added_session": n + 1,
        "turns_base": sum(c.num_turns for c in base), "turns_added": sum(c.num_turns for c in grown) - sum(c.num_turns for c in base),
        "embedding": ctx.embedder_name, "backend": "rules (LLM side: encode calls + openai prompt tokens they would send)",
        "repeats": rows, "median": summary,
        "identical_to_rebuild": all(all(r["identical_to_rebuild"].values()) for r in rows),
        "verify_ok": all(r["verify_ok"] for r in rows),
        "command": " ".join(["python", *sys.argv]),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1))
    print(json.dumps({"median": summary, "identical_to_rebuild": report["identical_to_rebuild"],
                      "verify_ok": report["verify_ok"]}, indent=1))


if __name__ == "__main__":
    main()
