"""Erasure (issue 18 item 3): a conversation or a user removed from every file of a store, from the
HTTP API and from replicas' caches; appends during an erasure are refused, not lost."""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build_items
from lychee_ray.config import load_config
from lychee_ray.io.adapters import read_objects
from lychee_ray.io.store import (
    ConversationDeleting,
    StoreReader,
    StoreWriter,
    NothingToErase,
    StoreLayout,
    conversation_key,
    conversation_write_lock,
    erase_conversation,
    erase_user,
    is_deleting,
)
from lychee_ray.io.verify import verify_store
from lychee_ray.testing.synthetic import synthetic_conversation

SECRET = "Quetzalbrook4471"  # written into one turn of conv-000001 only
GONE, KEPT, OTHER_USER = "conv-000001", "conv-000000", "conv-000002"  # GONE and KEPT: user u-a; OTHER_USER: u-b
TOKEN = "erase-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder) -> Path:
    """Three conversations built with the rules backend and compacted (the build's last step), plus
    error rows for two of them; GONE's secret is in its turns, records, nodes and an error message."""
    convs = []
    for i in range(3):
        c = synthetic_conversation(i, seed=3, sessions=2, topics_per_session=2)
        c.user_id = "u-b" if i == 2 else "u-a"
        convs.append(c)
    convs[1].sessions[0].turns[0].content += f" My code name is {SECRET}; {SECRET} is also my street."
    root = tmp_path_factory.mktemp("erase") / "store"
    cfg = load_config(env={})
    s = run_local_build_items(cfg, read_objects(convs), root, backend="rules", ctx=make_context(cfg, "rules", embedder))
    assert s.built == 3
    StoreWriter(root).write_errors([
        {"conversation_id": GONE, "stage": "warning", "message": f"repaired a turn of {SECRET}"},
        {"conversation_id": KEPT, "stage": "warning", "message": "repaired a turn"}], run_id="t")
    assert all(f.name.startswith("compact-") for t in ("records", "turns") for f in (root / t).glob("*.parquet"))
    return root


@pytest.fixture
def store(built, tmp_path) -> Path:
    """A fresh copy of the built store for one test (erasure changes it)."""
    return Path(shutil.copytree(built, tmp_path / "store"))


def traces(root: Path, needle: str) -> list[str]:
    """Every place ``needle`` occurs under ``root``: file names, raw bytes, and decoded contents of
    Parquet (compression can hide a raw scan) and JSON files (escapes can)."""
    hits = []
    for p in sorted(root.rglob("*")):
        rel = str(p.relative_to(root))
        if needle in rel:
            hits.append(f"{rel}: name")
        if not p.is_file():
            continue
        if needle.encode() in p.read_bytes():
            hits.append(f"{rel}: bytes")
        if p.suffix == ".parquet":
            if needle in json.dumps(pq.read_table(p).to_pylist(), default=str, ensure_ascii=False):
                hits.append(f"{rel}: parquet rows")
        elif p.suffix == ".json" or p.name.endswith((".deleting", ".lock")):
            text = p.read_text(encoding="utf-8")
            if text.strip() and needle in json.dumps(json.loads(text), ensure_ascii=False):
                hits.append(f"{rel}: json")
    return hits


def snapshot(root: Path, cids: list[str]) -> dict:
    r = StoreReader(root)
    out = {}
    for cid in cids:
        d = r.load(cid)
        out[cid] = {t: getattr(d, t).to_pylist() for t in ("records", "nodes", "turns", "segments")}
        out[cid]["ids"] = d.ids
    return out


@pytest.mark.heavy
def test_erase_conversation_leaves_no_trace_and_others_intact(store, embedder):
    before = traces(store, SECRET)
    assert any(h.startswith("records/") for h in before) and any(h.startswith("turns/") for h in before)
    assert any(h.startswith("errors/") for h in before)
    others = snapshot(store, [KEPT, OTHER_USER])

    rep = erase_conversation(store, GONE)
    assert (rep.scope, rep.conversations, rep.conversation_ids) == ("conversation", 1, [GONE])
    assert all(rep.rows_removed[t] > 0 for t in ("records", "nodes", "turns", "segments")) and rep.rows_removed["errors"] == 1
    assert rep.files_removed >= 5 and rep.files_rewritten >= 5 and rep.bytes_freed > 0  # 4 index files + marker; tables + errors

    assert traces(store, SECRET) == []
    assert traces(store, GONE) == [] and traces(store, conversation_key(GONE)) == []  # not even the id
    report = verify_store(store)
    assert report["ok"] and report["conversations"] == 2, report
    assert snapshot(store, [KEPT, OTHER_USER]) == others  # re-pointed into the rewritten files, rows unchanged
    m = json.loads((store / "manifest.json").read_text())
    assert m["counts"]["conversations"] == 2 and m["counts"]["turns"] == report["turns"]
    (entry,) = m["erasures"]
    assert entry["scope"] == "conversation" and entry["conversations"] == 1 and len(entry["id_sha256"]) == 16
    assert [e["conversation_id"] for e in StoreReader(store).errors().to_pylist()] == [KEPT]
    assert not is_deleting(store, GONE) and not list(StoreLayout(store).locks_dir.glob("*.deleting"))

    with pytest.raises(NothingToErase) as ei:
        erase_conversation(store, GONE)
    assert (ei.value.kind, ei.value.scope) == ("not_found", "conversation")

    # a conversation committed after the compaction: its own (generation) parts, not rows in shared files
    from tests.stores import RECORDS, SESSIONS, conversation_spec, make_store

    sid, started, turns = SESSIONS[0]
    make_store(store, embedder, [conversation_spec("c-late", sessions=[(sid, started, [*turns, ("Ann", f"I am {SECRET}.")])],
                                                   records=RECORDS[:4])])
    assert traces(store, SECRET)
    rep = erase_conversation(store, "c-late")
    assert (rep.rows_removed["turns"], rep.rows_removed["records"], rep.files_rewritten) == (len(turns) + 1, 4, 0)
    assert traces(store, SECRET) == [] and traces(store, "c-late") == [] and verify_store(store)["ok"]
    assert len(json.loads((store / "manifest.json").read_text())["erasures"]) == 2  # make_store's manifest kept the log


def test_erase_user_and_crashed_erasure_is_finished_by_a_rerun(store, monkeypatch):
    from lychee_ray.io.store import erase as erase_mod

    def crash(*a, **k):
        raise OSError("disk gone")

    monkeypatch.setattr(erase_mod, "_rewrite_compacted", crash)
    with pytest.raises(OSError):
        erase_user(store, "u-a")
    # half-erased: invisible, but its rows still sit in the compacted files; writes refuse until re-run
    assert StoreReader(store).conversation_ids() == [OTHER_USER]
    assert traces(store, SECRET) and is_deleting(store, GONE)
    with pytest.raises(ConversationDeleting) as ei:
        with conversation_write_lock(store, GONE):
            pass
    assert ei.value.kind == "conversation_deleting" and ei.value.conversation_id == GONE
    monkeypatch.undo()

    rep = erase_user(store, "u-a")  # finds both conversations through the erasure journals
    assert (rep.scope, rep.conversation_ids) == ("user", [KEPT, GONE])
    assert rep.rows_removed["records"] > 0 and rep.rows_removed["errors"] == 2
    assert traces(store, SECRET) == [] and traces(store, GONE) == [] and traces(store, KEPT) == []
    assert verify_store(store)["ok"] and StoreReader(store).conversation_ids() == [OTHER_USER]
    assert not is_deleting(store, GONE)
    with pytest.raises(NothingToErase):
        erase_user(store, "u-a")


def test_append_while_deleting_is_refused_not_lost(store):
    """An append committing when the erasure starts finishes first (and is erased with the rest);
    an append arriving while the erasure runs is refused with kind ``conversation_deleting``."""
    result: dict = {}
    with conversation_write_lock(store, GONE):  # an append of GONE is committing
        t = threading.Thread(target=lambda: result.update(rep=erase_conversation(store, GONE)))
        t.start()
        deadline = time.monotonic() + 10
        while not is_deleting(store, GONE) and time.monotonic() < deadline:
            time.sleep(0.01)
        assert is_deleting(store, GONE)
        with pytest.raises(ConversationDeleting):  # a second append: refused at once, not queued
            with conversation_write_lock(store, GONE):
                pass
        with conversation_write_lock(store, OTHER_USER):  # other conversations are not blocked
            pass
        assert t.is_alive()  # the erasure waits for the committing append
    t.join(10)
    assert result["rep"].conversation_ids == [GONE] and traces(store, SECRET) == []
    with conversation_write_lock(store, GONE):  # after the erasure a write may start a new conversation
        pass


# -- HTTP --------------------------------------------------------------------------------------
def _service(root: Path, embedder):
    from lychee_ray.serve import MemoryService

    cfg = load_config(env={}, sets=["serve.reload_interval_s=0", f"serve.token={TOKEN}"])
    return MemoryService(root, cfg, embedder=embedder, llm="rules")


def test_http_delete_conversation_and_user(store, embedder):
    from lychee_ray.serve import EraseReport, MemoryClient, RemoteError, create_app

    q = {"question": f"What is the code name {SECRET}?", "question_date": "2024-01-01"}
    svc1, svc2 = _service(store, embedder), _service(store, embedder)  # two replicas of one store
    with TestClient(create_app(svc1)) as c1, TestClient(create_app(svc2)) as c2:
        for c in (c1, c2):  # both replicas have GONE loaded, and the secret is findable
            r = c.post("/v1/search", json={**q, "conversation_id": GONE}, headers=AUTH)
            assert r.status_code == 200 and SECRET in json.dumps(r.json()["evidence"])
        assert GONE in svc2.store.cache

        assert c1.delete(f"/v1/conversations/{GONE}").status_code == 401  # the token middleware applies
        rep = MemoryClient("http://testserver", TOKEN, http=c1).delete_conversation(GONE)
        assert isinstance(rep, EraseReport) and rep.conversation_ids == [GONE]
        for c in (c1, c2):  # replica 2 never saw the DELETE: its next request drops the conversation
            assert c.post("/v1/search", json={**q, "conversation_id": GONE}, headers=AUTH).status_code == 404
            assert c.get(f"/v1/conversations/{GONE}", headers=AUTH).status_code == 404
            r = c.post("/v1/search", json={**q, "user_id": "u-a"}, headers=AUTH)
            assert r.status_code == 200 and r.json()["conversation_ids"] == [KEPT]
            assert SECRET not in json.dumps([r.json()["evidence"], r.json()["context"]])  # (the question echoes it)
            listed = c.get("/v1/conversations", headers=AUTH).json()["conversations"]
            assert GONE not in {x["conversation_id"] for x in listed}
        assert GONE not in svc2.store.cache and GONE not in svc1.store.cache

        r = c2.delete(f"/v1/conversations/{GONE}", headers=AUTH)
        assert (r.status_code, r.json()["error"]) == (404, "not_found")
        with pytest.raises(RemoteError) as ei:
            MemoryClient("http://testserver", TOKEN, http=c2).delete_user("nobody")
        assert (ei.value.status, ei.value.code) == (404, "not_found")
        r = c2.delete("/v1/users/u-b", headers=AUTH)
        assert r.status_code == 200 and r.json()["conversation_ids"] == [OTHER_USER]
        assert c1.post("/v1/search", json={**q, "user_id": "u-b"}, headers=AUTH).status_code == 404
        assert "/v1/users/{user_id}" in c1.get("/openapi.json").json()["paths"]
    svc1.close()
    svc2.close()
    assert traces(store, SECRET) == [] and verify_store(store)["ok"]


# -- CLI ---------------------------------------------------------------------------------------
def test_cli_delete(store, tmp_path, monkeypatch, capsys):
    from lychee_ray.cli.main import main

    monkeypatch.setattr("sys.stdin.isatty", lambda: True)  # a terminal: asks first
    monkeypatch.setattr("builtins.input", lambda prompt: "n")
    assert main(["delete", "--memory", str(store), "--conversation", GONE]) == 1
    assert "nothing was deleted" in capsys.readouterr().err and traces(store, SECRET)

    assert main(["delete", "--memory", str(store), "--conversation", GONE, "--yes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"deleted conversation '{GONE}': 1 conversation") and "rows removed:" in out
    assert traces(store, SECRET) == []
    assert main(["delete", "--memory", str(store), "--conversation", GONE, "--yes"]) == 2
    assert f"unknown conversation '{GONE}'" in capsys.readouterr().err
    assert main(["delete", "--memory", str(tmp_path / "nope"), "--user", "u-a", "--yes"]) == 2
    capsys.readouterr()

    monkeypatch.setattr("builtins.input", lambda prompt: "yes")
    assert main(["delete", "--memory", str(store), "--user", "u-a", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["conversation_ids"] == [KEPT]
    assert main(["delete", "--memory", str(store), "--user", "u-a"]) == 2  # nothing left of u-a
