"""Erasure that stays erased (issue 39 item 1): the delete / re-create race, queued and inline.

The race: a background encoding (``ingest/append/queued.py`` ``catch_up``) reads a conversation and
encodes it without the write lock; meanwhile ``DELETE`` erases the conversation and an append
re-creates the id. Before lineages the encoding then committed the erased conversation's records
into the new one. Each round here hits that window *deterministically*: the encoder is gated
(:class:`GatedEncoder`), so the erasure and the re-creation happen while an encoding of the erased
turns is in flight; then it is released. Inline mode runs the same round with the append itself
holding the gate (and the write lock): the erasure waits for it, a re-creation meanwhile is refused
with 409, and after the erasure the id starts clean.

After every round: no file under the store holds the round's secret (names, raw bytes, decoded
Parquet and JSON: :func:`tests.io.test_erase.traces`), ``verify`` is ok, the service shows only the
re-created conversation's turns, and a search for the secret finds nothing of it.

CI runs :data:`CI_ROUNDS` rounds per mode; ``LYCHEE_SLOW=1`` runs :data:`SLOW_ROUNDS` in a row.
"""

from __future__ import annotations

import asyncio
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lychee_ray.ingest.context import make_context
from lychee_ray.config import load_config
from lychee_ray.io.store import is_deleting
from lychee_ray.io.verify import verify_store
from lychee_ray.serve import MemoryService, create_app
from lychee_ray.testing.synthetic import synthetic_conversation
from tests.stores import conversation_spec, make_store
from tests.io.test_erase import traces

pytestmark = [pytest.mark.reliability]

CI_ROUNDS = int(os.environ.get("LYCHEE_ERASURE_RACE_ROUNDS", "3"))
SLOW_ROUNDS = 200
SLOW_TIMEOUT_S = 3600  # 200 rounds take ~6 min on 2 busy cores: far above the suite's 300 s per test
TOKEN = "race-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
CID, USER = "race-conv", "race-user"
GATE_TIMEOUT_S = 600.0  # a gate not reached (or not opened) in this long: the test fails (never a hang)


class GatedEncoder:
    """The rules encoder, paused inside its first ``encode`` call after :meth:`arm`: ``entered`` is
    set when an encoding reaches the gate; it goes on after :meth:`open`."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.backend, self.model = inner.backend, inner.model
        self._armed = threading.Event()
        self.entered = threading.Event()
        self._open = threading.Event()

    def arm(self) -> None:
        self.entered.clear()
        self._open.clear()
        self._armed.set()

    def open(self) -> None:
        self._open.set()

    async def encode(self, request: Any) -> Any:
        if self._armed.is_set():
            self._armed.clear()
            self.entered.set()
            if not await asyncio.to_thread(self._open.wait, GATE_TIMEOUT_S):
                raise RuntimeError("the test never opened the gate")  # never go on silently: the round is void
        return await self.inner.encode(request)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def secret_turns(round_no: int) -> tuple[str, list[dict[str, Any]]]:
    """Turns for one round (ids unique per round, a new session), one of them holding the round's secret."""
    secret = f"Zorblax{round_no:04d}Quill"
    conv = synthetic_conversation(round_no % 50, seed=39, sessions=1, topics_per_session=4)
    turns = [{"turn_id": f"r{round_no}-{t.turn_id}", "role": t.role, "speaker": t.speaker, "content": t.content,
              "session_id": f"s{round_no}", "session_started_at": "2024-03-01T10:00:00"}
             for t in conv.sessions[0].turns]
    turns[0]["content"] += f" My locker code is {secret}, remember {secret}."
    turns[-3]["content"] += f" Again: {secret}."
    return secret, turns


def recreate_turns(round_no: int) -> list[dict[str, Any]]:
    """What re-creates the conversation: both speakers of the erased turns (the same speakers let a
    background encoding continue the stored segmentation and commit a delta: the dangerous case)."""
    return [{"turn_id": f"new-{round_no}-{i}", "role": role, "speaker": role,
             "content": f"A fresh start number {round_no}: {text}",
             "session_id": f"n{round_no}", "session_started_at": "2024-04-01T10:00:00"}
            for i, (role, text) in enumerate([("user", "I like green tea."), ("assistant", "Noted, green tea it is.")])]


def gated_service(root: Path, embedder: Any, mode: str) -> tuple[MemoryService, GatedEncoder]:
    """A service whose encoding context of ``mode`` (the background queue's, or the requests' own
    for inline) runs through a :class:`GatedEncoder`."""
    cfg = load_config(env={}, sets=["serve.reload_interval_s=0", f"serve.token={TOKEN}",
                                    f"appends.encode={mode}", "appends.idle_flush_s=0"])
    svc = MemoryService(root, cfg, embedder=embedder, llm="rules")
    ctx = make_context(svc.config, "rules", embedder, batched=False)
    gate = GatedEncoder(ctx.encoder)
    ctx.encoder = gate
    if mode == "background":
        svc.appends._bg_ctx = ctx  # the queue's context (made on first use otherwise)
    else:
        svc.appends._ctx = ctx
    return svc, gate


def check_round(c: TestClient, root: Path, secret: str, round_no: int, expect_turns: int) -> None:
    hits = traces(root, secret)
    assert not hits, f"round {round_no}: erased text survives in {hits[:5]}"
    report = verify_store(root)
    assert report["ok"], f"round {round_no}: verify failed: {report}"
    info = c.get(f"/v1/conversations/{CID}", headers=AUTH)
    assert info.status_code == 200, info.text
    assert info.json()["turns"] == expect_turns, (round_no, info.json())
    r = c.post("/v1/search", json={"conversation_id": CID, "question": f"What is the locker code {secret}?"},
               headers=AUTH)
    assert r.status_code == 200, r.text
    found = r.json()
    assert secret not in json.dumps(found["evidence"]) + found["context"], f"round {round_no}: a search returned erased text"
    assert all(not e["source_turn_ids"] or all(t.startswith("new-") for t in e["source_turn_ids"])
               for e in found["evidence"]), (round_no, [e["source_turn_ids"] for e in found["evidence"]])


def progress(mode: str, n: int, rounds: int, t0: float) -> None:
    if (n + 1) % 25 == 0 and n + 1 < rounds:
        print(f"{mode}: {n + 1}/{rounds} rounds clean, {time.monotonic() - t0:.1f} s", flush=True)


def wait_for(event: threading.Event, what: str) -> None:
    assert event.wait(GATE_TIMEOUT_S), f"{what} never happened"


def run_queued_rounds(root: Path, embedder: Any, rounds: int) -> None:
    svc, gate = gated_service(root, embedder, "background")
    with TestClient(create_app(svc)) as c:
        r = c.post(f"/v1/conversations/{CID}/turns", json={"user_id": USER, "turns": recreate_turns(-1)}, headers=AUTH)
        assert r.status_code == 200 and r.json()["created"], r.text
        t0 = time.monotonic()
        for n in range(rounds):
            secret, turns = secret_turns(n)
            gate.arm()
            r = c.post(f"/v1/conversations/{CID}/turns", json={"user_id": USER, "turns": turns}, headers=AUTH)
            assert r.status_code == 200 and r.json()["encode_queued"], r.text
            wait_for(gate.entered, f"round {n}: the background encoding")  # it read the turns and is encoding them
            d = c.delete(f"/v1/conversations/{CID}", headers=AUTH)
            assert d.status_code == 200 and d.json()["conversations"] == 1, d.text
            r = c.post(f"/v1/conversations/{CID}/turns", json={"user_id": USER, "turns": recreate_turns(n)},
                       headers=AUTH)
            assert r.status_code == 200 and r.json()["created"], r.text
            gate.open()  # the encoding of the erased turns goes on, and must not commit
            assert svc.appends.queue.drain(GATE_TIMEOUT_S)
            check_round(c, root, secret, n, expect_turns=2)
            progress("queued", n, rounds, t0)
        print(f"queued: {rounds} rounds in a row in {time.monotonic() - t0:.1f} s, each clean")
    svc.close()


def run_inline_rounds(root: Path, embedder: Any, rounds: int) -> None:
    svc, gate = gated_service(root, embedder, "inline")
    with TestClient(create_app(svc)) as c:
        r = c.post(f"/v1/conversations/{CID}/turns", json={"user_id": USER, "turns": recreate_turns(-1)}, headers=AUTH)
        assert r.status_code == 200 and r.json()["created"], r.text
        t0 = time.monotonic()
        for n in range(rounds):
            secret, turns = secret_turns(n)
            gate.arm()
            out: dict[str, Any] = {}
            append = threading.Thread(target=lambda: out.update(append=c.post(
                f"/v1/conversations/{CID}/turns", json={"user_id": USER, "turns": turns}, headers=AUTH)))
            append.start()
            wait_for(gate.entered, f"round {n}: the inline encoding")  # the append holds the write lock
            erase = threading.Thread(target=lambda: out.update(erase=c.delete(f"/v1/conversations/{CID}", headers=AUTH)))
            erase.start()
            deadline = time.monotonic() + GATE_TIMEOUT_S
            while not is_deleting(root, CID):  # the erasure has set its flag and waits for the lock
                assert time.monotonic() < deadline and erase.is_alive(), f"round {n}: erasure did not start"
                time.sleep(0.005)
            # while the erasure waits for the lock, the replica serves others (no search worker is held)
            other = c.post("/v1/search", json={"conversation_id": "bystander", "question": "Who painted?"}, headers=AUTH)
            assert other.status_code == 200, other.text
            early = c.post(f"/v1/conversations/{CID}/turns", json={"user_id": USER, "turns": recreate_turns(n)},
                           headers=AUTH)
            assert early.status_code == 409 and early.json()["error"] == "conversation_deleting", early.text
            gate.open()
            append.join(GATE_TIMEOUT_S)
            erase.join(GATE_TIMEOUT_S)
            assert out["append"].status_code == 200, out["append"].text  # committed, then erased with the rest
            assert out["erase"].status_code == 200 and out["erase"].json()["conversations"] == 1, out["erase"].text
            r = c.post(f"/v1/conversations/{CID}/turns", json={"user_id": USER, "turns": recreate_turns(n)},
                       headers=AUTH)
            assert r.status_code == 200 and r.json()["created"], r.text
            check_round(c, root, secret, n, expect_turns=2)
            progress("inline", n, rounds, t0)
        print(f"inline: {rounds} rounds in a row in {time.monotonic() - t0:.1f} s, each clean")
    svc.close()


@pytest.fixture
def root(tmp_path, embedder) -> Path:
    """A store with one unrelated conversation (it must survive every round untouched)."""
    return make_store(tmp_path / "store", embedder, [conversation_spec("bystander", "u-b")])


@pytest.mark.heavy
def test_erase_during_a_queued_encoding_then_recreate_never_resurrects(root, embedder):
    run_queued_rounds(root, embedder, CI_ROUNDS)


@pytest.mark.heavy
def test_erase_during_an_inline_append_then_recreate_starts_clean(root, embedder):
    run_inline_rounds(root, embedder, CI_ROUNDS)


@pytest.mark.slow
@pytest.mark.timeout(SLOW_TIMEOUT_S)
def test_erasure_race_200_rounds_queued(root, embedder):
    run_queued_rounds(root, embedder, SLOW_ROUNDS)


@pytest.mark.slow
@pytest.mark.timeout(SLOW_TIMEOUT_S)
def test_erasure_race_200_rounds_inline(root, embedder):
    run_inline_rounds(root, embedder, SLOW_ROUNDS)
