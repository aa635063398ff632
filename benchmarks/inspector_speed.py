"""Speed of the web inspector: a page of a 10,000-conversation store, and a 600-turn conversation.

    python benchmarks/inspector_speed.py --out benchmarks/results/inspector_speed.json \\
        [--conversations 10000] [--chat-turns 600] [--work /tmp/inspector_speed] [--repeats 20]

The store: ``--conversations`` small committed conversations (500 users, every 50th with a failed
segment; compacted, 256 per file, as a build leaves them), plus one synthetic user–assistant chat of
about ``--chat-turns`` turns built with the real build (rules backend). ``--work`` keeps the store
for the next run (building it takes a few minutes).

Server time, in-process (the app under ``TestClient``; the figure is the endpoint's own
``server_ms`` and the request's wall time), medians and p95 over ``--repeats``:

* the list: the first page (markers only, cold then warm), a page in the middle, a user filter, the
  failed filter, the kinds a page asks for after it is drawn (cold: each row's turns read once, a
  compacted file's rows in one read), the kind filter (cold: every conversation's kind read once);
  baseline in the same run: the API's own listing, ``GET /v1/conversations`` (the same markers);
* the 600-turn conversation: the conversation endpoint (every table read and shaped); baseline:
  ``GET /v1/conversations/{id}`` (the API's conversation info, which reads its turns and segments).

In Chromium (when Playwright and the OS browser are there): the conversation page drawn from the
hash change to the second animation frame after the page is built (fetch, JSON, DOM, layout),
median over ``--repeats``; baseline in the same page: the same JSON fetched and shown as one text
block (the floor of any page that shows it).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402

from lychee_ray.api import build_memory  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.core.conversation import TURN_SCHEMA, Conversation  # noqa: E402
from lychee_ray.core.records import EvidenceNode, MemoryRecord, SegmentRow  # noqa: E402
from lychee_ray.inspector.evalruns import RunCatalog  # noqa: E402
from lychee_ray.inspector.server import ThreadedServer, inspector_app  # noqa: E402
from lychee_ray.io.store import ConversationArtifacts, StoreWriter, StoreLayout, compact  # noqa: E402
from lychee_ray.llm.usage import UsageLedger  # noqa: E402
from lychee_ray.serve.service import MemoryService  # noqa: E402
from lychee_ray.testing.synthetic import synthetic_conversation  # noqa: E402

USERS = 500
FAILED_EVERY = 50
PER_FILE = 256
CHAT_ID = "chat-long"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def small(i: int, rng: np.random.Generator, dim: int = 8) -> ConversationArtifacts:
    """One small conversation (6 turns, 2 segments, 3 records) as a build commits it."""
    cid, user = f"conv-{i:06d}", f"user-{i % USERS:03d}"
    conv = Conversation.model_validate({"conversation_id": cid, "user_id": user, "sessions": [{"session_id": "s1", "turns": [
        {"turn_id": f"t{k}", "role": "user" if k % 2 == 0 else "assistant", "content": f"turn {k} of {cid}"} for k in range(6)]}]})
    recs = [MemoryRecord(record_id=f"{cid}-r{k}", conversation_id=cid, user_id=user, session_id="s1", segment_id=f"{cid}#s0",
                         ordinal=k, type="fact", text=f"fact {k} of {cid}", source_turn_ids=[f"t{k}"], backend="rules", model="m")
            for k in range(3)]
    nodes = [EvidenceNode(node_id=f"{cid}-n0", conversation_id=cid, user_id=user, kind="topic", key="x", text="x",
                          record_ids=[r.record_id for r in recs])]
    failed = i % FAILED_EVERY == 0
    segs = [SegmentRow(conversation_id=cid, segment_id=f"{cid}#s{k}", index=k, session_ids=["s1"],
                       turn_ids=[f"t{j}" for j in range(3 * k, 3 * k + 3)], num_tokens=30, close_reason="semantic" if k == 0 else "end_of_stream",
                       status="failed" if failed and k == 1 else "ok", backend="rules", model="m") for k in range(2)]

    def unit(n: int) -> np.ndarray:
        m = rng.normal(size=(n, dim)).astype(np.float32)
        return m / np.linalg.norm(m, axis=1, keepdims=True)

    return ConversationArtifacts(conversation_id=cid, user_id=user, records=recs, nodes=nodes,
                                 turns=pa.Table.from_pylist(conv.turn_rows(), schema=TURN_SCHEMA), segments=segs,
                                 usage=UsageLedger().to_table(), record_vectors=unit(3), node_vectors=unit(1),
                                 turn_vectors=unit(6), fingerprint="bench")


def make_store(root: Path, n: int, chat_turns: int) -> dict[str, Any]:
    """The benchmark's store (reused when ``root`` already holds it)."""
    layout = StoreLayout(root)
    if layout.is_store() and len(list(layout.iter_markers())) == n + 1:
        return {"reused": True}
    shutil.rmtree(root, ignore_errors=True)
    t0 = time.perf_counter()
    c = synthetic_conversation(7, seed=3, sessions=max(1, chat_turns // 24), topics_per_session=4, exchanges_per_topic=(3, 3))
    chat = c.model_copy(update={"conversation_id": CHAT_ID, "user_id": "chat-user"})
    build_memory([chat], root, load_config(env={}), llm="rules")
    w = StoreWriter(root)
    rng = np.random.default_rng(0)
    for i in range(n):
        w.commit(small(i, rng))
    merged = compact(root, PER_FILE)
    return {"reused": False, "build_s": round(time.perf_counter() - t0, 1), "chat_turns": chat.num_turns, "compacted": merged}


def stats(xs: list[float]) -> dict[str, float]:
    s = sorted(xs)
    return {"median": round(statistics.median(s), 3), "p95": round(s[min(len(s) - 1, int(0.95 * (len(s) - 1) + 0.5))], 3),
            "min": round(s[0], 3), "n": len(s)}


def timed(c: TestClient, path: str, params: dict[str, Any] | None = None) -> tuple[float, float | None]:
    """(wall ms, the endpoint's own server_ms when it reports one) of one GET."""
    t0 = time.perf_counter()
    r = c.get(path, params=params)
    wall = (time.perf_counter() - t0) * 1000.0
    r.raise_for_status()
    body = r.json()
    return wall, body.get("server_ms") if isinstance(body, dict) else None


def series(c: TestClient, path: str, params: dict[str, Any] | None, repeats: int) -> dict[str, Any]:
    first = timed(c, path, params)
    walls, servers = [], []
    for _ in range(repeats):
        w, s = timed(c, path, params)
        walls.append(w)
        if s is not None:
            servers.append(s)
    out = {"cold_wall_ms": round(first[0], 3), "warm_wall_ms": stats(walls)}
    if first[1] is not None:
        out["cold_server_ms"] = first[1]
        out["warm_server_ms"] = stats(servers)
    return out


def browser_render(url: str, repeats: int) -> dict[str, Any] | None:
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        return None
    exe = next((p for p in (os.environ.get("LYCHEE_CHROMIUM"), shutil.which("chromium"), "/usr/bin/chromium") if p and Path(p).exists()), None)
    if exe is None:
        return None
    draw = """async (id) => {
      location.hash = '#/';
      await new Promise((r) => { const i = setInterval(() => { if (document.querySelector('a.conv-link')) { clearInterval(i); r(); } }, 5); });
      const t0 = performance.now();
      location.hash = '#/c/' + encodeURIComponent(id);
      await new Promise((r) => { const i = setInterval(() => { if (document.getElementById('render-time')) { clearInterval(i); r(); } }, 2); });
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      return [performance.now() - t0, document.querySelectorAll('.turn').length];
    }"""
    floor = """async (id) => {
      const t0 = performance.now();
      const d = await (await fetch('api/conversations/' + encodeURIComponent(id))).json();
      const pre = document.createElement('pre');
      pre.textContent = d.turns.map((t) => t.speaker + ': ' + t.content).join('\\n');
      document.body.append(pre);
      await new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(r)));
      pre.remove();
      return performance.now() - t0;
    }"""
    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
        page = b.new_page(viewport={"width": 1360, "height": 860})
        page.set_default_timeout(120_000)
        page.goto(url)
        page.locator("a.conv-link").first.wait_for()
        page.evaluate(draw, CHAT_ID)  # warm: modules parsed, first fetch done
        runs = [page.evaluate(draw, CHAT_ID) for _ in range(repeats)]
        floors = [page.evaluate(floor, CHAT_ID) for _ in range(repeats)]
        b.close()
    ms = [r[0] for r in runs]
    return {"turns_drawn": runs[0][1], "page_ms": stats(ms), "floor_text_block_ms": stats(floors),
            "page_over_floor": round(statistics.median(ms) / max(1e-9, statistics.median(floors)), 2), "browser": exe}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--conversations", type=int, default=10_000)
    ap.add_argument("--chat-turns", type=int, default=600)
    ap.add_argument("--work", default="/tmp/inspector_speed")
    ap.add_argument("--repeats", type=int, default=20)
    ap.add_argument("--out", required=True)
    args = ap.parse_args(argv)

    root = Path(args.work) / "store"
    made = make_store(root, args.conversations, args.chat_turns)
    cfg = load_config(env={}, sets=["serve.reload_interval_s=0"])
    svc = MemoryService(root, cfg, llm="rules")
    app = inspector_app(svc, RunCatalog([]), cfg)
    load = os.getloadavg()
    res: dict[str, Any] = {"store": {"conversations": len(svc.store.reader.markers), **made}}
    R = args.repeats
    with TestClient(app) as c:
        lst = "/ui/api/conversations"
        res["list"] = {
            "first_page": series(c, lst, None, R),
            "middle_page": series(c, lst, {"offset": args.conversations // 2}, R),
            "user_filter": series(c, lst, {"user": "user-123"}, R),
            "failed_filter": series(c, lst, {"status": "failed"}, R),
        }
        # the kinds a page asks for after it is drawn (each conversation's turns read once), then the kind
        # filter (every conversation's kind: read once, then known)
        later = [r["conversation_id"] for r in c.get(lst, params={"offset": 7 * args.conversations // 10}).json()["rows"]]
        res["list"]["kinds_of_a_page"] = series(c, "/ui/api/kinds", {"id": later}, R)
        res["list"]["kind_filter"] = series(c, lst, {"kind": "chat"}, R)
        res["list_baseline_api"] = {"first_page": series(c, "/v1/conversations", {"limit": 50}, R),
                                    "middle_page": series(c, "/v1/conversations", {"limit": 50, "offset": args.conversations // 2}, R)}
        res["list"]["warm_first_page_over_api"] = round(
            res["list"]["first_page"]["warm_wall_ms"]["median"] / res["list_baseline_api"]["first_page"]["warm_wall_ms"]["median"], 2)
        res["conversation_600"] = series(c, f"/ui/api/conversations/{CHAT_ID}", None, R)
        res["conversation_600_baseline_api_info"] = series(c, f"/v1/conversations/{CHAT_ID}", None, R)
        res["conversation_600"]["over_api_info"] = round(
            res["conversation_600"]["warm_wall_ms"]["median"] / res["conversation_600_baseline_api_info"]["warm_wall_ms"]["median"], 2)
    server = ThreadedServer(app, "127.0.0.1")
    base = server.start()
    try:
        res["browser"] = browser_render(base + "/ui/", max(5, R // 4))
    finally:
        server.stop()
        svc.close()
    res["targets"] = {"list_page_server_ms": 300, "conversation_600_render_ms": 1000}
    res["machine"] = {"python": platform.python_version(), "cpus": os.cpu_count(), "loadavg_before": load,
                      "loadavg_after": os.getloadavg()}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(res, indent=1))
    print(json.dumps({"list_first_page": res["list"]["first_page"], "conversation_600": res["conversation_600"],
                      "browser": res["browser"]}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
