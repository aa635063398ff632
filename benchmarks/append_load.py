"""Append latency through Ray Serve under load: W writers on different conversations plus R readers.

    python benchmarks/append_load.py --out benchmarks/results/append_load.json
    python benchmarks/append_load.py --writers 8 --readers 8 --turns 10 --out /tmp/append_load.json

A base store holds ``--writers`` LoCoMo conversations with their first ``--base-sessions`` sessions
(rules backend; built once under ``--cache-dir``). Each writer then posts its conversation's next
turns, ``--turns-per-request`` per ``POST /v1/conversations/{id}/turns`` (one by default: the
latency per turn), while R readers send that conversation set's LoCoMo questions to ``/v1/search``
until the writers are done. The same run measures two baselines:

* ``search_alone``: the readers before any writer starts (same Serve, same store);
* ``inproc_append``: after Serve is shut down, the same appends through the library
  (``MemoryStore.append``, W threads, same embedder and config) on a fresh copy of the base store.

Writes JSON: per-turn append p50/p95 (client and server side), search p50/p95 with and without
writers, the in-process append p50/p95, and the ratios (Serve / in-process append; search with /
without writers), plus what the appends encoded and the machine's load. ``capacity`` relates the
two gates to the CPU (all processes, from /proc/stat): CPU per search and per append, and the
share of the machine 8 closed-loop writers need at the append p50 gate next to the share the
search gate leaves them while the readers saturate it. Latency on a shared small machine moves
with whatever else runs: compare the ratios, measured in one run.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import secrets
import shutil
import socket
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

for _v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):  # as Ray's workers run
    os.environ.setdefault(_v, "1")

from lychee_ray.config import load_config  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "data" / "locomo"
# issue 28's gates, used only to report what they ask of the machine ("capacity" in the JSON)
APPEND_P50_GATE_MS = 150.0
SEARCH_RATIO_GATE = 1.3
CATEGORIES = {"1", "2", "3", "4"}


def pct(xs: list[float], q: float) -> float | None:
    if not xs:
        return None
    s = sorted(xs)
    return round(s[min(len(s) - 1, max(0, int(round(q * (len(s) - 1)))))], 2)


def summary(lat: list[float], codes: dict[str, int]) -> dict[str, Any]:
    return {"n": len(lat), "p50_ms": pct(lat, 0.5), "p95_ms": pct(lat, 0.95), "max_ms": round(max(lat), 2) if lat else None,
            "errors": sum(n for c, n in codes.items() if c != "200"), "status_counts": codes}


def cpu_times() -> tuple[int, int] | None:
    """(busy, total) jiffies of the whole machine from /proc/stat (None where it is missing)."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            v = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return None
    return sum(v) - v[3] - v[4], sum(v)  # idle and iowait are not busy


def busy_fraction(a: tuple[int, int] | None, b: tuple[int, int] | None) -> float | None:
    """Share of the machine's CPU time that was busy between two :func:`cpu_times` readings."""
    if a is None or b is None or b[1] == a[1]:
        return None
    return (b[0] - a[0]) / (b[1] - a[1])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def load_items(data: Path, n: int) -> list[Any]:
    """The first ``n`` LoCoMo conversations (sorted by file name), with their QA."""
    from lychee_ray.io.adapters import read_input

    items = []
    for f in sorted(data.glob("*.json"))[:n]:
        items.extend(read_input("locomo", f))
    return items[:n]


def ensure_base(args: argparse.Namespace, items: list[Any]) -> Path:
    """A rules store of the writers' conversations, first ``--base-sessions`` sessions (cached)."""
    from lychee_ray.ingest.context import make_context
    from lychee_ray.ingest.runner import run_local_build_items
    from lychee_ray.io.adapters import AdapterItem

    store = Path(args.cache_dir) / f"append_base_{len(items)}c_{args.base_sessions}s"
    if (store / "manifest.json").exists():
        print(f"reusing base store {store}", file=sys.stderr)
        return store
    cfg = load_config()
    convs = [it.conversation.model_copy(update={"sessions": it.conversation.sessions[: args.base_sessions]})
             for it in items]
    t0 = time.perf_counter()
    run_local_build_items(cfg, [AdapterItem(file="locomo", line=i, conversation=c) for i, c in enumerate(convs)],
                          store, backend="rules", ctx=make_context(cfg, "rules"))
    print(f"built base store {store} in {time.perf_counter() - t0:.0f} s", file=sys.stderr)
    return store


def plan(args: argparse.Namespace, items: list[Any]) -> tuple[dict[str, list[list[dict[str, Any]]]], list[dict[str, Any]]]:
    """Per conversation: its next ``--turns`` turns as request bodies' turn lists; and the readers' questions."""
    writes: dict[str, list[list[dict[str, Any]]]] = {}
    questions: list[dict[str, Any]] = []
    for it in items:
        conv = it.conversation
        turns = [dict(turn_id=t.turn_id, role=t.role, speaker=t.speaker, content=t.content, timestamp=t.timestamp,
                      session_id=s.session_id, session_started_at=s.started_at, meta=t.meta)
                 for s in conv.sessions[args.base_sessions:] for t in s.turns][: args.turns]
        k = args.turns_per_request
        writes[conv.conversation_id] = [turns[i: i + k] for i in range(0, len(turns), k)]
        last = max((s.started_at for s in conv.sessions if s.started_at), default=None)
        questions += [{"conversation_id": conv.conversation_id, "question": qa.question,
                       "question_date": qa.question_date or last} for qa in it.qa if qa.category in CATEGORIES]
    random.Random(0).shuffle(questions)  # readers spread over every conversation
    return writes, questions


async def run_load(url: str, token: str, writes: dict[str, list[list[dict[str, Any]]]] | None,
                   questions: list[dict[str, Any]], readers: int, reads: int, timeout: float) -> dict[str, Any]:
    """Writers (one per conversation in ``writes``, its requests in order) and ``readers`` search
    clients; readers stop when the writers are done (or after ``reads`` searches without writers)."""
    import httpx

    out: dict[str, Any] = {"append": [], "append_server": [], "append_codes": {}, "search": [], "search_codes": {},
                           "append_closing": [], "append_open": [],
                           "segments_encoded": 0, "records_written": 0, "turns_stored": 0, "samples": []}
    done = asyncio.Event()
    nxt = 0
    limits = httpx.Limits(max_connections=readers + len(writes or {}) + 2)
    async with httpx.AsyncClient(base_url=url, timeout=timeout, limits=limits,
                                 headers={"Authorization": f"Bearer {token}"}) as client:
        def count(codes: dict[str, int], code: str) -> None:
            codes[code] = codes.get(code, 0) + 1

        async def writer(cid: str, batches: list[list[dict[str, Any]]]) -> None:
            for turns in batches:
                t0 = time.perf_counter()
                try:
                    r = await client.post(f"/v1/conversations/{cid}/turns", json={"turns": turns})
                    code = str(r.status_code)
                except httpx.HTTPError as e:
                    code, r = type(e).__name__, None
                dt = (time.perf_counter() - t0) * 1000.0
                count(out["append_codes"], code)
                if r is not None and r.status_code == 200:
                    d = r.json()
                    out["append"].append(dt / len(turns))  # per turn
                    out["append_server"].append(d["timings_ms"]["total"] / len(turns))
                    out.setdefault("append_pairs", []).append((round(t0 - out["t_start"], 3), round(dt, 1),
                                                               round(d["timings_ms"]["total"], 1)))
                    for k in ("lock", "build", "read", "embed", "commit"):  # server side: waiting for the write lock; the rest
                        out.setdefault(f"append_server_{k}", []).append(d["timings_ms"].get(k, 0.0))
                    out["append_queued"] = out.get("append_queued", 0) + bool(d.get("encode_queued"))
                    # appends that closed (encoded) a segment embed its records: the slow ones
                    out["append_closing" if d["segments_encoded"] else "append_open"].append(dt / len(turns))
                    out["segments_encoded"] += len(d["segments_encoded"])
                    out["records_written"] += d["records_written"]
                    out["turns_stored"] += len(d["stored_turn_ids"])
                elif len(out["samples"]) < 5:
                    out["samples"].append(f"{code}: {r.text[:200] if r is not None else ''}")

        async def reader() -> None:
            nonlocal nxt
            while not done.is_set() and (writes or nxt < reads):
                b = questions[nxt % len(questions)]
                nxt += 1
                t0 = time.perf_counter()
                try:
                    r = await client.post("/v1/search", json=b)
                    code = str(r.status_code)
                except httpx.HTTPError as e:
                    code = type(e).__name__
                count(out["search_codes"], code)
                if code == "200":
                    out["search"].append((time.perf_counter() - t0) * 1000.0)

        async def writers() -> None:
            if writes:  # readers run until the writers are done (without writers: ``reads`` searches)
                await asyncio.gather(*(writer(cid, b) for cid, b in writes.items()))
                done.set()

        cpu0 = cpu_times()
        t0 = out["t_start"] = time.perf_counter()
        await asyncio.gather(writers(), *(reader() for _ in range(readers)))
        out["wall_s"] = round(time.perf_counter() - t0, 2)
        out["cpu_busy"] = busy_fraction(cpu0, cpu_times())
    return out


def inproc_appends(store: Path, cfg: Any, writes: dict[str, list[list[dict[str, Any]]]]) -> dict[str, Any]:
    """The same appends through ``MemoryStore.append``, one thread per conversation."""
    from lychee_ray.memory import MemoryStore
    from lychee_ray.serve.appends import build_embedder

    lat: list[float] = []
    split: dict[str, list[float]] = {"closing_a_segment": [], "closing_none": []}
    errors: list[str] = []
    with MemoryStore.open(store, cfg, embedder=build_embedder(cfg), llm="rules") as ms:
        ms.append("bench-warm", [{"turn_id": "w", "content": "warm-up turn"}], user_id="bench")  # context + model

        def run(cid: str, batches: list[list[dict[str, Any]]]) -> None:
            for turns in batches:
                t0 = time.perf_counter()
                try:
                    r = ms.append(cid, turns)
                except Exception as e:  # noqa: BLE001 — counted and reported
                    errors.append(f"{type(e).__name__}: {e}")
                    continue
                lat.append((time.perf_counter() - t0) * 1000.0 / len(turns))
                split["closing_a_segment" if r.segments_encoded else "closing_none"].append(lat[-1])

        threads = [threading.Thread(target=run, args=(cid, b)) for cid, b in writes.items()]
        t0 = time.perf_counter()
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall = time.perf_counter() - t0
    return {"n": len(lat), "p50_ms": pct(lat, 0.5), "p95_ms": pct(lat, 0.95), "errors": len(errors),
            **{k: {"n": len(v), "p50_ms": pct(v, 0.5), "p95_ms": pct(v, 0.95)} for k, v in split.items()},
            "error_samples": errors[:5], "wall_s": round(wall, 2)}


def markers(root: Path) -> dict[str, Any]:
    from lychee_ray.io.store import iter_markers

    return {m.conversation_id: m for m in iter_markers(root)}


def same_as_inline(served: Path, local: Path, cfg: Any, cids: list[str]) -> dict[str, Any]:
    """Flush each written conversation in both stores (the served one first catches up on turns
    still queued), then compare their tables row for row: nothing lost, nothing different."""
    from lychee_ray.io.store import read_part
    from lychee_ray.memory import MemoryStore
    from lychee_ray.serve.appends import build_embedder

    emb = build_embedder(cfg)
    for root in (served, local):
        with MemoryStore.open(root, cfg, embedder=emb, llm="rules") as ms:
            for cid in cids:
                ms.flush(cid)
    a, b = markers(served), markers(local)
    diff = [f"{cid}:{t}" for cid in cids for t in ("turns", "segments", "records", "nodes")
            if not read_part(served, t, a[cid]).equals(read_part(local, t, b[cid]))]
    return {"equal": not diff, "different_tables": diff}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--writers", type=int, default=8, help="conversations appended to at once (one writer each)")
    ap.add_argument("--readers", type=int, default=8, help="concurrent /v1/search clients")
    ap.add_argument("--turns", type=int, default=20, help="turns each writer appends")
    ap.add_argument("--turns-per-request", type=int, default=1)
    ap.add_argument("--base-sessions", type=int, default=1, help="sessions stored before the appends")
    ap.add_argument("--search-alone", type=int, default=200, help="searches of the readers-only baseline")
    ap.add_argument("--replicas", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--data", default=str(LOCOMO))
    ap.add_argument("--cache-dir", default=os.environ.get("LYCHEE_CACHE_DIR", "/tmp/lychee-cache"))
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    t_all = time.perf_counter()
    load_before = os.getloadavg()
    items = load_items(Path(args.data), args.writers)
    if len(items) < args.writers:
        print(f"only {len(items)} LoCoMo conversations under {args.data}", file=sys.stderr)
        return 2
    base = ensure_base(args, items)
    writes, questions = plan(args, items)
    cfg = load_config(sets=["llm.backend=rules", *args.set])
    cfg.serve.host = "127.0.0.1"
    cfg.serve.token = secrets.token_urlsafe(16)
    cfg.serve.replicas = args.replicas
    cfg.serve.max_queued_requests = max(cfg.serve.max_queued_requests, 4 * (args.writers + args.readers))
    cfg.appends.idle_flush_s = 0.0  # the measured appends only: no background flush competes
    work = Path(tempfile.mkdtemp(prefix="append_load_"))
    served, local = work / "served", work / "inproc"
    shutil.copytree(base, served)
    shutil.copytree(base, local)

    import httpx
    import ray

    from lychee_ray.ray.serve import apply_ray_env, start_service, stop_service

    ray_env = apply_ray_env(cfg)
    ray.init(include_dashboard=False, object_store_memory=256 * 1024 * 1024, log_to_driver=False)
    try:
        cfg.serve.port = free_port()
        t0 = time.perf_counter()
        url = start_service(served, cfg, name="lychee-append-bench")
        ready_s = time.perf_counter() - t0
        auth = {"Authorization": f"Bearer {cfg.serve.token}"}
        # warm every replica: the build-side embedder and append context (throwaway conversations),
        # and the writers' conversations in the caches
        for i in range(2 * args.replicas):
            r = httpx.post(f"{url}/v1/conversations/bench-warm-{i}/turns", headers=auth, timeout=args.timeout,
                           json={"user_id": "bench", "turns": [{"turn_id": "w", "content": "warm-up turn"}]})
            r.raise_for_status()
        asyncio.run(run_load(url, cfg.serve.token, None, questions, args.readers, 4 * args.replicas * len(writes),
                             args.timeout))
        alone = asyncio.run(run_load(url, cfg.serve.token, None, questions, args.readers, args.search_alone,
                                     args.timeout))
        load_mid = os.getloadavg()
        loaded = asyncio.run(run_load(url, cfg.serve.token, writes, questions, args.readers, 0, args.timeout))
        load_after = os.getloadavg()
        stats = httpx.get(f"{url}/v1/admin/stats", headers=auth, timeout=args.timeout).json()
    finally:
        stop_service("lychee-append-bench")
        ray.shutdown()

    inproc = inproc_appends(local, cfg, writes)
    from lychee_ray.io.verify import verify_store

    verified = verify_store(served)["ok"]
    pending_at_stop = {cid: m.unsegmented_turns for cid, m in markers(served).items() if cid in writes}
    same = same_as_inline(served, local, cfg, list(writes))
    shutil.rmtree(work, ignore_errors=True)

    append = summary(loaded["append"], loaded["append_codes"])
    search_w = summary(loaded["search"], loaded["search_codes"])
    search_a = summary(alone["search"], alone["search_codes"])

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 2) if a and b else None

    # What the two Serve gates ask of this machine's CPU (every process on it: client, proxy,
    # replicas, background encodings). CPU per search from the readers-only phase; CPU per append
    # from the loaded phase less its searches' share.
    cores = os.cpu_count() or 1
    capacity: dict[str, Any] = {"cores": cores, "busy_search_alone": alone.get("cpu_busy"),
                                "busy_with_writers": loaded.get("cpu_busy")}
    if alone.get("cpu_busy") and loaded.get("cpu_busy") and alone["search"] and loaded["append"]:
        ms_search = alone["cpu_busy"] * cores * alone["wall_s"] * 1000.0 / len(alone["search"])
        cpu_loaded_ms = loaded["cpu_busy"] * cores * loaded["wall_s"] * 1000.0
        ms_append = max(0.0, cpu_loaded_ms - ms_search * len(loaded["search"])) / len(loaded["append"])
        rate = args.writers / (APPEND_P50_GATE_MS / 1000.0)  # closed-loop writers at the p50 gate
        capacity.update({
            "cpu_ms_per_search": round(ms_search, 1), "cpu_ms_per_append": round(ms_append, 1),
            "appends_per_s_at_p50_gate": round(rate, 1),
            "writer_cpu_share_needed": round(rate * ms_append / 1000.0 / cores, 2),
            "writer_cpu_share_allowed_by_search_gate": round(1 - 1 / SEARCH_RATIO_GATE, 2),
        })

    report = {
        "benchmark": "append_load",
        "writers": args.writers, "readers": args.readers, "turns_per_writer": args.turns,
        "turns_per_request": args.turns_per_request, "base_sessions": args.base_sessions,
        "conversations": sorted(writes),
        "append_per_turn": {**append, "server_p50_ms": pct(loaded["append_server"], 0.5),
                            "server_p95_ms": pct(loaded["append_server"], 0.95), "turns_stored": loaded["turns_stored"],
                            "server_lock_wait_p50_ms": pct(loaded.get("append_server_lock", []), 0.5),
                            "server_lock_wait_p95_ms": pct(loaded.get("append_server_lock", []), 0.95),
                            "server_after_lock_p50_ms": pct(loaded.get("append_server_build", []), 0.5),
                            "server_after_lock_p95_ms": pct(loaded.get("append_server_build", []), 0.95),
                            "encode_queued": loaded.get("append_queued", 0),
                            **{f"server_{k}_p50_ms": pct(loaded.get(f"append_server_{k}", []), 0.5) for k in ("read", "embed", "commit")},
                            **{f"server_{k}_p95_ms": pct(loaded.get(f"append_server_{k}", []), 0.95) for k in ("read", "embed", "commit")},
                            "closing_a_segment": {"n": len(loaded["append_closing"]),
                                                  "p50_ms": pct(loaded["append_closing"], 0.5),
                                                  "p95_ms": pct(loaded["append_closing"], 0.95)},
                            "closing_none": {"n": len(loaded["append_open"]), "p50_ms": pct(loaded["append_open"], 0.5),
                                             "p95_ms": pct(loaded["append_open"], 0.95)},
                            "segments_encoded": loaded["segments_encoded"], "records_written": loaded["records_written"],
                            # (seconds into the run it was sent, client ms, server ms) of every append
                            "samples_start_client_server": loaded.get("append_pairs", []),
                            "error_samples": loaded["samples"], "wall_s": loaded["wall_s"]},
        "search_with_writers": search_w,
        "search_alone": {**search_a, "wall_s": alone["wall_s"]},
        "inproc_append_per_turn": inproc,
        "ratios": {"append_serve_vs_inproc_p50": ratio(append["p50_ms"], inproc["p50_ms"]),
                   "append_serve_vs_inproc_p95": ratio(append["p95_ms"], inproc["p95_ms"]),
                   "search_with_vs_without_writers_p50": ratio(search_w["p50_ms"], search_a["p50_ms"]),
                   "search_with_vs_without_writers_p95": ratio(search_w["p95_ms"], search_a["p95_ms"])},
        "capacity": capacity,
        "store_verified": verified,
        # turns Serve had stored but not yet segmented when it was stopped (durable: encoded by the
        # next append or flush), and whether the store then equals the in-process inline appends'
        "unsegmented_turns_at_stop": pending_at_stop,
        "store_equals_inline_appends": same,
        "service": {"replicas": args.replicas, "replica_num_cpus": cfg.serve.replica_num_cpus,
                    "max_ongoing_requests": cfg.serve.max_ongoing_requests, "ready_s": round(ready_s, 1),
                    "ray_env": ray_env, "replica_stats_sample": {"appends": stats.get("appends"),
                                                                 "cache": stats.get("cache")}},
        "machine": {"cpus": os.cpu_count(), "platform": platform.platform(),
                    "loadavg_before": [round(x, 2) for x in load_before],
                    "loadavg_before_measured_run": [round(x, 2) for x in load_mid],
                    "loadavg_after_measured_run": [round(x, 2) for x in load_after]},
        "wall_s": round(time.perf_counter() - t_all, 1),
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(report, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({"capacity": capacity, "append_p50_ms": append["p50_ms"], "append_p95_ms": append["p95_ms"],
                      "inproc_append_p50_ms": inproc["p50_ms"], "search_with_writers_p50_ms": search_w["p50_ms"],
                      "search_alone_p50_ms": search_a["p50_ms"], "ratios": report["ratios"],
                      "errors": append["errors"] + search_w["errors"] + inproc["errors"]}))
    return 0 if append["errors"] == 0 and inproc["errors"] == 0 and verified and same["equal"] else 1


if __name__ == "__main__":
    sys.exit(main())
