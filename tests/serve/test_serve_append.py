"""Online appends over HTTP (issue 18 item 2; docs/serving.md "Appending turns"), without Ray:
two in-process app instances over one store stand for two replicas.

* Done-when: LoCoMo ``locomo-26`` built from its first two sessions; session 3 appended through
  ``POST .../turns`` makes its facts answerable by ``/v1/search`` — the question is
  :data:`QUESTION` (gold evidence ``D3:16``, "5 years") — on both replicas at once (the bound: any
  request that starts after the commit), as raw turns before the flush and as records after it;
* idempotency, 409 ``history_conflict`` naming the turn, 422 naming the field, 404 unknown /
  owner mismatch, 422 ``user_id`` required, 409 ``conversation_deleting``, 503 ``conversation_busy``;
* two replicas appending to one conversation at once lose nothing; the idle flush encodes the tail.
"""

from __future__ import annotations

import json
import shutil
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build_items
from lychee_ray.config import load_config
from lychee_ray.io.adapters import AdapterItem, read_input
from lychee_ray.io.store import StoreLayout, conversation_key, conversation_write_lock, erase_conversation
from lychee_ray.io.verify import verify_store
from lychee_ray.serve import MemoryClient, MemoryService, RemoteError, create_app
from tests.paths import LOCOMO_DIR, need

CID = "locomo-26"  # user id = conversation id (LoCoMo has no user ids)
QUESTION = "How long have Mel and her husband been married?"  # LoCoMo QA: "5 years", evidence D3:16
QDATE = "2023-06-10"
TOKEN = "append-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
# These tests are about appends, not where the segmenter cuts: a length cap below session 3's size
# (23 turns, more than 512 tokens) makes sure the appended session closes a segment, and the units are
# pinned to pairs so that the question's evidence (D3:15-16) lands in a closed, encoded segment whatever
# the semantic defaults decide. (In turn units this fixture leaves D3:12-23 open, and the turn-centred
# selection ranks an open-tail turn - first in every turn channel, but without records to lift it -
# below record-lifted turns: docs/segmenter.md §3.11 notes it.) The build, every service and the store
# use the same segmenter settings.
SEGMENTS = ["segmenter.max_segment_tokens=512", "segmenter.auto_without_roles=pair"]


@pytest.fixture(scope="module")
def locomo():
    """LoCoMo conversation 26, sessions 1-3 (18 + 17 + 23 turns)."""
    c = next(iter(read_input("locomo", need(LOCOMO_DIR / "26.json")))).conversation
    return c.model_copy(update={"sessions": c.sessions[:3]})


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder, locomo) -> Path:
    """A store of ``locomo-26`` sessions 1-2 (rules backend)."""
    root = tmp_path_factory.mktemp("append") / "store"
    cfg = load_config(env={}, sets=SEGMENTS)
    first_two = locomo.model_copy(update={"sessions": locomo.sessions[:2]})
    s = run_local_build_items(cfg, [AdapterItem(file="mem", line=0, conversation=first_two)], root, backend="rules",
                              ctx=make_context(cfg, "rules", embedder))
    assert s.built == 1
    return root


@pytest.fixture
def store(built, tmp_path) -> Path:
    """A fresh copy of the built store for one test (appends change it)."""
    return Path(shutil.copytree(built, tmp_path / "store"))


def service(root: Path, embedder, *sets: str) -> MemoryService:
    # reload_interval_s=0: no periodic store check, so what a replica sees comes from the per-request one
    cfg = load_config(env={}, sets=[*SEGMENTS, "serve.reload_interval_s=0", f"serve.token={TOKEN}", *sets])
    return MemoryService(root, cfg, embedder=embedder, llm="rules")


def session_turns(conv, index: int) -> list[dict[str, Any]]:
    s = conv.sessions[index]
    return [{"turn_id": t.turn_id, "role": t.role, "speaker": t.speaker, "content": t.content, "timestamp": t.timestamp,
             "session_id": s.session_id, "session_started_at": s.started_at, "meta": t.meta} for t in s.turns]


def search(client: TestClient, cid: str, question: str = QUESTION) -> dict[str, Any]:
    r = client.post("/v1/search", json={"conversation_id": cid, "question": question, "question_date": QDATE},
                    headers=AUTH)
    assert r.status_code == 200, r.text
    return r.json()


def with_turn(res: dict[str, Any], turn_id: str, records: bool = False) -> list[dict[str, Any]]:
    """Evidence items citing ``turn_id``; with ``records`` only those reached through a stored record: a record
    shown itself, or a turn a record lifted (issue 27's turn units carry the record channels that found them)."""
    return [e for e in res["evidence"] if turn_id in e["source_turn_ids"]
            and (not records or e["type"] != "turns" or {"records", "nodes"} & set(e["channels"]))]


@pytest.mark.heavy
def test_appended_session_is_searchable_at_once_on_both_replicas(store, embedder, locomo):
    # inline encoding: the segment a POST closes is encoded before it returns (background: below)
    inline = "appends.encode=inline"
    svc1, svc2 = service(store, embedder, inline), service(store, embedder, inline)
    with TestClient(create_app(svc1)) as c1, TestClient(create_app(svc2)) as c2:
        for c in (c1, c2):  # both replicas have the conversation loaded: session 3 is not there
            res = search(c, CID)
            assert not any(t.startswith("D3:") for e in res["evidence"] for t in e["source_turn_ids"])
        turns = session_turns(locomo, 2)
        r = c1.post(f"/v1/conversations/{CID}/turns", json={"turns": turns, "user_id": CID}, headers=AUTH)
        assert r.status_code == 200, r.text
        a = r.json()
        assert a["stored_turn_ids"] == [t["turn_id"] for t in turns] and not a["duplicate_turn_ids"]
        assert a["generation"] and not a["created"] and a["open_turn_ids"]  # the tail stays open
        assert a["segments_encoded"] and a["records_written"] > 0  # the segmenter closed a segment in session 3
        for c in (c1, c2):  # replica 2 never saw the POST: its next request reads the new generation
            res = search(c, CID)
            assert with_turn(res, "D3:16") and "5 years" in res["context"], [e["source_turn_ids"] for e in res["evidence"]]

        f = MemoryClient("http://testserver", TOKEN, http=c2).flush(CID)  # through the other replica
        assert f.segments_encoded and f.records_written > 0 and not f.open_turn_ids and not f.stored_turn_ids
        for c in (c1, c2):  # now also as records of the closed segment
            assert with_turn(search(c, CID), "D3:16", records=True)
        info = c2.get(f"/v1/conversations/{CID}", headers=AUTH).json()
        assert info["turns"] == 58 and info["sessions"] == 3
        assert c1.post(f"/v1/conversations/{CID}/flush", json={}, headers=AUTH).json()["generation"] is None
    svc1.close()
    svc2.close()
    assert verify_store(store)["ok"]


@pytest.mark.heavy
def test_background_encoding_returns_at_once_and_equals_inline(store, embedder, locomo, tmp_path):
    """appends.encode=background (the default): each POST of one turn stores it (searchable on
    both replicas at once) and returns; the replica's queue segments and encodes after. The store
    then equals the one inline appends make of the same turns."""
    inline_root = Path(shutil.copytree(store, tmp_path / "inline"))
    svc1, svc2 = service(store, embedder), service(store, embedder)
    ref = service(inline_root, embedder, "appends.encode=inline")
    turns = session_turns(locomo, 2)
    with TestClient(create_app(svc1)) as c1, TestClient(create_app(svc2)) as c2, TestClient(create_app(ref)) as cr:
        for i, t in enumerate(turns):
            c = (c1, c2)[i % 2]  # the two replicas take turns, as Serve's router would
            r = c.post(f"/v1/conversations/{CID}/turns", json={"turns": [t]}, headers=AUTH)
            assert r.status_code == 200, r.text
            a = r.json()
            assert a["stored_turn_ids"] == [t["turn_id"]] and a["encode_queued"] and not a["segments_encoded"]
            assert cr.post(f"/v1/conversations/{CID}/turns", json={"turns": [t]}, headers=AUTH).status_code == 200
            if t["turn_id"] == "D3:16":
                for cc in (c1, c2):  # searchable at once as a raw turn, on the replica that did not take it too
                    assert with_turn(search(cc, CID), "D3:16")
        assert svc1.appends.queue.drain(60) and svc2.appends.queue.drain(60)
        info = c2.get(f"/v1/conversations/{CID}", headers=AUTH).json()
        assert info["encode_pending_turns"] == 0 and info["turns"] == 58
        stats = c1.get("/v1/admin/stats", headers=AUTH).json()["appends"]
        assert stats["encode"] == "background" and stats["encode_queue"]["done"] >= 1
        for c in (c1, cr):
            assert c.post(f"/v1/conversations/{CID}/flush", json={}, headers=AUTH).status_code == 200
        for c in (c1, c2):
            assert with_turn(search(c, CID), "D3:16", records=True)
    for s in (svc1, svc2, ref):
        s.close()
    from lychee_ray.io.store import iter_markers, read_part

    def tables(root):
        m = next(x for x in iter_markers(root) if x.conversation_id == CID)
        return {t: read_part(root, t, m) for t in ("turns", "segments", "records", "nodes")}

    got, want = tables(store), tables(inline_root)
    for t in got:
        assert got[t].equals(want[t]), t
    assert verify_store(store)["ok"]


@pytest.mark.heavy
def test_a_replica_encodes_turns_a_dead_one_left_queued(store, embedder, locomo):
    """Turns stored by queued appends whose encoding never ran (the process died) are durable: the
    marker counts them, verify accepts them, and a replica that starts encodes them."""
    from lychee_ray.memory import MemoryStore

    turns = session_turns(locomo, 2)
    cfg = load_config(env={}, sets=SEGMENTS)
    with MemoryStore.open(store, cfg, embedder=embedder, llm="rules") as ms:  # no catch-up: as if it died
        for t in turns:
            assert ms.append(CID, [t], queue=True).encode_queued
    from lychee_ray.io.store import iter_markers

    m = next(x for x in iter_markers(store) if x.conversation_id == CID)
    assert m.unsegmented_turns == len(turns) and verify_store(store)["ok"]
    svc = service(store, embedder)
    with TestClient(create_app(svc)) as c:
        assert svc.appends.queue.drain(60)
        info = c.get(f"/v1/conversations/{CID}", headers=AUTH).json()
        assert info["encode_pending_turns"] == 0 and info["turns"] == 58 and info["segments"] > m.counts.segments
    svc.close()
    assert verify_store(store)["ok"]


def test_a_full_encode_queue_makes_the_append_encode_inline(store, embedder, locomo):
    """The encode queue is bounded: when it takes nothing more (full, or stopped), the append
    encodes in the request instead — nothing waits unbounded, nothing is left unencoded."""
    svc = service(store, embedder)
    svc.appends.queue.stop()  # takes nothing from now on, as a full queue
    t = session_turns(locomo, 2)[0]
    with TestClient(create_app(svc)) as c:
        a = c.post(f"/v1/conversations/{CID}/turns", json={"turns": [t]}, headers=AUTH).json()
        assert a["stored_turn_ids"] == [t["turn_id"]] and not a["encode_queued"]
        assert c.get("/v1/admin/stats", headers=AUTH).json()["appends"]["inline_encodes"] == 1
        assert c.get(f"/v1/conversations/{CID}", headers=AUTH).json()["encode_pending_turns"] == 0
    svc.close()
    assert verify_store(store)["ok"]


def test_idempotent_conflict_malformed_owner_and_unknown(store, embedder):
    t1 = {"turn_id": "n1", "role": "user", "speaker": "Ana", "content": "I adopted a grey cat named Pixel.",
          "timestamp": "2024-05-02T18:03:00"}
    t2 = {"turn_id": "n2", "role": "assistant", "speaker": "Bot", "content": "Congratulations on adopting Pixel!"}
    url = "/v1/conversations/c-new/turns"
    svc, closed = service(store, embedder), service(store, embedder, "appends.create=false")
    with TestClient(create_app(svc)) as c, TestClient(create_app(closed)) as c_closed:
        assert c.post(url, json={"turns": [t1], "user_id": "u-1"}).status_code == 401  # the token applies
        r = c.post(url, json={"turns": [t1]}, headers=AUTH)  # creating needs the owner
        assert r.status_code == 422 and r.json()["detail"][0]["loc"] == ["body", "user_id"]
        r = c_closed.post(url, json={"turns": [t1], "user_id": "u-1"}, headers=AUTH)  # creating is off
        assert (r.status_code, r.json()["error"]) == (404, "not_found")
        assert c.post("/v1/conversations/c-new/flush", headers=AUTH).status_code == 404

        client = MemoryClient("http://testserver", TOKEN, http=c)
        a = client.append_turns("c-new", [t1, t2], user_id="u-1")
        assert a.created and a.stored_turn_ids == ["n1", "n2"] and a.user_id == "u-1"
        assert with_turn(search(c, "c-new", "What is the name of the cat?"), "n1")  # raw turns: searchable now
        again = client.append_turns("c-new", [t1, t2])  # a retry: idempotent, nothing written
        assert again.duplicate_turn_ids == ["n1", "n2"] and not again.stored_turn_ids and again.generation is None

        r = c.post(url, json={"turns": [{**t1, "content": "I adopted a dog."}]}, headers=AUTH)
        assert (r.status_code, r.json()["error"], r.json()["turn_id"]) == (409, "history_conflict", "n1")
        assert "'n1'" in r.json()["detail"]
        with pytest.raises(RemoteError) as ei:
            client.append_turns("c-new", [t2, {**t2, "turn_id": "n3"}, {**t1, "speaker": "Eve"}])
        assert (ei.value.status, ei.value.code, ei.value.data) == (409, "history_conflict", {"turn_id": "n1"})

        malformed = [  # (turns, the field the 422 names)
            ([{**t2, "turn_id": "n3", "role": "robot"}], ["body", "turns", 0, "role"]),
            ([t2, {**t2, "turn_id": "n3", "timestamp": "yesterday-ish"}], ["body", "turns", 1, "timestamp"]),
            ([{"turn_id": "n3", "role": "user"}], ["body", "turns", 0, "content"]),
            ([{"turn_id": "", "content": "x"}], ["body", "turns", 0, "turn_id"]),
            ([{**t2, "turn_id": "n3", "colour": "red"}], ["body", "turns", 0, "colour"]),
            ([{**t2, "turn_id": "n3"}, {**t2, "turn_id": "n3", "content": "other"}], ["body", "turns", 0, "turn_id"]),
            ([], ["body", "turns"]),
        ]
        for turns, loc in malformed:
            r = c.post(url, json={"turns": turns}, headers=AUTH)
            assert r.status_code == 422 and r.json()["detail"][0]["loc"] == loc, (turns, r.text)
        r = c.post(url, json={"turns": [{**t2, "turn_id": "n3", "session_id": "s0"}]}, headers=AUTH)
        assert r.status_code == 200  # a new session after the last one
        r = c.post(url, json={"turns": [{**t2, "turn_id": "n4", "session_id": "s1"}]}, headers=AUTH)
        assert (r.status_code, r.json()["turn_id"]) == (409, "n4")  # a turn for a session that is not the last one

        r = c.post(url, json={"turns": [{**t2, "turn_id": "n5"}], "user_id": "u-2"}, headers=AUTH)
        assert (r.status_code, r.json()["error"]) == (404, "not_found")  # not u-2's: as a read of it answers
        assert c.post(f"/v1/conversations/{CID}/flush", json={"user_id": "u-2"}, headers=AUTH).status_code == 404
        assert c.get("/v1/conversations/c-new", params={"user_id": "u-1"}, headers=AUTH).json()["turns"] == 3
        assert c_closed.post(url, json={"turns": [{**t2, "turn_id": "n5"}]}, headers=AUTH).status_code == 200  # exists now
        assert "/v1/conversations/{conversation_id}/turns" in c.get("/openapi.json").json()["paths"]
    svc.close()
    closed.close()


def test_append_during_delete_is_refused_and_busy_is_503(store, embedder):
    turn = {"turn_id": "x1", "content": "Hello again, it is me.", "role": "user"}
    url = f"/v1/conversations/{CID}/turns"
    svc = service(store, embedder, "appends.lock_timeout_s=0.2")
    layout, key = StoreLayout(store), conversation_key(CID)
    with TestClient(create_app(svc)) as c:
        with conversation_write_lock(store, CID):  # another writer holds the conversation
            r = c.post(url, json={"turns": [turn]}, headers=AUTH)
        assert (r.status_code, r.json()["error"], r.headers["retry-after"]) == (503, "conversation_busy", "1")
        assert c.post(url, json={"turns": [turn]}, headers=AUTH).json()["stored_turn_ids"] == ["x1"]  # the retry

        # an erasure's first step: the conversation's "deleting" flag, holding its marker as the journal
        layout.deleting_path(key).write_text(layout.read_marker(key).to_json(), encoding="utf-8")
        r = c.post(url, json={"turns": [{**turn, "turn_id": "x2"}]}, headers=AUTH)
        assert (r.status_code, r.json()["error"]) == (409, "conversation_deleting")  # refused, and told so
        assert c.post(f"/v1/conversations/{CID}/flush", headers=AUTH).status_code == 409
        assert erase_conversation(store, CID).conversation_ids == [CID]  # the erasure finishes
        assert c.post(url, json={"turns": [{**turn, "turn_id": "x2"}]}, headers=AUTH).status_code == 422  # gone: needs a user
        r = c.post(url, json={"turns": [{**turn, "turn_id": "x2"}], "user_id": "u-9"}, headers=AUTH)
        assert r.status_code == 200 and r.json()["created"]  # a new conversation under the same id
    svc.close()


@pytest.mark.heavy
def test_two_replicas_appending_to_one_conversation_lose_nothing(store, embedder):
    svc1, svc2 = service(store, embedder), service(store, embedder)
    per_replica = 5
    with TestClient(create_app(svc1)) as c1, TestClient(create_app(svc2)) as c2:
        r = c1.post("/v1/conversations/c-shared/turns", json={"user_id": "u-s", "turns": [
            {"turn_id": "s-0", "content": "We started a shared diary about rivers."}]}, headers=AUTH)
        assert r.status_code == 200
        assert search(c2, "c-shared", "What is the diary about?")["conversation_ids"] == ["c-shared"]  # seen at once
        failures: list[str] = []

        def writer(c: TestClient, name: str) -> None:
            for i in range(per_replica):
                r = c.post("/v1/conversations/c-shared/turns", headers=AUTH, json={"turns": [
                    {"turn_id": f"{name}-{i}", "content": f"{name} notes thing number {i} about the river Wye."}]})
                if r.status_code != 200 or r.json()["stored_turn_ids"] != [f"{name}-{i}"]:
                    failures.append(r.text)

        threads = [threading.Thread(target=writer, args=(c, n)) for c, n in ((c1, "a"), (c2, "b"))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not failures
        for c in (c1, c2):
            assert c.get("/v1/conversations/c-shared", headers=AUTH).json()["turns"] == 1 + 2 * per_replica
    svc1.close()
    svc2.close()
    assert verify_store(store)["ok"]


def test_idle_flush_encodes_the_open_tail(store, embedder):
    svc = service(store, embedder, "appends.idle_flush_s=0.5")
    turns = [{"turn_id": f"i{i}", "content": text, "role": "user", "speaker": "Ana"} for i, text in enumerate([
        "I booked a cabin by Lake Tahoe for the second week of July.",
        "My sister Lena is coming along with her two dogs.",
        "We plan to rent kayaks and hike the Rubicon trail."])]
    layout, key = StoreLayout(store), conversation_key("c-idle")
    with TestClient(create_app(svc)) as c:
        a = c.post("/v1/conversations/c-idle/turns", json={"turns": turns, "user_id": "u-1"}, headers=AUTH).json()
        assert a["open_turn_ids"] == ["i0", "i1", "i2"] and a["records_written"] == 0
        deadline = time.monotonic() + 30
        while layout.read_marker(key).open_turns and time.monotonic() < deadline:
            time.sleep(0.1)
        assert layout.read_marker(key).open_turns == 0 and layout.read_marker(key).counts.records > 0
        # the flusher counts its flush once the call returns, just after the commit: wait for that too
        while (stats := c.get("/v1/admin/stats", headers=AUTH).json()["appends"])["idle_flushes"] < 1 \
                and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (stats["idle_flushes"], stats["idle_flush_errors"], stats["idle_flush_pending"]) == (1, 0, 0)
        assert with_turn(search(c, "c-idle", "Where is the cabin?"), "i0", records=True)
    svc.close()
