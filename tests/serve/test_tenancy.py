"""Tenancy (issue 39 item 2; docs/serving.md "Tenancy"): per-tenant API keys scoped to user ids or
user-id prefixes, an admin key, and the single ``serve.token`` kept as an admin key.

The matrix: every endpoint × {own tenant's key on its own conversation, the same key on another
tenant's, the admin key, the legacy token, no key, a wrong key}. Outside its scope a key gets the
404 a missing conversation gets, byte for byte (ids do not leak), and changes nothing; admin
endpoints answer a tenant 403. Keys are never logged, never in stats, never in ``config show``.
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any, Callable

import pytest
from fastapi.testclient import TestClient

from lychee_ray.cli.main import main
from lychee_ray.config import ConfigError, load_config
from lychee_ray.io.store import StoreReader
from lychee_ray.serve import MemoryService, create_app
from tests.stores import SESSIONS, conversation_spec, make_store

pytestmark = [pytest.mark.reliability, pytest.mark.heavy]  # listed in docs/reliability.md (issue 39)

Q = "When did Caroline go to the LGBTQ support group?"
ACME_KEY, BETA_KEY, ADMIN_KEY, LEGACY_TOKEN = "acme-0f5e-key", "beta-77a1-key", "root-c3d9-key", "legacy-9b2e-token"
ALL_SECRETS = (ACME_KEY, BETA_KEY, ADMIN_KEY, LEGACY_TOKEN)

# tenant acme owns every user id starting with "acme:"; tenant beta owns the user "bob" exactly
OWN = ("acme-1", "acme:alice")  # (conversation, owner) acme may touch
OTHER = ("beta-1", "bob")  # beta's: acme must not see it exist


def sha(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def keys_file(tmp: Path) -> Path:
    """A config file as an operator writes it: hashes only."""
    p = tmp / "keys.yaml"
    p.write_text(json.dumps({"serve": {"token": LEGACY_TOKEN, "reload_interval_s": 0, "keys": [
        {"name": "acme", "sha256": sha(ACME_KEY), "user_prefixes": ["acme:"]},
        {"name": "admin", "sha256": sha(ADMIN_KEY), "admin": True},
    ]}}))
    return p


CONVERSATIONS = {"acme-1": "acme:alice", "acme-2": "acme:bob", "beta-1": "bob", "gamma-1": "acme-not-a-prefix-match"}


@pytest.fixture(scope="module")
def built(tmp_path_factory, embedder) -> Path:
    """Four conversations created through the API (so the service may append to them), the same turns each."""
    tmp = tmp_path_factory.mktemp("tenancy")
    root = make_store(tmp / "store", embedder, [conversation_spec("seed", "seed-user")])
    turns = [{"turn_id": f"D{si}:{ti}", "speaker": spk, "content": text, "session_id": sid, "session_started_at": at}
             for si, (sid, at, ts) in enumerate(SESSIONS, start=1) for ti, (spk, text) in enumerate(ts, start=1)]
    svc = service(root, embedder, tmp)
    with TestClient(create_app(svc)) as c:
        for cid, owner in CONVERSATIONS.items():
            r = c.post(f"/v1/conversations/{cid}/turns", json={"user_id": owner, "turns": turns, "flush": True},
                       headers=auth(ADMIN_KEY))
            assert r.status_code == 200 and r.json()["created"], r.text
    svc.close()
    return root


def service(root: Path, embedder, tmp: Path) -> MemoryService:
    # beta's key comes from the environment, in plaintext (hashed when read), as an operator passes secrets
    env = {"LYCHEE_SERVE_KEYS": json.dumps([{"name": "beta", "key": BETA_KEY, "users": ["bob"]}])}
    cfg = load_config([keys_file(tmp)], env=env, sets=["appends.encode=inline", "appends.idle_flush_s=0"])
    return MemoryService(root, cfg, embedder=embedder, llm="rules")


def auth(key: str | None) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key is not None else {}


def turn(tid: str) -> dict[str, Any]:
    return {"turn_id": tid, "role": "user", "speaker": "Caroline", "content": f"I bought a kite today ({tid})."}


# endpoint -> how to call it for a conversation (cid, owner); each returns the response
Call = Callable[[TestClient, dict[str, str], str, str], Any]
ENDPOINTS: dict[str, Call] = {
    "list": lambda c, h, cid, owner: c.get("/v1/conversations", params={"user_id": owner}, headers=h),
    "get": lambda c, h, cid, owner: c.get(f"/v1/conversations/{cid}", headers=h),
    "search": lambda c, h, cid, owner: c.post("/v1/search", json={"conversation_id": cid, "question": Q}, headers=h),
    "search_user": lambda c, h, cid, owner: c.post("/v1/search", json={"user_id": owner, "question": Q}, headers=h),
    "query": lambda c, h, cid, owner: c.post("/v1/query", json={"conversation_id": cid, "question": Q}, headers=h),
    "append": lambda c, h, cid, owner: c.post(f"/v1/conversations/{cid}/turns", json={"turns": [turn("k-1")]}, headers=h),
    "flush": lambda c, h, cid, owner: c.post(f"/v1/conversations/{cid}/flush", json={}, headers=h),
    "delete": lambda c, h, cid, owner: c.delete(f"/v1/conversations/{cid}", headers=h),
    "delete_user": lambda c, h, cid, owner: c.delete(f"/v1/users/{owner}", headers=h),
    "history": lambda c, h, cid, owner: c.get("/v1/history", params={"conversation_id": cid, "subject": "Caroline"},
                                              headers=h),
    "history_user": lambda c, h, cid, owner: c.get("/v1/history", params={"user_id": owner, "slot": "caroline · city"},
                                                   headers=h),
    "forget": lambda c, h, cid, owner: c.post(f"/v1/users/{owner}/forget",
                                              json={"entity": "Caroline", "conversation_id": cid}, headers=h),
    "forget_user": lambda c, h, cid, owner: c.post(f"/v1/users/{owner}/forget", json={"entity": "Caroline"},
                                                   headers=h),
    "stats": lambda c, h, cid, owner: c.get("/v1/admin/stats", headers=h),
    "reload": lambda c, h, cid, owner: c.post("/v1/admin/reload", headers=h),
}
ADMIN_ONLY = {"stats", "reload"}
CALLERS = {"own": ACME_KEY, "admin": ADMIN_KEY, "legacy_token": LEGACY_TOKEN, "other": ACME_KEY, "none": None,
           "wrong": "not-a-key", "wrong_scheme": None}


def expected(endpoint: str, caller: str) -> int:
    if caller in ("none", "wrong", "wrong_scheme"):
        return 401
    if endpoint in ADMIN_ONLY:
        return 403 if caller in ("own", "other") else 200
    return 404 if caller == "other" else 200


def not_found_body(endpoint: str, cid: str, owner: str) -> dict[str, str] | None:
    """What a request for a conversation (or user) that does not exist gets: the other tenant's must look the same."""
    if endpoint in ("list", "search_user", "delete_user", "history_user", "forget", "forget_user"):
        return {"detail": f"unknown user {owner!r}", "error": "not_found"}
    if endpoint in ("get", "search", "query", "append", "flush", "delete", "history"):
        return {"detail": f"unknown conversation {cid!r}", "error": "not_found"}
    return None


@pytest.mark.parametrize("endpoint", sorted(ENDPOINTS))
@pytest.mark.parametrize("caller", sorted(CALLERS))
def test_tenancy_matrix(built, embedder, tmp_path, endpoint, caller, caplog):
    import shutil

    root = Path(shutil.copytree(built, tmp_path / "store"))
    svc = service(root, embedder, tmp_path)
    cid, owner = OTHER if caller == "other" else OWN
    headers = auth(CALLERS[caller]) if caller != "wrong_scheme" else {"Authorization": f"Basic {ACME_KEY}"}
    before = {c: StoreReader(root).markers[c] for c in CONVERSATIONS}
    with caplog.at_level(logging.DEBUG), TestClient(create_app(svc)) as c:
        r = ENDPOINTS[endpoint](c, headers, cid, owner)
        want = expected(endpoint, caller)
        assert r.status_code == want, (endpoint, caller, r.status_code, r.text)
        if want == 401:
            assert r.json()["error"] == "unauthorized" and r.headers["www-authenticate"] == "Bearer"
        if want == 403:
            assert r.json() == {"detail": "this endpoint needs an admin key", "error": "forbidden"}
        if want == 404:  # another tenant's conversation looks exactly like a missing one
            assert r.json() == not_found_body(endpoint, cid, owner), r.json()
            ghost = ENDPOINTS[endpoint](c, headers, "no-such-conversation", "no-such-user")
            assert ghost.status_code == 404
            assert ghost.json() == not_found_body(endpoint, "no-such-conversation", "no-such-user")
        if want == 200 and endpoint == "list":
            assert {x["user_id"] for x in r.json()["conversations"]} == {owner}
        if want == 200 and endpoint.startswith("search"):
            res = r.json()
            assert {e["conversation_id"] for e in res["evidence"]} <= {"acme-1", "acme-2"}
        if want == 200 and endpoint.startswith("history"):
            assert {e["conversation_id"] for e in r.json()["entries"]} <= {"acme-1", "acme-2"}
        if want == 200 and endpoint.startswith("forget"):
            res = r.json()
            assert res["records_removed"] > 0 and res["user_id"] == owner
            assert set(res["conversation_ids"]) <= ({cid} if endpoint == "forget" else {"acme-1"})
        if want == 200 and endpoint == "stats":
            assert r.json()["auth"] == {"enabled": True, "keys": ["acme", "admin", "beta", "token"]}
    after = StoreReader(root).markers
    if want == 200 and endpoint.startswith("forget"):  # only the user's own conversation changed
        assert {k: after.get(k) for k in before if k != cid} == {k: v for k, v in before.items() if k != cid}
    if want != 200 or endpoint not in ("append", "flush", "delete", "delete_user", "forget", "forget_user"):
        # a refused request changed nothing: every conversation as it was
        assert {k: after.get(k) for k in before} == before, (endpoint, caller)
    svc.close()
    logged = caplog.text + "".join(str(r.args) for r in caplog.records)
    assert not any(s in logged or sha(s) in logged for s in ALL_SECRETS), "a key reached the log"


def test_tenant_lists_only_its_users_and_creates_only_for_them(built, embedder, tmp_path):
    import shutil

    root = Path(shutil.copytree(built, tmp_path / "store"))
    svc = service(root, embedder, tmp_path)
    a = auth(ACME_KEY)
    with TestClient(create_app(svc)) as c:
        page = c.get("/v1/conversations", headers=a).json()
        # "acme-not-a-prefix-match" does not start with "acme:": not acme's
        assert [x["conversation_id"] for x in page["conversations"]] == ["acme-1", "acme-2"] and page["total"] == 2
        assert c.get("/v1/conversations", headers=auth(ADMIN_KEY)).json()["total"] == 5  # with the seed
        assert [x["conversation_id"] for x in c.get("/v1/conversations", headers=auth(BETA_KEY)).json()["conversations"]] \
            == ["beta-1"]
        # creating: only for a user in scope; another tenant's id answers as a missing one would
        r = c.post("/v1/conversations/acme-new/turns", json={"user_id": "bob", "turns": [turn("t1")]}, headers=a)
        assert r.status_code == 404 and r.json()["detail"] == "conversation 'acme-new' not found for user 'bob'"
        r = c.post("/v1/conversations/acme-new/turns", json={"user_id": "acme:carol", "turns": [turn("t1")]}, headers=a)
        assert r.status_code == 200 and r.json()["created"]
        r = c.post("/v1/conversations/beta-1/turns", json={"user_id": "acme:carol", "turns": [turn("t2")]}, headers=a)
        assert r.status_code == 404  # exists, another tenant's: nothing appended
        assert StoreReader(root).markers["beta-1"].counts.turns == 8
        # a user-scoped search never reaches outside the user, even for the admin
        r = c.post("/v1/search", json={"user_id": "acme:alice", "question": Q}, headers=auth(ADMIN_KEY))
        assert {e["conversation_id"] for e in r.json()["evidence"]} == {"acme-1"}
    svc.close()


def test_delete_honours_user_id_for_every_key(built, embedder, tmp_path):
    """The report of issue 39: ``DELETE /v1/conversations/beta-1?user_id=alice`` erased bob's conversation."""
    import shutil

    root = Path(shutil.copytree(built, tmp_path / "store"))
    svc = service(root, embedder, tmp_path)
    with TestClient(create_app(svc)) as c:
        for key in (ADMIN_KEY, LEGACY_TOKEN, BETA_KEY):
            r = c.delete("/v1/conversations/beta-1", params={"user_id": "alice"}, headers=auth(key))
            assert r.status_code == 404 and r.json()["detail"] == "conversation 'beta-1' not found for user 'alice'"
            assert "beta-1" in StoreReader(root).markers
        r = c.delete("/v1/conversations/beta-1", params={"user_id": "bob"}, headers=auth(BETA_KEY))
        assert r.status_code == 200 and r.json()["conversation_ids"] == ["beta-1"]
        assert "beta-1" not in StoreReader(root).markers
        # a tenant erases its own users, never another's; the admin any
        assert c.delete("/v1/users/bob", headers=auth(ACME_KEY)).status_code == 404
        assert c.delete("/v1/users/acme:bob", headers=auth(ACME_KEY)).json()["conversation_ids"] == ["acme-2"]
        assert c.delete("/v1/users/acme-not-a-prefix-match", headers=auth(ADMIN_KEY)).status_code == 200
    svc.close()


def test_keys_come_hashed_from_files_and_plaintext_only_from_the_environment(tmp_path, capsys):
    bad = tmp_path / "bad.yaml"
    bad.write_text(json.dumps({"serve": {"keys": [{"name": "x", "key": "plain", "users": ["u"]}]}}))
    with pytest.raises(ConfigError, match="plaintext key does not belong in configuration"):
        load_config([bad], env={})
    for keys, msg in (([{"name": "x", "sha256": "abc", "users": ["u"]}], "64 hex digits"),
                      ([{"name": "x", "sha256": sha("k")}], "may touch nothing"),
                      ([{"name": "x", "sha256": sha("k"), "user_prefixes": [""]}], "empty user prefix"),
                      ([{"name": "x", "sha256": sha("k"), "admin": True}, {"name": "y", "sha256": sha("k"), "admin": True}],
                       "are the same key")):
        f = tmp_path / "k.yaml"
        f.write_text(json.dumps({"serve": {"keys": keys}}))
        with pytest.raises(ConfigError, match=msg):
            load_config([f], env={})
    with pytest.raises(ConfigError, match="LYCHEE_SERVE_KEYS is not JSON"):
        load_config(env={"LYCHEE_SERVE_KEYS": "[{"})
    env_key = "env-plain-key-123"
    cfg = load_config([keys_file(tmp_path)], env={"LYCHEE_SERVE_KEYS": json.dumps(
        [{"name": "e", "key": env_key, "admin": True}])})
    assert [k.name for k in cfg.serve.keys] == ["acme", "admin", "e"] and cfg.serve.keys[2].sha256 == sha(env_key)
    assert env_key not in cfg.model_dump_json() and env_key not in repr(cfg)
    shown = json.dumps(cfg.redacted())
    assert not any(s in shown or sha(s) in shown for s in (*ALL_SECRETS, env_key))
    no_keys = cfg.model_copy(update={"serve": cfg.serve.model_copy(update={"keys": [], "token": None})})
    assert cfg.fingerprint() == no_keys.fingerprint()  # keys never enter the fingerprint
    assert main(["config", "show", "--config", str(keys_file(tmp_path))]) == 0
    out = capsys.readouterr().out
    assert not any(s in out or sha(s) in out for s in ALL_SECRETS) and "acme" in out
