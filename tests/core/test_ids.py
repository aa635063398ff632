"""The one id policy (issue 39 item 3; ``lychee_ray/core/ids.py``): the same rule rejects a bad id
on HTTP and the CLI and repairs it (with a warning) in bulk input; ids with ``/`` are addressable
over HTTP; the CLI escapes ids an older version stored unchecked."""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
from fastapi.testclient import TestClient

from lychee_ray.cli.main import main
from lychee_ray.config import load_config
from lychee_ray.core.ids import MAX_ID_CHARS, InvalidId, check_id, id_problem, printable, repair_id
from lychee_ray.io.adapters import read_input, read_objects
from lychee_ray.io.store import StoreReader, StoreWriter
from lychee_ray.serve import MemoryClient, MemoryService, create_app
from tests.stores import conversation_spec, make_store
from tests.io.test_store import artifacts

pytestmark = pytest.mark.reliability  # listed in docs/reliability.md (issue 39)

TOKEN = "ids-token"
AUTH = {"Authorization": f"Bearer {TOKEN}"}
BAD_IDS = {
    "nul": "a\x00b",
    "ansi": "red\x1b[31mX",
    "rtl_override": "abc\u202egpj.exe",
    "bidi_isolate": "a\u2066b",
    "zero_width": "ad\u200bmin",
    "newline": "a\nb",
    "tab": "a\tb",
    "line_separator": "a\u2028b",
    "bom": "\ufeffabc",
    "lone_surrogate": "a\ud800b",
    "padded": " abc ",
    "empty": "",
    "10k": "x" * 10_000,
}


@pytest.mark.parametrize("name", sorted(BAD_IDS))
def test_the_rule_rejects_and_the_repair_yields_an_id_the_rule_accepts(name):
    bad = BAD_IDS[name]
    assert id_problem(bad) is not None
    with pytest.raises(InvalidId) as e:
        check_id(bad, "conversation_id")
    assert e.value.kind == "invalid_id" and e.value.field == "conversation_id"
    try:
        fixed, change = repair_id(bad)
    except InvalidId:  # nothing usable left, or too long to cut safely: rejected in bulk input too
        assert name in ("empty", "10k")
        return
    assert check_id(fixed) == fixed and change is not None
    assert "\x1b" not in change and "\u202e" not in change  # the warning itself is safe to print


def test_allowed_ids_pass_unchanged():
    for ok in ("locomo-26", "team/a b", "../../escape/../dup-path id", "Ünïcødé 会话 🦊", "x" * MAX_ID_CHARS, "a:b@c#d"):
        assert check_id(ok) == ok and repair_id(ok) == (ok, None) and printable(ok) == ok
    assert id_problem("x" * (MAX_ID_CHARS + 1)) is not None
    assert printable("red\x1b[31mX\u202e") == "red\\x1b[31mX\\u202e"


@pytest.fixture
def svc(tmp_path, embedder):
    root = make_store(tmp_path / "store", embedder, [conversation_spec("c-1", "u-1")])
    cfg = load_config(env={}, sets=["serve.reload_interval_s=0", f"serve.token={TOKEN}", "appends.encode=inline",
                                    "appends.idle_flush_s=0"])
    s = MemoryService(root, cfg, embedder=embedder, llm="rules")
    yield s
    s.close()


def turn(tid: str = "t1", **kw) -> dict:
    return {"turn_id": tid, "role": "user", "speaker": "Ann", "content": "I adopted a grey cat named Pixel.", **kw}


@pytest.mark.parametrize("name", ["nul", "ansi", "rtl_override", "zero_width", "newline", "padded", "10k"])
def test_http_rejects_bad_ids_with_a_clear_422_and_creates_nothing(svc, name):
    bad = BAD_IDS[name]
    path = quote(bad, safe="")
    with TestClient(create_app(svc)) as c:
        calls = [
            ("post", f"/v1/conversations/{path}/turns", {"user_id": "u-9", "turns": [turn()]}, ["path", "conversation_id"]),
            ("post", f"/v1/conversations/{path}/flush", {}, ["path", "conversation_id"]),
            ("get", f"/v1/conversations/{path}", None, ["path", "conversation_id"]),
            ("delete", f"/v1/conversations/{path}", None, ["path", "conversation_id"]),
            ("delete", f"/v1/users/{path}", None, ["path", "user_id"]),
            ("post", "/v1/search", {"conversation_id": bad, "question": "cat?"}, ["body", "conversation_id"]),
            ("post", "/v1/query", {"user_id": bad, "question": "cat?"}, ["body", "user_id"]),
            ("post", "/v1/conversations/new-1/turns", {"user_id": bad, "turns": [turn()]}, ["body", "user_id"]),
            ("post", "/v1/conversations/new-1/turns", {"user_id": "u-9", "turns": [turn(bad)]}, ["body", "turns", 0, "turn_id"]),
            ("get", f"/v1/conversations?user_id={path}", None, ["query", "user_id"]),
        ]
        for method, url, body, loc in calls:
            r = c.request(method, url, json=body, headers=AUTH)
            assert r.status_code == 422, (name, method, url, r.status_code, r.text[:300])
            detail = r.json()["detail"]
            assert any(d["loc"] == loc for d in detail), (name, url, detail)
            if name != "10k":  # (pydantic's own length message for that one)
                assert any("character" in d["msg"] or "whitespace" in d["msg"] for d in detail), detail
    assert set(StoreReader(svc.root).markers) == {"c-1"}  # nothing created


def test_ids_with_a_slash_are_addressed_as_they_are_or_encoded(svc):
    cid = "team/a b"
    with TestClient(create_app(svc)) as c:
        r = c.post(f"/v1/conversations/{quote(cid, safe='')}/turns", json={"user_id": "u/9", "turns": [turn()]},
                   headers=AUTH)
        assert r.status_code == 200 and r.json()["created"] and r.json()["conversation_id"] == cid, r.text
        for url in (f"/v1/conversations/{quote(cid, safe='')}", "/v1/conversations/team/a b",
                    f"/v1/conversations/{quote(cid, safe='/')}"):
            g = c.get(url, headers=AUTH)
            assert g.status_code == 200 and g.json()["conversation_id"] == cid and g.json()["user_id"] == "u/9", url
        r = c.post("/v1/conversations/team/a b/turns", json={"turns": [turn("t2", content="Pixel likes tuna.")]},
                   headers=AUTH)
        assert r.status_code == 200 and r.json()["stored_turn_ids"] == ["t2"], r.text
        assert c.post("/v1/conversations/team/a b/flush", json={}, headers=AUTH).status_code == 200
        s = c.post("/v1/search", json={"conversation_id": cid, "question": "What is the cat's name?"}, headers=AUTH)
        assert s.status_code == 200 and s.json()["conversation_ids"] == [cid]
        users = c.get("/v1/conversations", params={"user_id": "u/9"}, headers=AUTH).json()
        assert [x["conversation_id"] for x in users["conversations"]] == [cid]
        # an id ending like a sub-route is still one id
        assert c.get("/v1/conversations/team/a b/turns", headers=AUTH).status_code == 404
        rep = MemoryClient("http://testserver", TOKEN, http=c).delete_conversation(cid)
        assert rep.conversation_ids == [cid]
    assert set(StoreReader(svc.root).markers) == {"c-1"}


def test_bulk_input_repairs_with_the_same_rule_and_rejects_what_it_cannot_repair(tmp_path):
    rows = [
        {"conversation_id": "c\x1b[31m-1\u202e ", "user_id": "u\u200b-1", "sessions": [
            {"session_id": "s\t1", "turns": [{"turn_id": "t\u20281", "content": "hello"}]}]},
        {"conversation_id": "x" * (MAX_ID_CHARS + 1), "sessions": [{"session_id": "s1", "turns": [{"content": "hi"}]}]},
        {"conversation_id": "\u200b\u200b", "sessions": [{"session_id": "s1", "turns": [{"content": "hi"}]}]},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    items = list(read_input("jsonl", src))
    good = items[0].conversation
    assert good is not None and (good.conversation_id, good.user_id) == ("c-1", "u-1")
    assert good.sessions[0].session_id == "s1" and good.sessions[0].turns[0].turn_id == "t1"
    assert all(check_id(x) for x in (good.conversation_id, good.user_id, "s1", "t1"))
    warned = " ".join(i.message for i in items[0].issues if i.level == "warning")
    assert "id repaired" in warned and "\\u200b" in warned
    for item, needle in ((items[1], f"at most {MAX_ID_CHARS}"), (items[2], "is empty")):
        assert item.conversation is None
        err = [i for i in item.issues if i.level == "error"]
        assert err and err[0].field == "conversation_id" and needle in err[0].message and err[0].line == item.line
    # the Python API's inputs go through the same cleaning
    [py] = list(read_objects([rows[0]]))
    assert py.conversation is not None and py.conversation.conversation_id == "c-1"


def test_cli_refuses_bad_ids_and_escapes_ids_an_older_version_stored(tmp_path, capsys):
    legacy = "evil\x1b[2J\u202eid"  # stored unchecked by an older version
    StoreWriter(tmp_path).commit(artifacts(legacy))
    StoreWriter(tmp_path).write_errors([{"conversation_id": legacy, "stage": "warning", "message": "x\x1b[0m"}])
    assert main(["list", "--memory", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out and "evil\\x1b[2J\\u202eid" in out
    assert main(["errors", "--memory", str(tmp_path), "--warnings"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "x\\x1b[0m" in out
    with pytest.raises(SystemExit) as e:
        main(["query", "--memory", str(tmp_path), "--conversation", "a\x1b[31m", "q"])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "U+001B" in err and "\x1b" not in err
    assert main(["delete", "--memory", str(tmp_path), "--conversation", "other\x1b", "--yes"]) == 2
    assert "U+001B" in capsys.readouterr().err
    # the stored legacy id can still be erased by its exact id
    assert main(["delete", "--memory", str(tmp_path), "--conversation", legacy, "--yes"]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and not StoreReader(tmp_path).markers
