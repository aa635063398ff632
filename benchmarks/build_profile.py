"""Where the CPU of a build goes, stage by stage, in core-seconds per turn (issue 37).

    python benchmarks/build_profile.py --input ../shared/data/locomo --format locomo \
        --out benchmarks/results/build_profile_locomo.json --ray

Runs the build's stage functions (lychee_ray/ingest/stages/) in this process one stage at a time
over the whole input — decide, embed turns, build (segmenting, encoding, nodes, the rest of
assembling), embed records and nodes, commit (FAISS index build, index and Parquet writes, the rest)
— and charges each the process CPU time (user + system of every thread: ONNX Runtime's included)
it used. Nothing else runs meanwhile, so the stages add up to the whole. The models are loaded
first (not charged). ``rules`` backend (no LLM: encoding is the rules encoder alone).

(The pre-stage baseline, ``--baseline``, went with the one-conversation path it ran; its figures
stay in docs/build-cost.md with the commit that measured them. ``benchmarks/cli_build_ab.py``
compares two trees' whole builds.) ``--ray`` builds it again as the Ray job in a fresh process with its own local Ray,
charges that process tree's CPU (every Ray process, sampled while it lives: lychee_ray/testing/cpu.py), and reports what the job costs beyond the
stages: a one-conversation run first measures the fixed start-up (Ray, actors, models), the rest
per turn is Ray's overhead (transport between stages, scheduling, actors' event loops).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import textwrap
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.ingest import pipeline  # noqa: E402
from lychee_ray.ingest.commit import Committer  # noqa: E402
from lychee_ray.ingest.construct import Constructor  # noqa: E402
from lychee_ray.ingest.context import make_context  # noqa: E402
from lychee_ray.ingest.decide import Decider  # noqa: E402
from lychee_ray.ingest.runner import finish_run, manifest_info  # noqa: E402
from lychee_ray.ingest.stages.embedding import embed_memory, embed_turns  # noqa: E402
from lychee_ray.ingest.outcomes import BuildSummary  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.io.adapters import read_input  # noqa: E402
from lychee_ray.io.store import StoreWriter  # noqa: E402
from lychee_ray.io.store import writer as writer_mod  # noqa: E402
from lychee_ray.testing.fresh_process import RESULT_MARK, run_json_script  # noqa: E402

def cpu() -> float:
    """This process's CPU seconds (all threads)."""
    return time.process_time()


class Ledger:
    """CPU seconds by stage; :meth:`wrap` charges a function's calls to a stage (nested calls
    are charged to the innermost stage only)."""

    def __init__(self) -> None:
        self.s: dict[str, float] = defaultdict(float)
        self._stack: list[str] = []

    def charge(self, stage: str, seconds: float) -> None:
        self.s[stage] += seconds

    def wrap(self, module: Any, name: str, stage: str) -> None:
        fn = getattr(module, name)
        ledger = self
        if asyncio.iscoroutinefunction(fn):
            async def awrapped(*a: Any, **k: Any) -> Any:
                ledger._stack.append(stage)
                t0 = cpu()
                try:
                    return await fn(*a, **k)
                finally:
                    ledger._exit(stage, cpu() - t0)
            setattr(module, name, awrapped)
        else:
            def wrapped(*a: Any, **k: Any) -> Any:
                ledger._stack.append(stage)
                t0 = cpu()
                try:
                    return fn(*a, **k)
                finally:
                    ledger._exit(stage, cpu() - t0)
            setattr(module, name, wrapped)

    def _exit(self, stage: str, spent: float) -> None:
        self._stack.pop()
        self.s[stage] += spent
        if self._stack:  # the enclosing stage does not pay for this part again
            self.s[self._stack[-1]] -= spent

    def timed(self, stage: str, fn: Callable[[], Any]) -> Any:
        self._stack.append(stage)
        t0 = cpu()
        try:
            return fn()
        finally:
            self._exit(stage, cpu() - t0)


def instrument(ledger: Ledger) -> None:
    """Charge the build's steps to their stages (the functions the stages call, by module)."""
    ledger.wrap(pipeline, "conversation_turn_inputs", "segmenting")
    ledger.wrap(pipeline, "segment_stream", "segmenting")
    ledger.wrap(pipeline, "encode_segments", "encoding (rules, no LLM)")
    ledger.wrap(pipeline, "build_nodes", "nodes")
    ledger.wrap(writer_mod, "build_flat_index", "index build (FAISS)")
    ledger.wrap(writer_mod, "write_index", "writes (index files)")
    ledger.wrap(writer_mod, "write_parquet", "writes (Parquet)")


def profile_stages(cfg: Any, items: list[Any], out: Path, batch: int) -> dict[str, Any]:
    """Every stage over the whole input, one after the other; CPU seconds by stage."""
    ledger = Ledger()
    instrument(ledger)
    ctx = make_context(cfg, "rules")
    ledger.timed("model load (fixed)", lambda: asyncio.run(ctx.embed(["warm up"])))
    ledger.timed("model load (fixed)", lambda: asyncio.run(ctx.memory_embed(["warm up"])))
    writer = StoreWriter(out, cfg.store)
    run_id = "profile"
    decider = Decider(writer, run_id, ctx.fingerprint, cfg.segmenter.max_turn_chars)
    constructor, committer = Constructor(ctx, writer, 1), Committer(writer)
    works = ledger.timed("decide", lambda: [decider.decide(i) for i in items])
    chunks = [works[i:i + batch] for i in range(0, len(works), batch)]
    mc = cfg.segmenter.max_turn_chars
    for c in chunks:
        ledger.timed("embedding turns", lambda: asyncio.run(embed_turns(c, ctx.embed, ctx.embed_dim, mc)))
    for w in works:
        ledger.timed("build (other: turns table, digests, vector plan)", lambda: asyncio.run(constructor.run([w])))
    for c in chunks:
        ledger.timed("embedding records and nodes", lambda: asyncio.run(embed_memory(c, ctx.memory_embed, ctx.embed_dim)))
    summary = BuildSummary()
    for w in works:  # one at a time: the commit writes in a worker thread, and the ledger charges one step at a time
        for o in ledger.timed("commit (other: marker, lock, ids, segment state, old generations)",
                              lambda: asyncio.run(committer.run([w]))):
            if o is not None:  # (None: decided again — no other writer here)
                summary.add(o)
    ledger.timed("finish (errors, garbage sweep, manifest)", lambda: finish_run(
        writer, summary, run_id, manifest_info(cfg, "rules", summary, "profile"), 0))
    return {"cpu_s": {k: round(v, 3) for k, v in ledger.s.items()}, "summary": summary.to_dict()}


RAY_SCRIPT = textwrap.dedent("""
    import json, os, sys, time
    sys.path.insert(0, {root!r})
    from lychee_ray.config import load_config
    from lychee_ray.ray.build_job import run_ray_build
    from lychee_ray.ray.runtime import init_ray
    from lychee_ray.testing.cpu import CpuSampler, ProcessLabels, sample_by_process, totals_by_label
    cfg = load_config(env={{}}, sets={sets!r})
    labels = ProcessLabels(os.getpid())
    tree = lambda: sample_by_process(os.getpid(), labels)
    with CpuSampler(tree) as cpu:
        init_ray(cfg)
    out = {{"ray_start_cpu_s": round(sum(cpu.totals().values()), 2)}}
    for name, fmt, path, store in {runs!r}:
        w0 = time.perf_counter()
        with CpuSampler(tree, interval_s=0.25) as cpu:
            s = run_ray_build(cfg, fmt, path, store, backend="rules", progress=False)
        by = totals_by_label(cpu.totals(), labels)
        out[name] = {{"cpu_s": round(sum(by.values()), 2), "wall_s": round(time.perf_counter() - w0, 2),
                     "built": s.built, "failed": s.failed, "cpu_s_by_process": by}}
    print({mark!r} + json.dumps(out))
""")


def profile_ray(fmt: str, path: str, work: Path, sets: list[str], one: Path) -> dict[str, Any]:
    """The Ray job in a fresh process (its own local Ray): a one-conversation run (fixed costs),
    then the whole input; CPU of that process tree for each."""
    runs = [("one_conversation", "jsonl", str(one), str(work / "ray_one")),
            ("input", fmt, path, str(work / "ray_store"))]
    return run_json_script(RAY_SCRIPT.format(root=str(ROOT), sets=sets, runs=runs, mark=RESULT_MARK), ROOT)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--input", required=True)
    ap.add_argument("--format", default="locomo")
    ap.add_argument("--out", required=True, help="JSON result file")
    ap.add_argument("--ray", action="store_true", help="also the Ray job, in a fresh process")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)

    cfg = load_config(env={}, sets=["build.compact_conversations_per_file=0", *args.set])
    items = list(read_input(args.format, args.input))
    turns = sum(i.conversation.num_turns for i in items if i.conversation is not None)
    work = Path(tempfile.mkdtemp(prefix="lychee-profile-"))
    result: dict[str, Any] = {"input": args.input, "format": args.format, "conversations": len(items), "turns": turns,
                              "cpus": os.cpu_count(), "load_avg_1m_at_start": round(os.getloadavg()[0], 2)}
    staged = profile_stages(cfg, items, work / "staged", cfg.ray.stages.embed_turns.batch_size)
    per_stage = staged["cpu_s"]
    total = sum(v for k, v in per_stage.items() if "fixed" not in k)
    result["stages"] = {k: {"cpu_s": v, "core_s_per_turn": round(v / turns, 6)} for k, v in
                        sorted(per_stage.items(), key=lambda kv: -kv[1])}
    result["staged_cpu_s"] = round(total, 3)
    result["staged_core_s_per_turn"] = round(total / turns, 6)
    result["summary"] = staged["summary"]
    if args.ray:
        first = next(i for i in items if i.conversation is not None)
        one = work / "one.jsonl"
        one.write_text(first.conversation.model_dump_json() + "\n")
        ray = profile_ray(args.format, args.input, work, ["build.compact_conversations_per_file=0", *args.set], one)
        fixed = ray["one_conversation"]["cpu_s"] - first.conversation.num_turns * total / turns
        overhead = ray["input"]["cpu_s"] - fixed - total
        ray["fixed_startup_cpu_s"] = round(fixed, 2)
        ray["core_s_per_turn_all_processes"] = round(ray["input"]["cpu_s"] / turns, 6)
        ray["core_s_per_turn_without_fixed_startup"] = round((ray["input"]["cpu_s"] - fixed) / turns, 6)
        ray["ray_overhead_core_s_per_turn"] = round(overhead / turns, 6)
        result["ray"] = ray
    result["load_avg_1m_at_end"] = round(os.getloadavg()[0], 2)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
