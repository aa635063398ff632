"""The inspector's JSON endpoints (no browser): the list and its filters, one conversation (tool calls,
the system prompt once, segments, every record column, record statuses and slot chains, a long turn's
passages, other tables by column), the playground's explanation (with evidence statuses and passage
positions) and reproducible request, the build report, eval runs, and the tenancy of ``/ui/api``."""

from __future__ import annotations

import json
import shlex

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from fastapi.testclient import TestClient

from lychee_ray.config import load_config
from lychee_ray.core.records import RECORD_SCHEMA
from tests.inspector_fixtures import TENANT_KEYS, sha
from tests.io.test_store_contract import toy_table  # noqa: F401 — a registered sixth table (fixture)

pytestmark = pytest.mark.heavy  # one service over the session's inspector store, its queries embedded

Q = "When did Caroline go to the LGBTQ support group?"


@pytest.fixture(scope="module")
def client(inspector_data, embedder):
    from lychee_ray.inspector.server import inspector_app
    from lychee_ray.inspector.evalruns import RunCatalog
    from lychee_ray.serve.service import MemoryService

    cfg = load_config(env={}, sets=["serve.reload_interval_s=0"])
    svc = MemoryService(inspector_data.store, cfg, embedder=embedder, llm="rules")
    with TestClient(inspector_app(svc, RunCatalog([str(inspector_data.eval_run)]), cfg)) as c:
        yield c
    svc.close()


def test_list_filters_by_user_kind_status_and_id(client, inspector_data):
    d = inspector_data
    page = client.get("/ui/api/conversations").json()
    ids = [r["conversation_id"] for r in page["rows"]]
    assert ids == sorted([d.locomo_id, *d.agent_ids, d.beam_id]) and page["total"] == 5 and page["next_offset"] is None
    # a page reads no table: the kinds come apart (read once per commit, then on the page too)
    kinds = client.get("/ui/api/kinds", params={"id": [*ids, "no-such-id"]}).json()
    assert kinds == {**{a: "agent" for a in d.agent_ids}, d.locomo_id: "dialogue", d.beam_id: "chat"}
    by_id = {r["conversation_id"]: r for r in client.get("/ui/api/conversations").json()["rows"]}
    assert {k: r["kind"] for k, r in by_id.items()} == kinds
    assert all(r["status"] == "built" and r["committed_at"] and r["turns"] > 0 for r in page["rows"])
    kind = client.get("/ui/api/conversations", params={"kind": "agent"}).json()
    assert [r["conversation_id"] for r in kind["rows"]] == sorted(d.agent_ids)
    user = client.get("/ui/api/conversations", params={"user": d.agent_users[0]}).json()
    assert [r["user_id"] for r in user["rows"]] == [d.agent_users[0]]
    assert client.get("/ui/api/conversations", params={"status": "failed"}).json()["total"] == 0
    assert client.get("/ui/api/conversations", params={"status": "degenerate"}).json()["total"] == 0
    assert [r["conversation_id"] for r in client.get("/ui/api/conversations", params={"q": "LOCOMO"}).json()["rows"]] == [d.locomo_id]
    two = client.get("/ui/api/conversations", params={"limit": 2, "offset": 2}).json()
    assert [r["conversation_id"] for r in two["rows"]] == ids[2:4] and two["next_offset"] == 4
    assert client.get("/ui/api/conversations", params={"limit": 501}).status_code == 422
    assert client.get("/ui/api/conversations", params={"status": "weird"}).status_code == 422


def test_an_agent_log_shows_tool_calls_as_calls_and_its_system_prompt_once(client, inspector_data):
    d = client.get(f"/ui/api/conversations/{inspector_data.agent_ids[0]}").json()
    turns = d["turns"]
    assert d["kind"] == "agent" and d["system_prompt"] is not None
    assert d["system_prompt"]["content"].startswith("# Airline Agent Policy")
    assert [t["turn_id"] for t in turns if t["role"] == "system"] == [d["system_prompt"]["turn_id"], *d["system_prompt"]["repeats"]]
    calls = [c for t in turns for c in t["tool_calls"]]
    results = [t for t in turns if t["role"] == "tool"]
    assert calls and results and {"call_id", "name", "arguments"} <= set(calls[0])
    assert {t["tool_call_id"] for t in results} <= {c["call_id"] for c in calls}
    assert all(t["tool_name"] for t in results)
    # every turn in exactly one segment, in order; each segment's cut reason and turns
    segs = d["segments"]
    assert sum(s["turns"] for s in segs) + d["counts"]["open_turns"] == len(turns) == d["counts"]["turns"]
    assert [s["first_turn"] for s in segs] == sorted(s["first_turn"] for s in segs)
    assert all(s["close_reason"] for s in segs)
    covered = [t["segment"] for t in turns if t["segment"] >= 0]
    assert covered == sorted(covered)
    # records carry every column of the records table, and their source turns are this conversation's
    assert set(RECORD_SCHEMA.names) <= set(d["record_columns"]) and d["records"]
    tids = {t["turn_id"] for t in turns}
    assert all(set(r["source_turn_ids"]) <= tids for r in d["records"])
    assert sum(s["turns"] for s in d["sessions"]) == len(turns)


def test_a_missing_conversation_is_404_and_a_bad_id_422(client):
    r = client.get("/ui/api/conversations/nope")
    assert r.status_code == 404 and r.json()["detail"] == "unknown conversation 'nope'"
    assert client.get("/ui/api/conversations/a%07b").status_code == 422


def test_record_statuses_and_slot_chains_are_the_query_paths(tmp_path, toy_table, embedder):
    """Statuses are derived from the links on the newer records, as a query derives them: one record
    superseded (when, by what, what holds now), two conflicting; the slot's chain in time order; a
    table the pages have no view of is shown by column."""
    from lychee_ray.inspector.conversation import conversation_detail
    from lychee_ray.io.store import StoreWriter
    from lychee_ray.query.engine import QueryEngine
    from tests.io.test_store_contract import toy_artifacts

    art = toy_artifacts("a", 3)
    slot = "user · city"
    links = [{"slot_value": "paris", "valid_from": "2024-01-01"},
             {"slot_value": "rome", "valid_from": "2024-02-01", "supersedes": ["a-r0"]},
             {"slot_value": "oslo", "valid_from": "2024-02-01", "conflicts_with": ["a-r1"]}]
    art.records = [r.model_copy(update={"slot": slot, **u}) for r, u in zip(art.records, links, strict=True)]
    w = StoreWriter(tmp_path)
    m = w.commit(art)
    engine = QueryEngine.open(tmp_path, load_config(env={}), embedder=embedder, llm="rules")
    try:
        d = conversation_detail(w.layout, m, engine)
        again = engine.history("a", slot=slot)
    finally:
        engine.close()
    cur = {k: v.model_dump() for k, v in d.currency.items()}
    assert cur["a-r0"] == {"status": "superseded", "superseded_by": ["a-r1"], "valid_until": "2024-02-01",
                           "conflicts_with": [], "latest": ["a-r1"]}
    assert cur["a-r1"]["status"] == cur["a-r2"]["status"] == "conflicting"
    assert cur["a-r1"]["conflicts_with"] == ["a-r2"] and cur["a-r2"]["conflicts_with"] == ["a-r1"]
    [chain] = d.slots
    assert chain.slot == slot and [(e.record_id, e.value, e.status) for e in chain.entries] == [
        ("a-r0", "paris", "superseded"), ("a-r1", "rome", "conflicting"), ("a-r2", "oslo", "conflicting")]
    assert chain.entries == again.entries  # what GET /v1/history answers for the slot
    assert {"slot", "supersedes", "conflicts_with"} <= set(d.record_columns)
    [toy] = [t for t in d.tables if t.name == "toy"]
    assert toy.columns == ["conversation_id", "toy_id", "value"] and len(toy.rows) == 3
    # without the engine (or without links) the page reads only the store's parts: every record current
    assert conversation_detail(w.layout, m).currency == {}


def test_a_beam_chat_shows_its_replaced_value_and_a_long_turns_passages(client, inspector_data):
    """The BEAM chat: the user's changed coverage figure supersedes the earlier one (the slot's chain
    is the one GET /v1/history answers, its statements shown with each record), and the long
    assistant answer carries its passages, placed in its content; a search hit of kind passage gives
    the same position."""
    from tests.inspector_fixtures import BEAM_CHANGE, BEAM_COVERAGE

    cid = inspector_data.beam_id
    d = client.get(f"/ui/api/conversations/{cid}").json()
    assert d["kind"] == "chat" and "passages" not in {t["name"] for t in d["tables"]}
    text = {r["record_id"]: r["text"] for r in d["records"]}
    [old] = [k for k, v in d["currency"].items() if v["status"] == "superseded"]
    new = d["currency"][old]["superseded_by"]
    assert "65%" in text[old] and len(new) == 1 and "78%" in text[new[0]]
    assert d["currency"][old]["valid_until"].startswith("2024-04-05") and d["currency"][old]["latest"] == new
    turn_of = {t["turn_id"]: t for t in d["turns"]}
    said = {t["content"]: t["turn_id"] for t in d["turns"]}
    assert [r["source_turn_ids"] for r in d["records"] if r["record_id"] == new[0]] == [[said[BEAM_CHANGE[0]]]]
    assert said[BEAM_COVERAGE[0]] in [r for r in d["records"] if r["record_id"] == old][0]["source_turn_ids"]
    [chain] = [c for c in d["slots"] if any(e["record_id"] == old for e in c["entries"])]
    assert [e["record_id"] for e in chain["entries"]] == [old, *new] and chain["entries"][1]["value"] == "78%"
    assert [e["status"] for e in chain["entries"]] == ["superseded", "current"]
    stated = [st for r in d["records"] if r["record_id"] == new[0] for st in r["statements"]]
    assert [(st["kind"], st["said"], st["slot"]) for st in stated] == [("percentage", "78%", chain["slot"])]
    hist = client.get("/v1/history", params={"conversation_id": cid, "slot": chain["slot"]}).json()
    assert hist["entries"] == chain["entries"]
    [long_turn] = [t for t in d["turns"] if t["passages"]]
    ps = long_turn["passages"]
    assert long_turn["role"] == "assistant" and len(ps) >= 2 and [p["index"] for p in ps] == list(range(1, len(ps) + 1))
    assert all(p["count"] == len(ps) and p["content_start"] == p["char_start"] and p["content_end"] == p["char_end"] for p in ps)
    assert ps[0]["char_start"] == 0 and ps[-1]["char_end"] == len(long_turn["content"])
    assert all(a["char_end"] <= b["char_start"] for a, b in zip(ps, ps[1:], strict=False))
    res = client.post("/ui/api/search", json={"conversation_id": cid, "question": "How do I log the soil moisture readings?",
                                               "budget_tokens": 2000}).json()["result"]
    hits = [e for e in res["evidence"] if e["kind"] == "passage"]
    assert hits and all(e["status"] in ("current", "superseded", "conflicting") for e in res["evidence"])
    by_id = {p["passage_id"]: p for p in ps}
    for e in hits:
        p = by_id[e["id"]]
        assert e["source_turn_ids"] == [long_turn["turn_id"]] and turn_of[long_turn["turn_id"]]
        assert e["passage"] == {k: p[k] for k in ("index", "count", "char_start", "char_end")}
    # a record's status in a search is the one the conversation page shows
    assert all(e["status"] == d["currency"].get(e["id"], {"status": "current"})["status"]
               for e in res["evidence"] if e["kind"] == "record")


def test_search_explains_itself_and_gives_the_same_request_as_json_and_curl(client, inspector_data):
    body = {"conversation_id": inspector_data.locomo_id, "question": Q, "budget_tokens": 120, "question_date": "2023-07-01"}
    page = client.post("/ui/api/search", json=body).json()
    res, ex = page["result"], page["result"]["explain"]
    assert res["evidence"] and res["usage"]["context_tokens"] <= 120
    assert [e["id"] for e in ex["evidence"]] == [e["id"] for e in res["evidence"]]
    assert ex["dropped"] and all(x["tokens"] > ex["remaining_tokens"] for x in ex["dropped"])
    assert all(len(p["text"]) <= load_config(env={}).inspect.preview_chars for p in ex["pool"])
    assert page["request"] == {**body, "question_date": "2023-07-01T00:00:00", "explain": True}
    argv = shlex.split(page["curl"])
    assert argv[:3] == ["curl", "-s", "http://testserver/v1/search"] and "Authorization" not in page["curl"]
    assert json.loads(argv[argv.index("-d") + 1]) == page["request"]
    # the request reproduces the evidence on the API itself
    again = client.post("/v1/search", json=page["request"]).json()
    assert [e["id"] for e in again["evidence"]] == [e["id"] for e in res["evidence"]] and again["explain"]["pool"]
    # a larger budget drops less
    wide = client.post("/ui/api/search", json={**body, "budget_tokens": 4000}).json()["result"]
    assert len(wide["explain"]["dropped"]) < len(ex["dropped"]) and len(wide["evidence"]) >= len(res["evidence"])


def test_build_report_counts_every_segment(client, inspector_data):
    rep = client.get("/ui/api/report").json()
    store = client.get("/ui/api/store").json()
    assert rep["conversations_read"] == rep["conversations_total"] == store["conversations"] == 5
    by = {p["label"]: p for p in rep["plots"]}
    segments = store["counts"]["segments"]
    assert sum(by["records per segment"]["counts"]) == sum(by["segment length (turns)"]["counts"]) == \
        sum(by["cut reasons"]["counts"]) == segments
    assert "session_boundary" in by["cut reasons"]["bins"] and rep["quality"]["records"] == store["counts"]["records"]


def test_eval_run_questions_with_hits_and_misses(client, inspector_data):
    [run] = client.get("/ui/api/runs").json()
    assert run["kind"] == "eval-retrieval" and run["systems"] == ["lychee"] and run["has_questions"]
    assert run["questions"] == inspector_data.questions
    page = client.get(f"/ui/api/runs/{run['name']}/questions", params={"limit": 500}).json()
    assert page["total"] == inspector_data.questions and page["budget_tokens"] == 150
    assert sum(page["counts"].values()) == page["total"] and page["counts"].get("miss", 0) >= 1
    for q in page["rows"]:
        assert q["gold_turns"] and set(q["covered"]) == set(q["gold_turns"]) & set(q["selected_turns"])
        want = "hit" if q["recall"] == 1 else "miss" if q["recall"] == 0 else "partial"
        assert q["outcome"] == want
    misses = client.get(f"/ui/api/runs/{run['name']}/questions", params={"result": "miss"}).json()
    assert misses["rows"] and {q["outcome"] for q in misses["rows"]} == {"miss"}
    cat = page["rows"][0]["category"]
    assert {q["category"] for q in client.get(f"/ui/api/runs/{run['name']}/questions", params={"category": cat}).json()["rows"]} == {cat}
    assert client.get("/ui/api/runs/nope/questions").status_code == 404


def test_eval_runs_that_cannot_be_read_are_refused_with_their_kind(tmp_path):
    from lychee_ray.cli.main import main
    from lychee_ray.inspector.evalruns import EvalRunError, load_run

    with pytest.raises(EvalRunError) as e:
        load_run(tmp_path / "missing")
    assert e.value.kind == "not_found"
    (tmp_path / "x.json").write_text("[1, 2]")
    with pytest.raises(EvalRunError) as e:
        load_run(tmp_path / "x.json")
    assert e.value.kind == "unknown"
    with pytest.raises(EvalRunError):
        load_run(tmp_path)  # a directory without results.json


def test_inspect_refuses_a_bad_store_or_run_in_one_line(tmp_path, inspector_data, capsys):
    from lychee_ray.cli.main import main

    assert main(["inspect", "--memory", str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"lychee-ray inspect: no memory store at {tmp_path / 'nowhere'}: the folder does not exist"]
    assert main(["inspect", "--memory", str(inspector_data.store), "--eval", str(tmp_path / "no-run")]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"lychee-ray inspect: eval run not found: {tmp_path / 'no-run'}"]


# ------------------------------------------------------------------------------------------------
# tenancy: /ui/api behind the service's guard
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def tenant_client(inspector_data, embedder, tmp_path_factory):
    from lychee_ray.inspector.routes import service_mounts
    from lychee_ray.serve.app import create_app
    from lychee_ray.serve.service import MemoryService

    keys = [{"name": "locomo-tenant", "sha256": sha(TENANT_KEYS["locomo-tenant"]), "users": [inspector_data.locomo_id]},
            {"name": "admin", "sha256": sha(TENANT_KEYS["admin"]), "admin": True}]
    conf = tmp_path_factory.mktemp("tenant_api") / "keys.json"
    conf.write_text(json.dumps({"serve": {"keys": keys, "reload_interval_s": 0},
                                "inspect": {"eval_runs": [str(inspector_data.eval_run)]}}))
    cfg = load_config([conf], env={})
    svc = MemoryService(inspector_data.store, cfg, embedder=embedder, llm="rules")
    with TestClient(create_app(svc, service_mounts(svc, cfg.inspect))) as c:
        yield c
    svc.close()


def auth(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TENANT_KEYS[name]}"}


def test_a_tenant_sees_only_its_users_through_the_ui_api(tenant_client, inspector_data):
    c, d = tenant_client, inspector_data
    other = d.agent_ids[0]
    # the pages and their assets hold no memory: open; the API needs a key
    assert c.get("/ui/").status_code == 200 and "text/html" in c.get("/ui/").headers["content-type"]
    assert c.get("/ui/static/app.js").status_code == 200 and c.get("/ui/static/nope.js").status_code == 404
    assert c.get("/ui/api/store").status_code == 401 and c.get("/ui/api/conversations").status_code == 401
    assert c.get("/ui/api/store", headers={"Authorization": "Bearer wrong"}).status_code == 401
    t = auth("locomo-tenant")
    store = c.get("/ui/api/store", headers=t).json()
    assert (store["conversations"], store["users"], store["admin"], store["eval_runs"], store["root"]) == (1, 1, False, [], "")
    assert store["quality"] is None and store["counts"] == {}  # store-wide figures are an admin's
    page = c.get("/ui/api/conversations", headers=t).json()
    assert [r["conversation_id"] for r in page["rows"]] == [d.locomo_id] and page["users"] == [d.locomo_id]
    assert c.get("/ui/api/conversations", params={"user": d.agent_users[0]}, headers=t).json()["total"] == 0
    assert c.get("/ui/api/kinds", params={"id": [d.locomo_id, *d.agent_ids]}, headers=t).json() == {d.locomo_id: "dialogue"}
    # another tenant's conversation answers exactly what a missing one does
    theirs = c.get(f"/ui/api/conversations/{other}", headers=t)
    missing = c.get("/ui/api/conversations/no-such-id", headers=t)
    assert theirs.status_code == missing.status_code == 404
    assert theirs.json()["detail"] == f"unknown conversation {other!r}"
    s = c.post("/ui/api/search", json={"conversation_id": other, "question": Q}, headers=t)
    assert s.status_code == 404 and other not in json.dumps(s.json()).replace(f"'{other}'", "")
    assert c.post("/ui/api/search", json={"user_id": d.agent_users[0], "question": Q}, headers=t).status_code == 404
    assert c.delete(f"/ui/api/conversations/{other}", params={"confirm": other}, headers=t).status_code == 404
    assert c.get("/ui/api/runs", headers=t).json() == []
    assert c.get("/ui/api/runs/eval-retrieval/questions", headers=t).status_code == 403
    rep = c.get("/ui/api/report", headers=t).json()
    assert rep["conversations_total"] == 1 and rep["quality"] is None
    own = c.post("/ui/api/search", json={"conversation_id": d.locomo_id, "question": Q}, headers=t).json()
    assert {e["conversation_id"] for e in own["result"]["evidence"]} == {d.locomo_id}
    assert '"Authorization: Bearer $LYCHEE_SERVE_TOKEN"' in own["curl"] and TENANT_KEYS["locomo-tenant"] not in own["curl"]
    # the admin sees everything, eval runs included
    a = auth("admin")
    assert c.get("/ui/api/conversations", headers=a).json()["total"] == 5
    assert [r["name"] for r in c.get("/ui/api/runs", headers=a).json()] == ["eval-retrieval"]


def test_erasing_needs_the_id_repeated(tmp_path, embedder):
    from lychee_ray.inspector.evalruns import RunCatalog
    from lychee_ray.inspector.server import inspector_app
    from lychee_ray.serve.service import MemoryService
    from tests.stores import conversation_spec, make_store

    root = make_store(tmp_path / "store", embedder, [conversation_spec("c-1", "u-1"), conversation_spec("c-2", "u-2")])
    cfg = load_config(env={}, sets=["serve.reload_interval_s=0"])
    svc = MemoryService(root, cfg, embedder=embedder, llm="rules")
    with TestClient(inspector_app(svc, RunCatalog([]), cfg)) as c:
        assert c.delete("/ui/api/conversations/c-1").status_code == 422
        assert c.delete("/ui/api/conversations/c-1", params={"confirm": "c-2"}).status_code == 422
        assert c.get("/ui/api/conversations/c-1").status_code == 200
        rep = c.delete("/ui/api/conversations/c-1", params={"confirm": "c-1"})
        assert rep.status_code == 200 and rep.json()["conversation_ids"] == ["c-1"]
        assert c.get("/ui/api/conversations/c-1").status_code == 404
        assert [r["conversation_id"] for r in c.get("/ui/api/conversations").json()["rows"]] == ["c-2"]
    svc.close()


@pytest.mark.subprocess
def test_inspect_prints_its_url_and_serves_without_ray(inspector_data):
    """`lychee-ray inspect` in its own process: one line with the URL on 127.0.0.1, the pages there,
    and Ray never imported."""
    import os
    import subprocess
    import sys
    import urllib.error
    import urllib.request

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    probe = ("import sys, urllib.request; from lychee_ray.cli.main import build_parser; "
             "from lychee_ray.config import load_config; from lychee_ray.inspector.server import InspectorServer; "
             f"s = InspectorServer({str(inspector_data.store)!r}, load_config(env={{}})); s.start(); "
             "ok = urllib.request.urlopen(s.url).status == 200; s.stop(); print(ok, 'ray' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=300)
    assert out.stdout.split() == ["True", "False"], out.stderr[-2000:]
    proc = subprocess.Popen([sys.executable, "-m", "lychee_ray.cli", "inspect", "--memory", str(inspector_data.store)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        url = line.split(" at ", 1)[1].split()[0]
        assert line.startswith(f"lychee-ray inspect: {inspector_data.store} at http://127.0.0.1:") and url.endswith("/ui/")
        assert urllib.request.urlopen(url).status == 200
        # another name for this address (DNS rebinding) is refused
        req = urllib.request.Request(url.replace("/ui/", "/ui/api/store"), headers={"Host": "evil.example"})
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(req)
        assert e.value.code == 400
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def test_a_lychee_ray_eval_run_directory_is_read(tmp_path):
    """A `lychee-ray eval` run (results.json, answers.parquet): per variant and question the answer,
    the gold answer, the selected turns and the evidence recall the run scored."""
    from lychee_ray.eval.setup.layout import RunLayout
    from lychee_ray.inspector.evalruns import load_run

    lay = RunLayout(tmp_path / "run")
    lay.root.mkdir()
    lay.results_path.write_text(json.dumps({"dataset": "locomo", "questions": 2, "budget_tokens": 2000, "variants": {
        "lychee": {"judge_accuracy": None, "evidence_recall": 0.5, "f1": 0.4, "per_category": {"2": {"evidence_recall": 0.5}}}}}))
    rows = [{"variant": "lychee", "question_id": f"q{i}", "conversation_id": "locomo-26", "category": "2", "question": f"Q{i}?",
             "gold": "7 May 2023", "answer": a, "evidence_turn_ids": turns, "evidence_recall": rec, "f1": 0.5, "judge_verdict": None}
            for i, (a, turns, rec) in enumerate([("7 May 2023", ["D1:3"], 1.0), ("I don't know", ["D2:1", "D2:2"], 0.0)])]
    pq.write_table(pa.Table.from_pylist(rows), lay.answers_table_path)
    run = load_run(lay.root)
    assert (run.info.kind, run.info.systems, run.info.questions, run.budget_tokens) == ("eval", ["lychee"], 2, 2000)
    assert run.info.summary["lychee"] == {"judge_accuracy": None, "evidence_recall": 0.5, "f1": 0.4,
                                          "per_category": {"2": {"evidence_recall": 0.5}}}
    page = run.page(system="lychee")
    assert [(q.outcome, q.selected_turns, q.answer, q.gold_answer) for q in page.rows] == [
        ("hit", ["D1:3"], "7 May 2023", "7 May 2023"), ("miss", ["D2:1", "D2:2"], "I don't know", "7 May 2023")]
    assert page.counts == {"hit": 1, "miss": 1} and page.rows[0].extra["f1"] == 0.5
    assert [q.question_id for q in run.page(result="miss").rows] == ["q1"]
