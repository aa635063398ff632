"""Throughput and CPU of the Ray build job against a rate-limited, fixed-latency fake LLM endpoint.

    python benchmarks/build_throughput.py --conversations 1000 --nodes 1 --embedding local --limit-rpm 1200 \
        --out benchmarks/results/build_1000_1node_local.json
    # a local 2-node Ray cluster (lychee_ray/testing/cluster.py), the store on a moto S3 server
    python benchmarks/build_throughput.py --conversations 1000 --nodes 2 --s3-local --out-uri s3://bench/store \
        --out results/build_1000_2nodes_s3.json

Generates N synthetic conversations (deterministic seed), starts the OpenAI-compatible test server
in a process of its own (fixed latency per call; it also serves hash embeddings so that the model is
not the bottleneck unless ``--embedding local``: the offline MiniLM, as a real build embeds), runs
the build with ``llm.rate_limit.requests_per_min`` set to a limit the job can reach, and writes
JSON with the achieved calls/min, utilisation of the limit, minutes over the limit as the server
saw them, **core-seconds per turn** and peak RSS.

Core-seconds are process CPU times (user + system, from ``/proc``), not wall times of threads, read
every half second for every process (lychee_ray/testing/cpu.py: an actor Ray ends takes its CPU
time with it, so processes are sampled while they live): with ``--nodes``, every process of every
Ray node (raylets, GCS, the job's driver, every stage actor) from the job's submission to its end;
without, this process and its descendants (the local Ray) less the fake LLM's process. The harness
— the fake LLM server (its own process), the moto S3 server — is reported apart where it can be.

``--out-uri`` puts the store anywhere the store code reaches (a directory, ``s3://bucket/prefix``,
...); ``--s3-local`` starts the moto S3 server (lychee_ray/testing/s3_server.py) and creates the
URI's bucket there. ``--nodes N`` starts a local cluster of a head (no CPUs: GCS, dashboard, the
job's driver) and N worker nodes and submits the build to it as a Ray job (``python
jobs/build_memory.py ...``, as on a real cluster), reporting peak RSS and CPU per node. The JSON
also has the store's size and object count, the requests the S3 server answered by kind (build and
compaction apart), and the time of one compaction of it (the build itself does not compact:
``build.compact_conversations_per_file=0``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import re
import shlex
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Iterator

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.io.store import compact, iter_markers  # noqa: E402
from lychee_ray.io.store.fs import store_root, tree_size  # noqa: E402
from lychee_ray.testing.cluster import LocalCluster  # noqa: E402
from lychee_ray.testing.cpu import CpuSampler, descendants  # noqa: E402
from lychee_ray.testing.fake_llm import encoder_reply  # noqa: E402
from lychee_ray.testing.openai_server import OpenAIServer  # noqa: E402
from lychee_ray.testing.recording import RecordedRequest, RequestStats  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402
from lychee_ray.testing.synthetic import write_jsonl  # noqa: E402


def _serve_llm(latency_s: float, out: Any, stop: Any) -> None:
    """The fake LLM in its own process: serve until ``stop``, then send what it saw."""
    with OpenAIServer(handler=encoder_reply, latency_s=latency_s, embedding_dim=384) as srv:
        out.put(srv.base_url)
        stop.wait()
        out.put([(r.path, r.t, r.t_mono, r.status) for r in srv.requests])


class RecordedStats(RequestStats):
    """The server's request log, received from its process (bodies left behind)."""

    def __init__(self, rows: list[tuple[str, float, float, int | None]]) -> None:
        self._rows = [RecordedRequest(path, None, t, t_mono, status=status) for path, t, t_mono, status in rows]

    @property
    def requests(self) -> list[RecordedRequest]:
        return self._rows


class LLMServerProcess:
    """The fake LLM server in a process of its own: its CPU is the harness's, not the job's."""

    def __init__(self, latency_s: float) -> None:
        ctx = mp.get_context("spawn")
        self._out, self._stop = ctx.Queue(), ctx.Event()
        self.proc = ctx.Process(target=_serve_llm, args=(latency_s, self._out, self._stop), daemon=True)
        self.base_url = ""
        self.cpu_s = 0.0

    def __enter__(self) -> "LLMServerProcess":
        self.proc.start()
        self.base_url = self._out.get(timeout=120)
        return self

    def finish(self) -> RecordedStats:
        """Stop it and return its request log (its CPU is noted first)."""
        t = psutil.Process(self.proc.pid).cpu_times()
        self.cpu_s = t.user + t.system
        self._stop.set()
        stats = RecordedStats(self._out.get(timeout=600))
        self.proc.join(timeout=60)
        return stats

    def __exit__(self, *exc: Any) -> None:
        if self.proc.is_alive():
            self._stop.set()
            self.proc.join(timeout=10)
            if self.proc.is_alive():
                self.proc.kill()


class RssSampler:
    """Peak RSS (MiB) of this process and all its descendants (Ray's processes included)."""

    def __init__(self, interval_s: float = 0.5) -> None:
        self.interval_s = interval_s
        self.peak_total = 0.0
        self.peak_driver = 0.0
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        me = psutil.Process()
        while not self._stop.is_set():
            procs = [me, *me.children(recursive=True)]
            total = 0.0
            for p in procs:
                try:
                    total += p.memory_info().rss
                except psutil.Error:
                    pass
            self.peak_total = max(self.peak_total, total / 2**20)
            self.peak_driver = max(self.peak_driver, me.memory_info().rss / 2**20)
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "RssSampler":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


class NodeRssSampler:
    """Peak RSS (MiB) of each node of a local cluster (its whole process group)."""

    def __init__(self, cluster: LocalCluster, interval_s: float = 1.0) -> None:
        self.cluster = cluster
        self.interval_s = interval_s
        self.peak: dict[str, float] = {}
        self._stop = threading.Event()
        self._t = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            for name, rss in self.cluster.node_rss_bytes().items():
                self.peak[name] = max(self.peak.get(name, 0.0), round(rss / 2**20, 1))
            self._stop.wait(self.interval_s)

    def __enter__(self) -> "NodeRssSampler":
        self._t.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._t.join()


@contextlib.contextmanager
def s3_server(enabled: bool, out_uri: str | None) -> Iterator[tuple[dict[str, str], Any]]:
    """The moto S3 server with the bucket of ``out_uri`` (``--s3-local``); yields its environment
    and the server (None without ``--s3-local``)."""
    if not enabled:
        yield {}, None
        return
    from lychee_ray.testing.s3_server import S3Server

    if not (out_uri or "").startswith("s3://"):
        raise SystemExit("--s3-local needs --out-uri s3://bucket/prefix")
    with S3Server() as s3:
        s3.export()  # this process reads the store (size, compaction, markers)
        s3.bucket(out_uri.removeprefix("s3://").split("/", 1)[0])
        yield s3.env(), s3


def job_summary(logs: str) -> dict[str, Any]:
    """The summary ``--json`` printed last in a job's output."""
    found = re.findall(r"^\{\n.*?^\}$", logs, flags=re.M | re.S)
    if not found:
        raise RuntimeError(f"no JSON summary in the job's output:\n{logs[-3000:]}")
    return json.loads(found[-1])


def run_on_cluster(args: argparse.Namespace, src: Path, out: str, sets: list[str], env: dict[str, str],
                   llm_env: dict[str, str]) -> tuple[dict[str, Any], dict[str, float], float, dict[str, float]]:
    """Start a head + ``args.nodes`` workers, submit the build job, wait; (summary, peak RSS per node,
    wall, CPU seconds per node from the submission to the end of the job)."""
    repo = Path(__file__).resolve().parent.parent
    cmd = [sys.executable, str(repo / "jobs" / "build_memory.py"), "--input", str(src), "--format", "jsonl",
           "--out", out, "--llm", "openai", "--json"]
    for kv in sets:
        cmd += ["--set", kv]
    with LocalCluster(workers=args.nodes, worker_cpus=args.node_cpus, object_store_mb=args.node_object_store_mb,
                      env=env) as cluster, NodeRssSampler(cluster) as rss:
        with CpuSampler(cluster.node_pids) as cpu:
            t0 = time.perf_counter()
            job = cluster.submit(shlex.join(cmd), env_vars=llm_env)
            info = cluster.wait(job, args.timeout_s)
            wall = time.perf_counter() - t0
        logs = cluster.logs(job)
        if info["status"] != "SUCCEEDED":
            raise RuntimeError(f"build job {info['status']}:\n{logs[-3000:]}")
    return job_summary(logs), rss.peak, wall, cpu.totals()


def run_in_process(src: Path, out: str, sets: list[str], llm_pid: int
                   ) -> tuple[dict[str, Any], dict[str, float], float, dict[str, float]]:
    """The build job driven from this process (a local Ray); peak RSS and CPU of the whole process
    tree but the fake LLM's process (moto, with ``--s3-local``, runs in this process: counted)."""
    from lychee_ray.ray.build_job import run_ray_build

    cfg = load_config(sets=sets, env={})
    with RssSampler() as rss, CpuSampler(lambda: {"local": descendants(os.getpid(), {llm_pid})}) as cpu:
        t0 = time.perf_counter()
        summary = run_ray_build(cfg, "jsonl", src, out, backend="openai")
        wall = time.perf_counter() - t0
    return summary.to_dict(), {"local": round(rss.peak_total, 1), "driver": round(rss.peak_driver, 1)}, wall, cpu.totals()


def distinct_texts(path: Path) -> None:
    """Rewrite the generated conversations so that no two turns say the same: each turn gains a
    short clause naming its conversation and turn (the embedder then sees as many distinct texts
    as there are turns, as in real logs)."""
    lines = path.read_text(encoding="utf-8").splitlines()
    out = []
    for n, line in enumerate(lines):
        conv = json.loads(line)
        k = 0
        for session in conv["sessions"]:
            for turn in session["turns"]:
                k += 1
                turn["content"] = f"{turn['content']} (noted in chat {n} as item {k})"
        out.append(json.dumps(conv))
    path.write_text("\n".join(out) + "\n", encoding="utf-8")


def measure(args: argparse.Namespace, work: Path) -> dict[str, Any]:
    """Generate the corpus in ``work``, run the build job against the fake LLM, compact, and measure."""
    src = work / "conversations.jsonl"
    turns = write_jsonl(str(src), args.conversations, seed=args.seed, sessions=2, topics_per_session=2)
    if args.distinct_texts:
        distinct_texts(src)
    out = args.out_uri or str(work / "store")
    with s3_server(args.s3_local, args.out_uri) as (s3_env, s3), LLMServerProcess(args.latency_s) as llm:
        sets = [f"llm.rate_limit.requests_per_min={args.limit_rpm}", f"build.conversations_in_flight={args.in_flight}",
                "ray.progress_interval_s=15", "build.compact_conversations_per_file=0", *args.set]
        if args.embedding == "server":
            sets += ["embedding.backend=openai", "embedding.openai_model=hash-embed"]
        actors = args.actors or args.nodes
        if actors:
            sets += [f"ray.stages.build.concurrency={actors}", "ray.stages.build.max_concurrency=0"]
        if args.nodes:
            summary, peak_rss, wall, cpu = run_on_cluster(
                args, src, out, sets, s3_env, {"LYCHEE_LLM_BASE_URL": llm.base_url, "OPENAI_API_KEY": "bench"})
        else:
            summary, peak_rss, wall, cpu = run_in_process(
                src, out, [f"llm.base_url={llm.base_url}", "llm.api_key=bench", *sets], llm.proc.pid)
        srv = llm.finish()
        chats = srv.chat_requests()
        times = sorted(r.t for r in chats)
        span = (times[-1] - times[0]) if len(times) > 1 else wall
        over = srv.minutes_over_limit(args.limit_rpm)
        max_window = srv.max_requests_in_window(60.0)
        root = store_root(out)
        build_requests = s3.request_counts() if s3 else None
        markers = list(iter_markers(root))
        objects, size = tree_size(root)
        before = s3.request_counts() if s3 else {}
        t0 = time.perf_counter()
        compacted = compact(root, args.compact_per_file)
        compaction_s = time.perf_counter() - t0
        compaction_requests = {k: v - before.get(k, 0) for k, v in s3.request_counts().items()} if s3 else None
        objects_after, size_after = tree_size(root)
    non_llm = sum(m.timings_s["segment"] + m.timings_s["index"] + max(0.0, m.timings_s["encode"] - m.timings_s["llm_latency"])
                  for m in markers)
    calls_per_min = len(chats) / span * 60 if span > 0 else 0.0
    result = {
        "conversations": args.conversations,
        "turns": turns,
        "built": summary["built"],
        "failed": summary["failed"],
        "wall_s": round(wall, 2),
        "llm_calls": len(chats),
        "llm_span_s": round(span, 2),
        "calls_per_min": round(calls_per_min, 1),
        "limit_calls_per_min": args.limit_rpm,
        "utilization": round(calls_per_min / args.limit_rpm, 3),
        "max_calls_in_any_60s_window": max_window,
        "limit_violations": len(over),
        "non_llm_s_per_turn": round(non_llm / max(1, turns), 6),
        # process CPU of the job, all its processes (module docstring), per node and per turn
        "cpu_s_per_node": cpu,
        "cpu_s": round(sum(cpu.values()), 2),
        "core_s_per_turn": round(sum(cpu.values()) / max(1, turns), 5),
        "core_s_per_llm_call": round(sum(cpu.values()) / max(1, len(chats)), 5),
        "harness_cpu_s": {"fake_llm": round(llm.cpu_s, 2)},
        "cpus": os.cpu_count(),
        "load_avg_1m_at_end": round(os.getloadavg()[0], 2),
        "peak_rss_mb_per_node": peak_rss,
        "store": "s3 (moto, local)" if args.s3_local else ("uri" if args.out_uri else "local dir"),
        "store_bytes": size,
        "store_objects": objects,
        "compaction_s": round(compaction_s, 2),
        "compaction": compacted,
        "store_bytes_compacted": size_after,
        "store_objects_compacted": objects_after,
        # requests the S3 server answered, by kind (PUT = objects written): the whole build job, then the compaction
        "s3_requests_build": build_requests,
        "s3_requests_compaction": compaction_requests,
        "nodes": args.nodes,
        "latency_s": args.latency_s,
        "in_flight_per_actor": args.in_flight,
        "embedding": args.embedding,
        "distinct_texts": args.distinct_texts,
    }
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", type=int, default=1000)
    ap.add_argument("--latency-s", type=float, default=0.2, help="fixed latency of every LLM call")
    ap.add_argument("--limit-rpm", type=float, default=3000.0, help="requests/min limit given to the job")
    ap.add_argument("--in-flight", type=int, default=16, help="conversations in flight per builder actor")
    ap.add_argument("--embedding", choices=("server", "local"), default="server",
                    help="server = hash embeddings from the test server; local = offline MiniLM")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out-uri", default=None,
                    help="store location: a directory or a pyarrow.fs URI (s3://bucket/prefix); default: a temp dir")
    ap.add_argument("--s3-local", action="store_true", help="start the moto S3 server for --out-uri s3://...")
    ap.add_argument("--nodes", type=int, default=0,
                    help="run as a Ray job on a local cluster of a head and this many worker nodes (0: local Ray)")
    ap.add_argument("--node-cpus", type=int, default=2, help="logical CPUs of each worker node (--nodes)")
    ap.add_argument("--node-object-store-mb", type=int, default=256, help="object store of each node (--nodes)")
    ap.add_argument("--actors", type=int, default=0, help="build-stage actors (a fixed pool); 0: --nodes, or the config's")
    ap.add_argument("--compact-per-file", type=int, default=256, help="conversations per compacted file")
    ap.add_argument("--timeout-s", type=float, default=7200.0, help="give up on the build job after this long")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="a configuration override for the job (repeatable), e.g. ray.stages.build.batch_size=8")
    ap.add_argument("--distinct-texts", action="store_true",
                    help="make every turn's text distinct (the generator repeats ~600 texts: the embedding memo "
                         "and deduplication would make the model's cost vanish, unlike real logs)")
    ap.add_argument("--keep-work", action="store_true", help="keep the generated corpus and the store (deleted by default)")
    ap.add_argument("--out", required=True, help="JSON result file")
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="lychee-throughput-"))
    try:
        result = measure(args, work)
    finally:
        if not args.keep_work:  # the store of a 10,000-conversation run is ~1.7 GB
            shutil.rmtree(work, ignore_errors=True)
    write_result(result, args.out)
    return 0 if result["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
