"""Throughput of the Ray build job against a rate-limited, fixed-latency fake LLM endpoint.

    python benchmarks/build_throughput.py --conversations 1000 --out results/build_1000.json

Generates N synthetic conversations (deterministic seed), starts the OpenAI-compatible test server
(fixed latency per call; it also serves hash embeddings so that the model is not the bottleneck
unless ``--embedding local``), runs ``run_ray_build`` with ``llm.rate_limit.requests_per_min`` set
below what the job could otherwise reach, and writes JSON with the achieved calls/min, utilisation
of the limit, minutes over the limit as the server saw them, non-LLM seconds per turn and peak RSS
of the whole process tree (driver + Ray).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import threading
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.ray.build_job import run_ray_build  # noqa: E402
from lychee_ray.io.store import iter_markers  # noqa: E402
from lychee_ray.testing.fake_llm import encoder_reply  # noqa: E402
from lychee_ray.testing.openai_server import OpenAIServer  # noqa: E402
from lychee_ray.testing.synthetic import write_jsonl  # noqa: E402


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--conversations", type=int, default=1000)
    ap.add_argument("--latency-s", type=float, default=0.2, help="fixed latency of every LLM call")
    ap.add_argument("--limit-rpm", type=float, default=3000.0, help="requests/min limit given to the job")
    ap.add_argument("--in-flight", type=int, default=16, help="conversations in flight per builder actor")
    ap.add_argument("--embedding", choices=("server", "local"), default="server",
                    help="server = hash embeddings from the test server; local = offline MiniLM")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()

    work = Path(tempfile.mkdtemp(prefix="lychee-throughput-"))
    src = work / "conversations.jsonl"
    turns = write_jsonl(str(src), args.conversations, seed=args.seed, sessions=2, topics_per_session=2)
    with OpenAIServer(handler=encoder_reply, latency_s=args.latency_s, embedding_dim=384) as srv:
        sets = [f"llm.base_url={srv.base_url}", "llm.api_key=bench", f"llm.rate_limit.requests_per_min={args.limit_rpm}",
                f"build.conversations_in_flight={args.in_flight}", "ray.progress_interval_s=15"]
        if args.embedding == "server":
            sets += ["embedding.backend=openai", "embedding.openai_model=hash-embed"]
        cfg = load_config(sets=sets, env={})
        with RssSampler() as rss:
            t0 = time.perf_counter()
            summary = run_ray_build(cfg, "jsonl", src, work / "store", backend="openai")
            wall = time.perf_counter() - t0
        chats = srv.chat_requests()
        times = sorted(r.t for r in chats)
        span = (times[-1] - times[0]) if len(times) > 1 else wall
        over = srv.minutes_over_limit(args.limit_rpm)
        max_window = srv.max_requests_in_window(60.0)
    markers = list(iter_markers(work / "store"))
    non_llm = sum(m["timings_s"]["segment"] + m["timings_s"]["index"] + max(0.0, m["timings_s"]["encode"] - m["timings_s"]["llm_latency"])
                  for m in markers)
    calls_per_min = len(chats) / span * 60 if span > 0 else 0.0
    result = {
        "conversations": args.conversations,
        "turns": turns,
        "built": summary.built,
        "failed": summary.failed,
        "wall_s": round(wall, 2),
        "llm_calls": len(chats),
        "llm_span_s": round(span, 2),
        "calls_per_min": round(calls_per_min, 1),
        "limit_calls_per_min": args.limit_rpm,
        "utilization": round(calls_per_min / args.limit_rpm, 3),
        "max_calls_in_any_60s_window": max_window,
        "limit_violations": len(over),
        "non_llm_s_per_turn": round(non_llm / max(1, turns), 6),
        "peak_rss_mb": round(rss.peak_total, 1),
        "peak_driver_rss_mb": round(rss.peak_driver, 1),
        "latency_s": args.latency_s,
        "in_flight_per_actor": args.in_flight,
        "embedding": args.embedding,
    }
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(result, indent=1))
    print(json.dumps(result, indent=1))
    return 0 if summary.failed == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
