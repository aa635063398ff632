"""The web inspector's test data and servers, built once per session (registered in ``tests/conftest.py``).

One small store holds the three kinds of conversation the pages must show: a LoCoMo slice (the first
sessions of ``locomo-26`` with the questions whose gold turns they hold), an agent-log slice (the first
tau-bench airline trajectories: tool calls, tool results, a system prompt) and a synthetic long
user–assistant chat. An ``eval-retrieval --per-question`` run over the LoCoMo slice at a small budget
gives the eval page hits and misses. ``inspector_url`` serves it as ``lychee-ray inspect`` does (no
key); ``tenant_ui`` serves the same store as ``lychee-ray serve`` mounts its ``/ui`` (the service's app
and guard, in-process on uvicorn, as the other service tests run it) with two tenants' keys.
``browser`` is one headless Chromium per test module (the OS's; skipped with the reason where there is none).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.paths import LOCOMO_DIR, SHARED_DATA, need

AGENT_LOGS = SHARED_DATA / "agentlogs" / "tau_airline_dev.jsonl"
LOCOMO_SESSIONS = 3  # sessions of locomo-26 kept (58 turns, 20 questions with gold turns in them)
AGENT_CONVERSATIONS = 3
EVAL_BUDGET = 150  # tokens: small enough that some gold turns miss the context
CHAT_ID, CHAT_USER = "chat-long", "chat-user"
# Chromium's switches for tests: headless, no sandbox (containers), nothing fetched in the background.
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
TENANT_KEYS = {"locomo-tenant": "tenant-a-5f1c-key", "agent-tenant": "tenant-b-93e0-key", "admin": "admin-77d2-key"}


@dataclass
class InspectorData:
    store: Path
    eval_run: Path
    locomo_id: str
    agent_ids: list[str]
    agent_users: list[str]
    chat_id: str = CHAT_ID
    questions: int = 0  # the eval run's (LoCoMo categories 1-4 with gold turns in the slice)
    keys: dict[str, str] = field(default_factory=lambda: dict(TENANT_KEYS))


def locomo_slice(src: Path, dst: Path, sessions: int) -> int:
    """A LoCoMo file with its first ``sessions`` sessions and the questions whose gold turns are in them."""
    d = json.loads(src.read_text(encoding="utf-8"))
    out = {k: v for k, v in d.items()
           if not (m := re.match(r"(?:events_)?session_(\d+)", k)) or int(m.group(1)) <= sessions}
    out["qa"] = [q for q in d.get("qa", []) if q.get("evidence")
                 and all(re.match(rf"D([1-9]\d*):", e) and int(e[1:].split(":")[0]) <= sessions for e in q["evidence"])]
    dst.write_text(json.dumps(out), encoding="utf-8")
    return len(out["qa"])


def long_chat(turns_wanted: int):
    """A synthetic user–assistant chat of about ``turns_wanted`` turns over many sessions."""
    from lychee_ray.testing.synthetic import synthetic_conversation

    sessions = max(1, turns_wanted // 18)  # 3 topics x 3 exchanges x 2 turns a session
    c = synthetic_conversation(7, seed=3, sessions=sessions, topics_per_session=3, exchanges_per_topic=(3, 3))
    return c.model_copy(update={"conversation_id": CHAT_ID, "user_id": CHAT_USER})


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


@pytest.fixture(scope="session")
def inspector_data(tmp_path_factory, embedder) -> InspectorData:
    from lychee_ray.api import build_memory
    from lychee_ray.cli.main import main
    from lychee_ray.config import load_config
    from lychee_ray.io.adapters import read_input

    tmp = tmp_path_factory.mktemp("inspector")
    data = tmp / "data"
    data.mkdir()
    locomo_slice(need(LOCOMO_DIR / "26.json"), data / "26.json", LOCOMO_SESSIONS)
    lines = need(AGENT_LOGS).read_text(encoding="utf-8").splitlines()[:AGENT_CONVERSATIONS]
    (data / "agent.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    locomo = [i.conversation for i in read_input("locomo", data / "26.json")]
    agents = [i.conversation for i in read_input("openai", data / "agent.jsonl")]
    assert all(locomo) and all(agents)
    store = tmp / "store"
    summary = build_memory([*locomo, *agents, long_chat(200)], store, load_config(env={}), llm="rules")
    assert summary.built == 1 + AGENT_CONVERSATIONS + 1 and summary.failed == 0
    run = tmp / "eval-retrieval.json"
    assert main(["eval-retrieval", "--memory", str(store), "--data", str(data / "26.json"), "--per-question",
                 "--out", str(run), "--budget-tokens", str(EVAL_BUDGET), "--baselines", "none"]) == 0
    return InspectorData(store=store, eval_run=run, locomo_id=locomo[0].conversation_id,  # type: ignore[union-attr]
                         agent_ids=[a.conversation_id for a in agents],  # type: ignore[union-attr]
                         agent_users=[a.user_id for a in agents],  # type: ignore[union-attr]
                         questions=json.loads(run.read_text(encoding="utf-8"))["questions"])


@pytest.fixture(scope="session")
def inspector_url(inspector_data, embedder) -> str:
    """The store and its eval run as ``lychee-ray inspect`` serves them (no key): the pages' URL."""
    from lychee_ray.config import load_config
    from lychee_ray.inspector.server import InspectorServer
    from lychee_ray.serve.service import MemoryService

    cfg = load_config(env={}, sets=["serve.reload_interval_s=0"])
    server = InspectorServer(inspector_data.store, cfg, [str(inspector_data.eval_run)],
                             service=MemoryService(inspector_data.store, cfg, embedder=embedder, llm="rules"))
    server.start()
    yield server.url
    server.stop()


@pytest.fixture(scope="session")
def tenant_ui(inspector_data, embedder, tmp_path_factory) -> str:
    """The same store behind ``lychee-ray serve``'s app (its guard, its ``/ui`` mount) with two tenants'
    keys: ``locomo-tenant`` sees the LoCoMo slice's user, ``agent-tenant`` the agent logs' users. The base URL."""
    from lychee_ray.config import load_config
    from lychee_ray.inspector.routes import service_mounts
    from lychee_ray.inspector.server import ThreadedServer
    from lychee_ray.serve.app import create_app
    from lychee_ray.serve.service import MemoryService

    keys = [{"name": "locomo-tenant", "sha256": sha(TENANT_KEYS["locomo-tenant"]), "users": [inspector_data.locomo_id]},
            {"name": "agent-tenant", "sha256": sha(TENANT_KEYS["agent-tenant"]), "users": inspector_data.agent_users},
            {"name": "admin", "sha256": sha(TENANT_KEYS["admin"]), "admin": True}]
    conf = tmp_path_factory.mktemp("tenant_ui") / "keys.json"
    conf.write_text(json.dumps({"serve": {"keys": keys, "reload_interval_s": 0}}))
    cfg = load_config([conf], env={})
    svc = MemoryService(inspector_data.store, cfg, embedder=embedder, llm="rules")
    server = ThreadedServer(create_app(svc, service_mounts(svc, cfg.inspect)), "127.0.0.1")
    url = server.start()
    yield url
    server.stop()
    svc.close()


def chromium_path() -> str | None:
    """The OS's Chromium (``LYCHEE_CHROMIUM`` overrides); None when there is none."""
    for cand in (os.environ.get("LYCHEE_CHROMIUM"), shutil.which("chromium"), shutil.which("chromium-browser"),
                 "/usr/bin/chromium"):
        if cand and Path(cand).exists():
            return cand
    return None


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium for the test module (Playwright driving the OS's browser: its own
    download is never used); skipped, with the reason, where Playwright or Chromium is missing.
    Module-scoped: Playwright's synchronous API keeps an event loop running in the main thread while
    it is started, which code that calls ``asyncio.run`` (other modules' tests) cannot share."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        pytest.skip("playwright is not installed (pip install -e '.[dev]')")
    exe = chromium_path()
    if exe is None:
        pytest.skip("no Chromium on this machine (apt-get install -y chromium, or set LYCHEE_CHROMIUM)")
    pw = sync_playwright().start()
    try:
        b = pw.chromium.launch(executable_path=exe, args=CHROMIUM_ARGS)
    except Exception as e:  # noqa: BLE001 — a browser that cannot start is a missing browser here
        pw.stop()
        pytest.skip(f"Chromium at {exe} did not start: {e}")
    yield b
    b.close()
    pw.stop()
