"""Queued appends while a real model encodes in the background (issue 28; not run in CI).

    ../shared/tools/local-llm.sh start
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=sk-local LYCHEE_LLM_MODEL=local \\
      python benchmarks/append_real.py --out benchmarks/results/append_real.json

A LoCoMo conversation's first session is appended and flushed with the ``openai`` backend (encode
calls to whatever endpoint is configured). Then the next ``--turns`` turns are appended one call
each with ``queue=True`` — Serve's default path — while an :class:`EncodeQueue` runs the catch-ups
(the LLM encode calls) on its own thread, as a replica does. Per append it records the wall time
and whether an encoding was running meanwhile; per catch-up the lag from the append that queued it
to its commit, next to the LLM latency the ledger measured for its calls. At the end the tail is
flushed, and the store must verify with every appended turn in it.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.serve.encode_queue import EncodeQueue  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.io.adapters import read_input  # noqa: E402
from lychee_ray.io.store import StoreReader, StoreWriter  # noqa: E402
from lychee_ray.io.verify import verify_store  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402

DATA = ROOT.parent / "shared" / "data" / "locomo"


def turn_dicts(conv: Any, sessions: range) -> list[dict[str, Any]]:
    return [dict(turn_id=t.turn_id, role=t.role, speaker=t.speaker, content=t.content, timestamp=t.timestamp,
                 session_id=s.session_id, session_started_at=s.started_at, meta=t.meta)
            for i, s in enumerate(conv.sessions) if i in sessions for t in s.turns]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--conversation", default="26.json", help="LoCoMo file under --data")
    ap.add_argument("--data", default=str(DATA))
    ap.add_argument("--turns", type=int, default=17, help="turns appended one by one after session 1")
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)
    conv = next(iter(read_input("locomo", Path(args.data) / args.conversation))).conversation
    cid, user = conv.conversation_id, conv.user_id
    cfg = load_config(sets=["llm.backend=openai"])
    root = Path(tempfile.mkdtemp(prefix="append-real-")) / "store"
    StoreWriter(root, cfg.store)
    out: dict[str, Any] = {"model": cfg.llm.model, "base_url": cfg.llm.base_url, "conversation": cid}
    with MemoryStore.open(root, cfg, llm="openai") as store:
        t0 = time.perf_counter()
        store.append(cid, turn_dicts(conv, range(0, 1)), user_id=user, flush=True)
        out["base_s"] = round(time.perf_counter() - t0, 1)
        ledger = store._append_context().ledger
        queued_at: dict[str, float] = {}
        lags: list[dict[str, Any]] = []
        running = threading.Event()

        def catch_up(c: str) -> None:
            running.set()
            start, n_calls = time.perf_counter(), len(ledger)
            since = min(queued_at.values()) if queued_at else start
            queued_at.clear()
            try:
                r = store.catch_up(c)
            finally:
                running.clear()
            calls = ledger.entries()[n_calls:]
            lags.append({"lag_s": round(time.perf_counter() - since, 2), "run_s": round(time.perf_counter() - start, 2),
                         "llm_calls": len(calls), "llm_latency_s": round(sum(u.latency_s for u in calls), 2),
                         "segments_encoded": r.segments_encoded, "records_written": r.records_written})

        queue = EncodeQueue(catch_up, max_pending=8, retry_s=1.0)
        appends: list[dict[str, Any]] = []
        new = turn_dicts(conv, range(1, len(conv.sessions)))[: args.turns]
        for t in new:
            busy = running.is_set()
            t1 = time.perf_counter()
            r = store.append(cid, [t], queue=True)
            wall = time.perf_counter() - t1
            queued_at.setdefault(t["turn_id"], t1)
            queue.submit(cid)
            appends.append({"turn_id": t["turn_id"], "wall_ms": round(wall * 1e3, 1), "encoding_meanwhile": busy,
                            "stored": r.stored_turn_ids == [t["turn_id"]]})
            time.sleep(0.5)  # an agent's pace: a turn every half second
        queue.drain(1800)
        queue.stop()
        flushed = store.flush(cid)
    walls = [a["wall_ms"] for a in appends]
    during = [a["wall_ms"] for a in appends if a["encoding_meanwhile"]]
    data = StoreReader(root).load(cid)
    stored_ids = set(data.turns.column("turn_id").to_pylist())
    out.update({
        "appends": appends, "catch_ups": lags, "flush_segments_encoded": flushed.segments_encoded,
        "append_p50_ms": statistics.median(walls), "append_max_ms": max(walls),
        "append_p50_ms_while_encoding": statistics.median(during) if during else None,
        "appends_while_encoding": len(during),
        "catch_up_lag_p50_s": statistics.median(x["lag_s"] for x in lags) if lags else None,
        "catch_up_llm_latency_p50_s": statistics.median(x["llm_latency_s"] for x in lags if x["llm_calls"]) if any(
            x["llm_calls"] for x in lags) else None,
        "all_turns_stored": all(t["turn_id"] in stored_ids for t in new),
        "records": data.records.num_rows, "verify_ok": verify_store(root)["ok"],
    })
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in out.items() if k not in ("appends", "catch_ups")}, indent=1))
    return 0 if out["all_turns_stored"] and out["verify_ok"] else 1


if __name__ == "__main__":
    raise SystemExit(main())
