"""Load benchmark of the query service: /v1/search under C concurrent clients vs the same search in-process.

    python benchmarks/serve_load.py --concurrency 8 --requests 400 --out benchmarks/results/serve_load.json
    python benchmarks/serve_load.py --memory /tmp/locomo_rules --out /tmp/serve_load.json

Without ``--memory`` it reuses (or builds, several minutes) a ``rules`` store of LoCoMo under
``--cache-dir`` (default ``$LYCHEE_CACHE_DIR`` or /tmp/lychee-cache). It starts local Ray + Serve on
127.0.0.1, warms every replica's cache, then sends the LoCoMo questions (categories 1-4, cycled in a
fixed shuffled order) to ``POST /v1/search`` from C concurrent httpx async clients for N requests.
It also measures a serial HTTP pass (concurrency 1: Serve's own overhead) and, after Serve is shut
down, the same searches in-process (``MemoryStore.search``, same config and torch threads).

Writes ``{"requests", "errors", "concurrency", "rps", "p50_ms", "p95_ms", "p99_ms", "inproc_p50_ms", ...}``
plus the server-side time per request, embedding batching counts, the machine's load average and
the CPU milliseconds each request cost per process kind (client, proxy, replica, controller, Ray
system processes) — latency on a shared 2-core machine moves with whatever else runs, CPU per
request does not, so it is the figure to compare changes with.

``--synthetic N`` serves a store of N small synthetic conversations instead (built once with the
rules backend under ``--cache-dir``) and asks one question per conversation, round-robin over all
of them, to show that a bounded cache (e.g. ``--set serve.cache_max_conversations=16``) keeps the
replica's resident memory flat while every conversation is served (``replica_rss_during_run``:
first, peak and last RSS of every replica, sampled every 0.25 s through the measured run).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import secrets
import socket
import statistics
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the in-process baseline runs with the thread environment Ray gives its workers (one BLAS/OpenMP
# thread), set before numpy loads, so both sides do the same work the same way
for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

from lychee_ray.config import load_config  # noqa: E402

DEFAULT_DATA = ROOT.parent / "shared" / "data" / "locomo"
CATEGORIES = {"1", "2", "3", "4"}  # the paper's 1,540 LoCoMo questions


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return round(s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))], 2)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def ensure_synthetic_store(args: argparse.Namespace) -> Path:
    from lychee_ray.ingest.runner import run_local_build
    from lychee_ray.testing.synthetic import write_jsonl

    store = Path(args.cache_dir) / f"synthetic_{args.synthetic}"
    if (store / "manifest.json").exists():
        print(f"reusing store {store}", file=sys.stderr)
        return store
    store.parent.mkdir(parents=True, exist_ok=True)
    src = Path(args.cache_dir) / f"synthetic_{args.synthetic}.jsonl"
    write_jsonl(str(src), args.synthetic, seed=args.seed, sessions=2, topics_per_session=2)
    t0 = time.perf_counter()
    run_local_build(load_config(), "jsonl", src, store, backend="rules")
    print(f"built {store} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return store


def synthetic_questions(store: Path) -> list[dict[str, Any]]:
    """One question per conversation, from its own first user turn."""
    from lychee_ray.io.store import StoreReader, read_part

    reader = StoreReader(store)
    out = []
    for cid in reader.conversation_ids():
        turns = read_part(store, "turns", reader.markers[cid]).to_pydict()
        first = next(c for c, r in zip(turns["content"], turns["role"]) if r == "user")
        words = first.split()[:8]
        out.append({"conversation_id": cid, "question": "What did I say about " + " ".join(words).rstrip(".") + "?",
                    "question_date": max(d for d in turns["session_started_at"] if d)})
    return out


def ensure_store(args: argparse.Namespace) -> Path:
    if args.memory:
        return Path(args.memory)
    if args.synthetic:
        return ensure_synthetic_store(args)
    store = Path(args.cache_dir) / "locomo_rules"
    if (store / "manifest.json").exists():
        print(f"reusing store {store}", file=sys.stderr)
        return store
    from lychee_ray.ingest.runner import run_local_build

    print(f"building a rules store of {args.data} into {store} (several minutes on a small machine)", file=sys.stderr)
    t0 = time.perf_counter()
    summary = run_local_build(load_config(), "locomo", args.data, store, backend="rules")
    print(f"built in {time.perf_counter() - t0:.0f} s: {summary.to_dict() if hasattr(summary, 'to_dict') else summary}",
          file=sys.stderr)
    return store


def load_questions(data: str, known: set[str]) -> list[dict[str, Any]]:
    from lychee_ray.io.adapters import read_input

    out = []
    for item in read_input("locomo", data):
        conv = item.conversation
        if conv is None or conv.conversation_id not in known:
            continue
        dates = [s.started_at for s in conv.sessions if s.started_at]
        last = str(max(dates)) if dates else None
        for qa in item.qa:
            if qa.category in CATEGORIES:
                out.append({"conversation_id": qa.conversation_id, "question": qa.question,
                            "question_date": qa.question_date or last})
    return out


async def drive(url: str, token: str, bodies: list[dict[str, Any]], concurrency: int, timeout: float) -> dict[str, Any]:
    """Send every body to /v1/search from ``concurrency`` workers; latencies of the 200s."""
    import httpx

    lat: list[float] = []
    server: list[float] = []
    codes: dict[str, int] = {}
    samples: list[str] = []
    scope_violations = 0
    nxt = 0
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits,
                                 headers={"Authorization": f"Bearer {token}"}) as client:
        async def worker() -> None:
            nonlocal nxt, scope_violations
            while nxt < len(bodies):
                b = bodies[nxt]
                nxt += 1
                t0 = time.perf_counter()
                try:
                    r = await client.post("/v1/search", json=b)
                    code = str(r.status_code)
                except Exception as e:  # noqa: BLE001 — counted as an error
                    code = type(e).__name__
                    r = None
                dt = (time.perf_counter() - t0) * 1000.0
                codes[code] = codes.get(code, 0) + 1
                if r is not None and r.status_code == 200:
                    lat.append(dt)
                    d = r.json()
                    server.append(d["timings"].get("server", 0.0))
                    scope_violations += any(e["conversation_id"] != b["conversation_id"] for e in d["evidence"])
                elif len(samples) < 5:
                    samples.append(f"{code}: {r.text[:200] if r is not None else ''}")

        t0 = time.perf_counter()
        await asyncio.gather(*[worker() for _ in range(concurrency)])
        wall = time.perf_counter() - t0
    return {"lat": lat, "server": server, "codes": codes, "samples": samples, "wall": wall,
            "scope_violations": scope_violations}


# process kinds for the CPU accounting (matched against the command line)
PROCESS_KINDS = (("replica", "ServeReplica"), ("proxy", "ProxyActor"), ("controller", "ServeController"),
                 ("ray_system", "raylet"), ("ray_system", "gcs_server"), ("ray_system", "dashboard"),
                 ("ray_system", "log_monitor"), ("ray_system", "ray/_private"), ("ray_system", "runtime_env"))


def cpu_snapshot() -> dict[int, tuple[str, float]]:
    """CPU seconds (user + system) of this process and of every Ray/Serve process, by kind."""
    import psutil

    out: dict[int, tuple[str, float]] = {}
    me = os.getpid()
    for proc in psutil.process_iter(["pid", "cmdline"]):
        try:
            if proc.pid == me:
                kind = "client"
            else:
                cmd = " ".join(proc.info["cmdline"] or [])
                kind = next((k for k, pat in PROCESS_KINDS if pat in cmd), "")
                if not kind:
                    continue
            t = proc.cpu_times()
            out[proc.pid] = (kind, t.user + t.system)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue
    return out


class ReplicaRss:
    """Resident memory (MiB) of every Serve replica process, sampled in a thread during a run:
    first sample, peak and last per replica (what a bounded cache must keep flat)."""

    def __init__(self, pids: list[int], interval_s: float = 0.25) -> None:
        import psutil

        self.procs = [psutil.Process(pid) for pid in pids]
        self.interval_s = interval_s
        self.samples: dict[int, list[float]] = {p.pid: [] for p in self.procs}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        import psutil

        while True:
            for p in self.procs:
                try:
                    self.samples[p.pid].append(p.memory_info().rss / 2**20)
                except psutil.Error:  # a replica that went away stops being sampled
                    continue
            if self._stop.wait(self.interval_s):
                return

    def __enter__(self) -> "ReplicaRss":
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        self._thread.join()

    def report(self) -> dict[str, Any]:
        xs = [v for v in self.samples.values() if v]
        return {"replicas": len(xs), "samples": sum(len(v) for v in xs),
                "first_mb": [round(v[0], 1) for v in xs], "peak_mb": [round(max(v), 1) for v in xs],
                "last_mb": [round(v[-1], 1) for v in xs]}


def cpu_per_request(before: dict[int, tuple[str, float]], after: dict[int, tuple[str, float]], n: int) -> dict[str, float]:
    """CPU milliseconds per request by process kind over a run of ``n`` requests (noise-robust:
    it does not depend on what else the machine runs, unlike latency)."""
    by: dict[str, float] = {}
    for pid, (kind, t1) in after.items():
        t0 = before.get(pid, (kind, 0.0))[1]
        by[kind] = by.get(kind, 0.0) + max(0.0, t1 - t0)
    out = {k: round(v * 1000.0 / max(n, 1), 2) for k, v in sorted(by.items())}
    out["total"] = round(sum(by.values()) * 1000.0 / max(n, 1), 2)
    out["service"] = round(sum(v for k, v in by.items() if k != "client") * 1000.0 / max(n, 1), 2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--requests", type=int, default=400)
    ap.add_argument("--memory", default=None, help="store directory (default: build or reuse a LoCoMo rules store)")
    ap.add_argument("--data", default=str(DEFAULT_DATA))
    ap.add_argument("--cache-dir", default=os.environ.get("LYCHEE_CACHE_DIR", "/tmp/lychee-cache"))
    ap.add_argument("--out", required=True)
    ap.add_argument("--replicas", type=int, default=os.cpu_count() or 1,
                    help="serve.replicas (default: one per CPU core — a replica runs one search at a time, "
                         "replicas are the unit of parallelism)")
    ap.add_argument("--serial-requests", type=int, default=100, help="HTTP requests at concurrency 1 (0 = skip)")
    ap.add_argument("--inproc-requests", type=int, default=200, help="in-process searches for inproc_p50_ms")
    ap.add_argument("--timeout", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--synthetic", type=int, default=0, metavar="N",
                    help="serve N synthetic conversations (built once) instead of LoCoMo")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = ap.parse_args(argv)

    load_before = os.getloadavg()
    t_all = time.perf_counter()
    store = ensure_store(args)
    cfg = load_config(sets=args.set)
    cfg.serve.host = "127.0.0.1"
    cfg.serve.token = secrets.token_urlsafe(16)
    if args.replicas is not None:
        cfg.serve.replicas = args.replicas
    # the benchmark must measure the service, not shed it: queue room for every client
    cfg.serve.max_queued_requests = max(cfg.serve.max_queued_requests, args.concurrency * 2)

    from lychee_ray.io.store import StoreReader

    known = set(StoreReader(store).conversation_ids())
    questions = synthetic_questions(store) if args.synthetic else load_questions(args.data, known)
    if not questions:
        print(f"no LoCoMo questions for the conversations in {store}", file=sys.stderr)
        return 2
    rng = random.Random(args.seed)
    order = questions[:]
    if not args.synthetic:  # synthetic: round-robin over every conversation, worst case for the cache
        rng.shuffle(order)
    bodies = [order[i % len(order)] for i in range(args.requests)]
    cids = sorted({q["conversation_id"] for q in questions})
    replicas = cfg.serve.replicas

    import ray

    from lychee_ray.ray.serve import apply_ray_env, start_service, stop_service

    ray_env = apply_ray_env(cfg)
    ray.init(include_dashboard=False, object_store_memory=256 * 1024 * 1024, log_to_driver=False)
    try:
        # the port is chosen once Ray runs: its own processes take random ports as they start
        cfg.serve.port = free_port()
        t0 = time.perf_counter()
        url = start_service(store, cfg, name="lychee-bench")
        ready_s = time.perf_counter() - t0
        # warm: every conversation (as many as the cache holds) into every replica's cache
        auth = {"Authorization": f"Bearer {cfg.serve.token}"}
        import httpx

        warm_cids = cids[: cfg.serve.cache_max_conversations]
        warm = [next(q for q in questions if q["conversation_id"] == c) for c in warm_cids] * (2 * replicas)
        w = asyncio.run(drive(url, cfg.serve.token, warm, min(args.concurrency, 2 * replicas), args.timeout))
        stats_warm = httpx.get(url + "/v1/admin/stats", headers=auth).json()
        serial = asyncio.run(drive(url, cfg.serve.token, bodies[: args.serial_requests], 1, args.timeout)) \
            if args.serial_requests else None
        load_mid = os.getloadavg()
        cpu0 = cpu_snapshot()
        # the replicas as the CPU accounting classifies them (PROCESS_KINDS)
        with ReplicaRss([pid for pid, (kind, _) in cpu0.items() if kind == "replica"]) as rss:
            res = asyncio.run(drive(url, cfg.serve.token, bodies, args.concurrency, args.timeout))
        cpu1 = cpu_snapshot()
        load_after = os.getloadavg()
        stats = httpx.get(url + "/v1/admin/stats", headers=auth).json()
    finally:
        stop_service("lychee-bench")
        ray.shutdown()

    # the same searches in-process (Serve is down: it does not compete for the CPUs)
    from lychee_ray.memory import MemoryStore
    from lychee_ray.ray.serve import apply_thread_limits

    apply_thread_limits(cfg)
    inproc: list[float] = []
    inproc_cpu = 0.0
    with MemoryStore.open(store, cfg) as ms:
        for c in cids[: cfg.serve.cache_max_conversations]:
            ms.view(c)
        ms.search(cids[0], "warm-up question about the weekend", None)
        c0 = time.process_time()
        for b in bodies[: args.inproc_requests]:
            t0 = time.perf_counter()
            ms.search(b["conversation_id"], b["question"], b["question_date"])
            inproc.append((time.perf_counter() - t0) * 1000.0)
        inproc_cpu = (time.process_time() - c0) * 1000.0 / max(1, len(inproc))

    lat = res["lat"]
    errors = sum(n for c, n in res["codes"].items() if c != "200")
    inproc_p50 = pct(inproc, 0.5)
    p50 = pct(lat, 0.5)
    serial_p50 = pct(serial["lat"], 0.5) if serial else None
    report = {
        "requests": args.requests,
        "errors": errors,
        "concurrency": args.concurrency,
        "rps": round(len(lat) / res["wall"], 2) if res["wall"] else None,
        "p50_ms": p50,
        "p95_ms": pct(lat, 0.95),
        "p99_ms": pct(lat, 0.99),
        "inproc_p50_ms": inproc_p50,
        "inproc_p95_ms": pct(inproc, 0.95),
        "inproc_requests": len(inproc),
        # CPU per request by process (client = this load generator) vs the in-process search's CPU
        "cpu_ms_per_request": cpu_per_request(cpu0, cpu1, len(bodies)),
        "inproc_cpu_ms_per_request": round(inproc_cpu, 2),
        "mean_ms": round(statistics.fmean(lat), 2) if lat else None,
        "server_p50_ms": pct(res["server"], 0.5),  # time inside the replica (queue for a worker + search)
        "overhead_p50_ms": round(p50 - inproc_p50, 2) if p50 is not None and inproc_p50 is not None else None,
        "serial": {"requests": len(serial["lat"]), "p50_ms": serial_p50, "p95_ms": pct(serial["lat"], 0.95),
                   "server_p50_ms": pct(serial["server"], 0.5),
                   "overhead_p50_ms": round(serial_p50 - inproc_p50, 2) if serial_p50 and inproc_p50 else None}
        if serial else None,
        "status_counts": res["codes"],
        "error_samples": res["samples"],
        "warmup_errors": sum(n for c, n in w["codes"].items() if c != "200"),
        "service": {"replicas": replicas, "replica_num_cpus": cfg.serve.replica_num_cpus,
                    "max_ongoing_requests": cfg.serve.max_ongoing_requests,
                    "max_queued_requests": cfg.serve.max_queued_requests, "batch_max_size": cfg.serve.batch_max_size,
                    "batch_wait_ms": cfg.serve.batch_wait_ms, "torch_threads": cfg.serve.torch_threads,
                    "search_threads": cfg.serve.search_threads, "batch_embeddings": cfg.serve.batch_embeddings,
                    "access_log": cfg.serve.access_log, "embedding_runtime": cfg.embedding.runtime,
                    "query_quantization": cfg.embedding.query_quantization, "ray_env": ray_env,
                    "ready_s": round(ready_s, 1)},
        "scope_violations": res["scope_violations"],
        "replica_stats_sample": {"embedding": stats.get("embedding"), "cache": stats.get("cache"),
                                 "rss_bytes": stats.get("rss_bytes"), "rss_bytes_after_warmup": stats_warm.get("rss_bytes"),
                                 "cache_after_warmup": stats_warm.get("cache")},
        "replica_rss_during_run": rss.report(),
        "conversations_queried": len({b["conversation_id"] for b in bodies}),
        "store": str(store),
        "conversations": len(cids),
        "questions": len(questions),
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "loadavg_before": [round(x, 2) for x in load_before],
                    "loadavg_before_measured_run": [round(x, 2) for x in load_mid],
                    "loadavg_after_measured_run": [round(x, 2) for x in load_after]},
        "wall_s": round(time.perf_counter() - t_all, 1),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: report[k] for k in ("requests", "errors", "concurrency", "rps", "p50_ms", "p95_ms", "p99_ms",
                                             "inproc_p50_ms", "server_p50_ms", "overhead_p50_ms", "cpu_ms_per_request",
                                             "inproc_cpu_ms_per_request")}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
