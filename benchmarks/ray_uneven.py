"""The Ray build job over conversations of very different lengths: when each conversation is committed,
the tail after the last short one, CPU and utilisation per stage, the object store's peak, and whether
the store equals a local build.

    python benchmarks/ray_uneven.py --input DIR --format beam [--local-store S] \
        [--set ray.stages.build.batch_size=4 ...] --out benchmarks/results/ray_uneven.json

DIR holds e.g. BEAM 100K 2-5 and 500K 1 (folders named so that their ids differ). The job runs in a
fresh process with its own local Ray (``run_ray_build``, rules backend, the given ``--set``s). Sampled
there every half second: each process's CPU (lychee_ray/testing/cpu.py, labelled by its Ray actor; a
stage's utilisation = its actors' CPU seconds / the job's wall) and the plasma store's usage (Ray's
memory summary). Commit times come from the store's markers (``committed_at``), relative to the job's
start; "short" conversations are those with fewer than half the longest one's turns, and the tail is
the job's time after the last of them was committed. With ``--local-store`` (a
``--local`` build of the same input) each conversation's record ids and texts are compared.
"""

from __future__ import annotations

import argparse
import os
import sys
import textwrap
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402
from lychee_ray.testing.fresh_process import RESULT_MARK, run_json_script  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402

# actor class name in a worker's process title -> build stage
STAGE_ACTORS = {"DecideStage": "decide", "EmbedTurnsStage": "embed_turns", "BuildStage": "build",
                "EmbedMemoryStage": "embed_memory", "CommitStage": "commit", "ProgressActor": "progress"}

JOB_SCRIPT = textwrap.dedent("""
    import json, os, re, sys, threading, time
    from datetime import datetime, timezone
    sys.path.insert(0, {root!r})
    from lychee_ray.config import load_config
    from lychee_ray.ray.build_job import run_ray_build
    from lychee_ray.ray.runtime import init_ray
    from lychee_ray.testing.cpu import CpuSampler, ProcessLabels, sample_by_process, totals_by_label
    cfg = load_config(env={{}}, sets={sets!r})
    labels = ProcessLabels(os.getpid())
    tree = lambda: sample_by_process(os.getpid(), labels)
    init_ray(cfg)
    from ray._private.internal_api import memory_summary
    plasma = []
    stop = threading.Event()
    def watch():
        while not stop.is_set():
            m = re.search(r"Plasma memory usage (\\d+) MiB", memory_summary(stats_only=True))
            if m:
                plasma.append(int(m.group(1)))
            stop.wait(0.5)
    t = threading.Thread(target=watch, daemon=True)
    started = datetime.now(timezone.utc).isoformat()
    w0 = time.perf_counter()
    t.start()
    with CpuSampler(tree, interval_s=0.5) as cpu:
        s = run_ray_build(cfg, {fmt!r}, {path!r}, {store!r}, backend="rules", progress=False)
    wall = time.perf_counter() - w0
    stop.set()
    print({mark!r} + json.dumps({{"started": started, "wall_s": round(wall, 2), "built": s.built, "failed": s.failed,
                                  "cpu_s_by_process": totals_by_label(cpu.totals(), labels),
                                  "plasma_peak_mib": max(plasma, default=None), "plasma_samples": len(plasma)}}))
""")


def stage_of(label: str) -> str:
    return next((stage for name, stage in STAGE_ACTORS.items() if name in label), "other")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--input", required=True)
    ap.add_argument("--format", default="beam")
    ap.add_argument("--store", default=None, help="where the job writes (default: a folder beside --out)")
    ap.add_argument("--local-store", default=None, help="a --local build of the same input, to compare with")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    store = Path(args.store or Path(args.out).with_suffix(".store"))
    if store.exists():
        raise SystemExit(f"{store} exists: the job must build every conversation")
    script = JOB_SCRIPT.format(root=str(ROOT), sets=args.set, fmt=args.format, path=str(Path(args.input).resolve()),
                               store=str(store), mark=RESULT_MARK)
    job = run_json_script(script, ROOT)
    t0 = datetime.fromisoformat(job["started"])
    cfg = load_config()
    convs: dict[str, Any] = {}
    with MemoryStore.open(store, cfg, llm="rules") as ms:
        for cid in sorted(ms.conversation_ids()):
            v = ms.view(cid)
            at = (datetime.fromisoformat(v.committed_at) - t0).total_seconds() if v.committed_at else None
            convs[cid] = {"turns": v.num_turns, "records": v.num_records, "committed_at_s": round(at, 1) if at else None}
        if args.local_store:
            with MemoryStore.open(args.local_store, cfg, llm="rules") as ref:
                for cid in convs:
                    a, b = ms.view(cid), ref.view(cid)
                    convs[cid]["equals_local"] = a.record_ids == b.record_ids and a.record_text == b.record_text
    longest = max(c["turns"] for c in convs.values())
    short = [c["committed_at_s"] for c in convs.values() if 2 * c["turns"] < longest and c["committed_at_s"] is not None]
    wall = job["wall_s"]
    by_stage: dict[str, float] = {}
    for label, sec in job["cpu_s_by_process"].items():
        by_stage[stage_of(label)] = round(by_stage.get(stage_of(label), 0.0) + sec, 2)
    report = {
        "input": args.input, "sets": args.set, "wall_s": wall, "built": job["built"], "failed": job["failed"],
        "conversations": convs,
        "last_short_committed_s": max(short, default=None),
        "tail_after_last_short_s": round(wall - max(short), 1) if short else None,
        "cpu_s_by_stage": by_stage,
        "utilisation_by_stage": {k: round(v / wall, 3) for k, v in by_stage.items()},
        "cpu_s_by_process": job["cpu_s_by_process"],
        "plasma_peak_mib": job["plasma_peak_mib"],
        "cpus": os.cpu_count(), "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
    }
    if args.local_store:
        report["equals_local"] = all(c.get("equals_local") for c in convs.values())
    write_result(report, Path(args.out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
