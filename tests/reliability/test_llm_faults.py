"""LLM faults through the OpenAI-compatible test server, in front of the build, the query path and the judge.

Every fault kind is injected on every path, transient (the first reply broken, then healthy) and
persistent (every reply broken). The defined outcomes:

- build: transient → retried and succeeded (the store equals a clean run's, but for the attempt
  count of the one retried segment); persistent → every segment recorded as failed with its error
  kind, no conversation lost, the raw turns stored and found by search's turn channel; then
  ``--retry-failed`` against a healthy server → the store equals a clean run's, table by table.
- query (library): planner fault → the question-route fallback plan with the reason, still answered;
  answer fault → no answer and ``answer_error`` naming the kind, evidence still returned.
- serve (in-process app): LLM down → ``/v1/query`` 503 (unreachable/overloaded, with Retry-After) or
  502 (unusable reply) saying ``/v1/search`` still works — and it does (200, evidence).
- judge: a fault → a null verdict with the error (never a silent WRONG); the resume rule redoes it
  and a re-run against a healthy server judges it.

A reply in the wrong language is an invalid reply for the encoder only (``encoder.wrong_script_share``);
on the query path it is passed through (plan and answer are not language-checked: a short answer may
legitimately be a name in another script), and the judge's lenient label parser turns a label it
cannot read into a null verdict. ``finish_reason=length`` is an invalid (truncated) reply everywhere,
even when the cut-off content happens to parse.

Embeddings are deterministic hash vectors (no model load) so the whole module stays fast; LLM timeouts
and backoff are shrunk through config overrides.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
from fastapi.testclient import TestClient

from lychee_ray.config import LycheeConfig, load_config
from lychee_ray.ingest.encode.base import EncodeOutput, EncodeRequest, RecordDraft, SegmentTurn, wrong_script_problem
from lychee_ray.eval.runners.answerer import QuestionAnswerer
from lychee_ray.eval.runners.judge import LLMJudge, judge_config
from lychee_ray.eval.runners.resume import done_ok, load_answers, write_part
from lychee_ray.llm.backend import make_llm_client
from lychee_ray.llm.errors import INVALID_REPLY_KINDS
from lychee_ray.memory import MemoryStore
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build
from lychee_ray.serve import MemoryService, create_app
from lychee_ray.io.store import StoreReader
from lychee_ray.testing.fake_llm import encoder_reply, is_answer_request, is_encode_request, is_judge_request, is_plan_request, plan_reply
from lychee_ray.testing import (
    Action,
    OpenAIServer,
    Reply,
    delay,
    empty,
    malformed_body,
    malformed_content,
    ok,
    pseudo_embedding,
    reset,
    schema_violation,
    status,
    truncated,
    wrong_language,
)
from lychee_ray.testing.synthetic import synthetic_conversation
from lychee_ray.io.verify import verify_conversation
from tests.stores import conversation_spec, make_store

pytestmark = [pytest.mark.reliability, pytest.mark.heavy]

MAX_ATTEMPTS = 2
RETRY_AFTER_S = 0.2  # the scripted 429's Retry-After
FAST_TIMEOUT_S = 0.75  # llm.timeout_s in the timeout scenarios
HANG_S = 2.5  # how long a "reply that never comes" waits (> FAST_TIMEOUT_S)


# ------------------------------------------------------------------------------------------------
# fault catalogue
# ------------------------------------------------------------------------------------------------

# name -> (action from the healthy reply and the path's free-text keys, LLM error kind it must produce)
FaultFactory = Callable[[dict[str, Any], tuple[str, ...]], Action]


def _cut(reply: dict[str, Any]) -> Reply:
    text = json.dumps(reply)
    return truncated(text[: max(1, len(text) // 2)])


FAULTS: dict[str, tuple[FaultFactory, str]] = {
    "429_retry_after": (lambda r, k: status(429, retry_after=RETRY_AFTER_S), "rate_limited"),
    "429_no_retry_after": (lambda r, k: status(429), "rate_limited"),
    "500": (lambda r, k: status(500), "server_error"),
    "502": (lambda r, k: status(502), "server_error"),
    "503": (lambda r, k: status(503), "server_error"),
    "reset": (lambda r, k: reset(), "connection"),
    "timeout": (lambda r, k: delay(HANG_S, ok(r)), "timeout"),
    "empty": (lambda r, k: empty(), "empty_reply"),
    "malformed_body": (lambda r, k: malformed_body(), "invalid_response"),
    "malformed_json": (lambda r, k: malformed_content(), "invalid_json"),
    "schema_violation": (lambda r, k: schema_violation(), "schema_violation"),
    "length": (lambda r, k: _cut(r), "truncated"),
    "length_complete_json": (lambda r, k: ok(r, finish_reason="length"), "truncated"),
    "wrong_language": (lambda r, k: wrong_language(r, keys=k), "wrong_language"),
}
KINDS = list(FAULTS)
UNAVAILABLE = {"rate_limited", "server_error", "connection", "timeout"}  # -> 503; other kinds -> 502

# free-text fields a wrong-language reply rewrites, per call (keys stay, so the JSON fits its schema)
ENCODE_TEXT = ("text",)
PLAN_TEXT = ("search_texts",)
ANSWER_TEXT = ("answer",)
JUDGE_TEXT = ("verdict", "reason")


class FaultInjector:
    """Server handler: the healthy reply, except for matching requests, which get the fault
    (the first ``times`` of them; every one when ``times`` is None)."""

    def __init__(self, healthy: Callable[[dict[str, Any]], dict[str, Any]], fault: str | None = None, *,
                 match: Callable[[dict[str, Any]], bool] = lambda b: True, text_keys: tuple[str, ...] = (),
                 times: int | None = None) -> None:
        self.healthy, self.fault, self.match, self.text_keys, self.times = healthy, fault, match, text_keys, times
        self.hits = 0
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Action | dict[str, Any]:
        reply = self.healthy(body)
        if self.fault is None or not self.match(body):
            return reply
        with self._lock:
            if self.times is not None and self.hits >= self.times:
                return reply
            self.hits += 1
        return FAULTS[self.fault][0](reply, self.text_keys)


# A cut encode reply is by default tried once and its complete records salvaged (test_truncated_replies.py);
# here the length faults run the retry path like every other invalid reply: tried every attempt, then failed.
LENGTH_FAULTS = ("length", "length_complete_json")


def llm_sets(url: str, fault: str | None = None, *, max_attempts: int = MAX_ATTEMPTS) -> list[str]:
    """Small timeouts/backoff so faults cost milliseconds; the short timeout only where it is the fault."""
    timeout = FAST_TIMEOUT_S if fault == "timeout" else 30.0
    cut = ["encoder.truncated_reply=fail", f"encoder.truncated_attempts={max_attempts}"] if fault in LENGTH_FAULTS else []
    return [f"llm.base_url={url}", "llm.api_key=test", f"llm.max_attempts={max_attempts}", f"llm.timeout_s={timeout}",
            "llm.backoff_initial_s=0.01", "llm.backoff_max_s=0.02", "llm.retry_after_max_s=2",
            "llm.rate_limit.default_429_pause_s=0.05", *cut]


class HashEmbedder:
    """Deterministic hash vectors (the test server's): no model load, identical text = identical vector."""

    name = "hash-64"
    dim = 64

    def encode(self, texts: Any) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([pseudo_embedding(str(t), self.dim) for t in texts])


EMB = HashEmbedder()


# ------------------------------------------------------------------------------------------------
# store comparison
# ------------------------------------------------------------------------------------------------


def _index_dump(index: Any) -> tuple[list[int], list[list[float]]]:
    import faiss

    ids = faiss.vector_to_array(index.id_map).tolist() if index.ntotal else []
    vecs = index.index.reconstruct_n(0, index.ntotal).tolist() if index.ntotal else []
    return ids, vecs


def store_tables(root: Path) -> dict[str, dict[str, Any]]:
    """Everything a conversation's memory consists of, per conversation and table, in a stable order:
    records, nodes, segments, turns (all columns), the three FAISS indexes (ids and vectors), the id
    maps, and the commit marker's counts and fingerprint. Usage and timings are left out (a faulty run
    legitimately spent more tokens and time)."""
    r = StoreReader(root)
    out: dict[str, dict[str, Any]] = {}
    for cid in r.conversation_ids():
        d = r.load(cid)
        m = r.markers[cid]
        out[cid] = {
            "records": sorted(d.records.to_pylist(), key=lambda x: x["record_id"]),
            "nodes": sorted(d.nodes.to_pylist(), key=lambda x: x["node_id"]),
            "segments": sorted(d.segments.to_pylist(), key=lambda x: x["index"]),
            "turns": d.turns.to_pylist(),
            "record_index": _index_dump(d.record_index),
            "node_index": _index_dump(d.node_index),
            "turn_index": _index_dump(d.turn_index),
            "ids": d.ids,
            "marker": {"counts": m.counts.as_dict(), "fingerprint": m.fingerprint, "user_id": m.user_id},
        }
    return out


def assert_same_store(got: Path | dict, want: Path | dict) -> None:
    """Two stores hold the same conversations with identical tables (first difference reported)."""
    a = got if isinstance(got, dict) else store_tables(got)
    b = want if isinstance(want, dict) else store_tables(want)
    assert sorted(a) == sorted(b), f"conversations differ: {sorted(a)} != {sorted(b)}"
    for cid in b:
        for table in b[cid]:
            assert a[cid][table] == b[cid][table], f"{cid}: table {table!r} differs"


# ------------------------------------------------------------------------------------------------
# build
# ------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def build_input(tmp_path_factory) -> Path:
    """Two tiny conversations (12 turns, 5 segments with hash embeddings)."""
    path = tmp_path_factory.mktemp("llm_faults_in") / "in.jsonl"
    convs = [synthetic_conversation(i, seed=3, sessions=1, topics_per_session=1, exchanges_per_topic=(2, 3)) for i in range(2)]
    path.write_text("\n".join(c.model_dump_json() for c in convs) + "\n")
    return path


def _build(url: str, src: Path, out: Path, fault: str | None = None, *, retry_failed: bool = False):
    cfg = load_config(sets=[*llm_sets(url, fault), "build.conversations_in_flight=2"], env={})
    return run_local_build(cfg, "jsonl", src, out, backend="openai", retry_failed=retry_failed,
                           ctx=make_context(cfg, "openai", EMB))


@pytest.fixture(scope="module")
def clean_store(build_input, tmp_path_factory) -> tuple[Path, dict[str, Any], int]:
    """The reference: a build against a healthy server (store, its tables, encode calls made)."""
    out = tmp_path_factory.mktemp("llm_faults_clean") / "store"
    with OpenAIServer(handler=encoder_reply) as srv:
        s = _build(srv.base_url, build_input, out)
        calls = len(srv.chat_requests())
    assert (s.built, s.failed, s.failed_segments) == (2, 0, 0) and s.records > 0
    return out, store_tables(out), calls


@pytest.mark.parametrize("fault", KINDS)
def test_build_transient_fault_is_retried_and_store_equals_clean(fault, build_input, clean_store, tmp_path):
    clean_root, clean, clean_calls = clean_store
    handler = FaultInjector(encoder_reply, fault, match=is_encode_request, text_keys=ENCODE_TEXT, times=1)
    with OpenAIServer(handler=handler) as srv:
        s = _build(srv.base_url, build_input, tmp_path / "st", fault)
        reqs = srv.chat_requests()
    assert (s.inputs, s.built, s.failed, s.failed_segments) == (2, 2, 0, 0), s.to_dict()
    assert handler.hits == 1 and len(reqs) == clean_calls + 1  # exactly one extra (retried) call
    if fault == "429_retry_after":  # the retry waited for the server's Retry-After
        first = next(r for r in reqs if r.status == 429)
        retry = next(r for r in reqs if r.t_mono > first.t_mono and r.body == first.body)
        assert retry.t_mono - first.t_mono >= RETRY_AFTER_S * 0.9
    got = store_tables(tmp_path / "st")
    retried = [(cid, seg["index"]) for cid, t in got.items() for seg in t["segments"] if seg["attempts"] == 2]
    assert len(retried) == 1, retried  # the one faulted call was retried in the same segment
    cid, idx = retried[0]
    got[cid]["segments"][idx]["attempts"] = 1
    assert_same_store(got, clean)


@pytest.mark.parametrize("fault", KINDS)
def test_build_persistent_fault_fails_segments_keeps_turns_then_retry_failed_equals_clean(
        fault, build_input, clean_store, tmp_path):
    clean_root, clean, clean_calls = clean_store
    kind = FAULTS[fault][1]
    out = tmp_path / "st"
    with OpenAIServer(handler=FaultInjector(encoder_reply, fault, match=is_encode_request, text_keys=ENCODE_TEXT)) as srv:
        s = _build(srv.base_url, build_input, out, fault)
        seen = len(srv.chat_requests())
        if fault == "timeout":
            # a starved machine can time an attempt out (0.75 s read timeout) before the server thread
            # records it: the server's log may undercount; the segments' own attempt counts below are exact
            assert clean_calls <= seen <= clean_calls * MAX_ATTEMPTS, seen
        else:
            assert seen == clean_calls * MAX_ATTEMPTS  # every segment tried max_attempts times
    n_segments = sum(len(t["segments"]) for t in clean.values())
    # no conversation lost: both committed, every segment recorded as failed with its error kind
    assert (s.inputs, s.built, s.failed, s.failed_segments, s.records) == (2, 2, 0, n_segments, 0), s.to_dict()
    r = StoreReader(out)
    assert r.conversation_ids() == sorted(clean)
    store = MemoryStore.open(out, load_config(env={}), embedder=EMB, llm="rules")
    try:
        for cid in r.conversation_ids():
            d = r.load(cid)
            segs = d.segments.to_pylist()
            assert all(x["status"] == "failed" and f"[{kind}]" in x["error"] and x["attempts"] == MAX_ATTEMPTS
                       for x in segs), segs
            # the raw turns are all stored and indexed, the segment rows still say which turns they hold
            assert d.turns.to_pylist() == clean[cid]["turns"] and d.turn_index.ntotal == d.turns.num_rows
            assert [x["turn_ids"] for x in segs] == [x["turn_ids"] for x in clean[cid]["segments"]]
            assert verify_conversation(r, cid) == []
            # ... and searchable: a turn's own words find it through the turn channel
            turn = d.turns.to_pylist()[-1]
            res = store.search(cid, turn["content"], "2024-01-01")
            hit = [e for e in res.evidence if turn["turn_id"] in e.source_turn_ids]
            assert hit and "turns" in hit[0].channels, [(e.id, e.channels) for e in res.evidence]
    finally:
        store.close()
    # the endpoint recovers: --retry-failed re-encodes exactly the failed segments; the store equals a clean run's
    with OpenAIServer(handler=encoder_reply) as srv:
        again = _build(srv.base_url, build_input, out, retry_failed=True)
        assert len(srv.chat_requests()) == clean_calls
    assert (again.built, again.skipped, again.failed, again.failed_segments) == (2, 0, 0, 0), again.to_dict()
    assert_same_store(out, clean)


def _req(texts: list[str]) -> EncodeRequest:
    turns = [SegmentTurn(index=i, turn_id=f"t{i}", session_id="s", session_date=None, speaker="A", role="user", content=t)
             for i, t in enumerate(texts)]
    return EncodeRequest(conversation_id="c", user_id="u", segment_id="c#0", segment_index=0, turns=turns)


def _out(*texts: str) -> EncodeOutput:
    return EncodeOutput(records=[RecordDraft(type="fact", text=t) for t in texts])


def test_wrong_script_check_rules():
    en = _req(["I adopted a puppy named Max from the shelter.", "Max loves chasing squirrels."])
    zh = _req(["我昨天从收容所领养了一只叫小白的小狗。", "小白喜欢在公园里追松鼠。"])
    assert wrong_script_problem(_out("Anna adopted a puppy named Max."), en, 0.8) is None
    assert "CJK" in wrong_script_problem(_out("Anna adopted Max.", "安娜从收容所领养了一只小狗。"), en, 0.8)
    assert "CYRILLIC" in wrong_script_problem(_out("Анна взяла щенка из приюта."), en, 0.8)
    assert wrong_script_problem(_out("用户领养了一只叫小白的小狗。"), zh, 0.8) is None
    assert "LATIN" in wrong_script_problem(_out("The user adopted a puppy called Xiaobai."), zh, 0.8)
    assert wrong_script_problem(_out("Anna ate 寿司 at Sushi Zen in Kyoto."), en, 0.8) is None  # mostly Latin
    assert wrong_script_problem(_out("寿司店。"), en, 0.8) is None  # too few letters to judge
    mixed = _req(["I adopted a puppy.", "我昨天从收容所领养了一只叫小白的小狗，它很可爱"])
    assert wrong_script_problem(_out("安娜从收容所领养了一只小狗。"), mixed, 0.8) is None  # mixed source: not judged
    assert wrong_script_problem(_out("安娜从收容所领养了一只小狗。"), en, 0.0) is None  # 0 = off
    assert LycheeConfig().encoder.wrong_script_share == 0.8


# ------------------------------------------------------------------------------------------------
# query path: library and in-process service
# ------------------------------------------------------------------------------------------------

Q = "When did Caroline go to the LGBTQ support group?"
ANSWER = "7 May 2023"


def query_reply(body: dict[str, Any]) -> dict[str, Any]:
    return plan_reply(body) if is_plan_request(body) else {"answer": ANSWER}


@pytest.fixture(scope="module")
def query_store(tmp_path_factory) -> Path:
    return make_store(tmp_path_factory.mktemp("llm_faults_query"), EMB, [conversation_spec("c-1", "u-1")])


def _query(store_dir: Path, handler: FaultInjector, fault: str):
    with OpenAIServer(handler=handler) as srv:
        cfg = load_config(sets=llm_sets(srv.base_url, fault), env={})
        client = make_llm_client(cfg)
        try:
            with MemoryStore.open(store_dir, cfg, embedder=EMB, llm="openai", llm_client=client) as store:
                return store.query("c-1", Q, "2023-08-01", question_id="q1")
        finally:
            client.close()


@pytest.mark.parametrize("fault", KINDS)
def test_query_planner_fault_falls_back_to_question_route(fault, query_store):
    kind = FAULTS[fault][1]
    handler = FaultInjector(query_reply, fault, match=is_plan_request, text_keys=PLAN_TEXT)
    res = _query(query_store, handler, fault)
    assert res.answer == ANSWER and res.answer_error is None and res.evidence
    if kind == "wrong_language":  # not language-checked on the query path: the plan is used as given
        assert not res.plan.fallback and res.plan.backend == "openai"
        return
    # transport faults get every attempt; an unusable plan reply gets query.planner.max_invalid_attempts (1)
    assert handler.hits == (1 if kind in INVALID_REPLY_KINDS else MAX_ATTEMPTS)
    p = res.plan
    assert p.fallback and p.fallback_kind == kind and p.fallback_reason.startswith(f"llm call failed: {kind}")
    assert [r.search_texts for r in p.routes] == [[Q]] and p.routes[0].origin == "fallback"


@pytest.mark.parametrize("fault", KINDS)
def test_query_answer_fault_reports_answer_error(fault, query_store):
    kind = FAULTS[fault][1]
    handler = FaultInjector(query_reply, fault, match=is_answer_request, text_keys=ANSWER_TEXT)
    res = _query(query_store, handler, fault)
    assert not res.plan.fallback and res.evidence and any("support group" in e.text for e in res.evidence)
    if kind == "wrong_language":  # passed through (a short answer may legitimately be in another script)
        assert res.answer_error is None and res.answer and res.answer != ANSWER
        return
    assert handler.hits == MAX_ATTEMPTS
    assert res.answer == "" and res.answer_error_kind == kind and "stage=answer" in res.answer_error


@pytest.mark.parametrize("fault", [k for k in KINDS if k != "wrong_language"])
def test_query_transient_faults_are_retried(fault, query_store):
    plan_fault = FaultInjector(query_reply, fault, match=is_plan_request, text_keys=PLAN_TEXT, times=1)
    both = FaultInjector(plan_fault, fault, match=is_answer_request, text_keys=ANSWER_TEXT, times=1)
    res = _query(query_store, both, fault)
    assert plan_fault.hits == 1 and both.hits == 1  # the first plan and the first answer attempt both failed
    assert res.answer == ANSWER and res.answer_error is None  # the answer call is retried for every kind
    assert res.usage.llm_calls == 2
    if FAULTS[fault][1] in INVALID_REPLY_KINDS:  # an unusable plan reply is not retried (max_invalid_attempts 1)
        assert res.plan.fallback and res.plan.fallback_kind == FAULTS[fault][1]
    else:  # transport faults are
        assert not res.plan.fallback


@pytest.mark.parametrize("fault", KINDS)
def test_serve_llm_fault_query_503_or_502_while_search_works(fault, query_store):
    kind = FAULTS[fault][1]
    handler = FaultInjector(query_reply, fault, text_keys=PLAN_TEXT + ANSWER_TEXT)  # the whole LLM is broken
    with OpenAIServer(handler=handler) as srv:
        cfg = load_config(sets=[*llm_sets(srv.base_url, fault), "llm.backend=openai", "serve.reload_interval_s=0"],
                          env={})
        svc = MemoryService(query_store, cfg, embedder=EMB)
        try:
            with TestClient(create_app(svc)) as c:
                body = {"conversation_id": "c-1", "question": Q, "question_date": "2023-08-01"}
                r = c.post("/v1/query", json=body)
                if kind == "wrong_language":
                    assert r.status_code == 200 and r.json()["answer"], r.text
                else:
                    want = 503 if kind in UNAVAILABLE else 502
                    assert r.status_code == want, r.text
                    d = r.json()
                    assert d["error"] == ("llm_unavailable" if want == 503 else "llm_bad_reply")
                    assert f"({kind})" in d["detail"] and "/v1/search still works" in d["detail"]
                    assert (int(r.headers["retry-after"]) >= 1) if want == 503 else ("retry-after" not in r.headers)
                s = c.post("/v1/search", json=body)
                assert s.status_code == 200, s.text
                assert any("support group" in e["text"] for e in s.json()["evidence"])
        finally:
            svc.close()


# ------------------------------------------------------------------------------------------------
# judge
# ------------------------------------------------------------------------------------------------


def judge_ok(body: dict[str, Any]) -> dict[str, Any]:
    return {"verdict": "CORRECT", "reason": "same date"}


def _answerer(store_dir: Path, judge_client: Any) -> QuestionAnswerer:
    """An eval answerer (rules answers, no LLM) whose judge is ``judge_client``."""
    cfg = load_config(env={})
    spec = {"cfg_json": cfg.model_dump_json(), "backend": "rules", "kind": "memory", "variant": "lychee",
            "variant_key": "k", "store": str(store_dir), "judge_cfg_json": judge_config(cfg).model_dump_json()}
    return QuestionAnswerer(spec, embedder=EMB, judge_client=judge_client)


QUESTION = {"question_id": "q1", "conversation_id": "c-1", "question": Q, "answer": ANSWER, "category": "2",
            "question_date": "2023-08-01", "abstention": False}


def _judged_row(store_dir: Path, handler: Callable[[dict[str, Any]], Any], fault: str | None) -> dict[str, Any]:
    with OpenAIServer(handler=handler) as srv:
        client = make_llm_client(judge_config(load_config(sets=llm_sets(srv.base_url, fault), env={})))
        qa = _answerer(store_dir, client)
        try:
            return qa.answer(QUESTION)
        finally:
            qa.close()
            client.close()


@pytest.mark.parametrize("fault", KINDS)
def test_judge_fault_gives_null_verdict_and_rerun_judges_it(fault, query_store, tmp_path):
    kind = FAULTS[fault][1]
    handler = FaultInjector(judge_ok, fault, match=is_judge_request, text_keys=JUDGE_TEXT)
    row = _judged_row(query_store, handler, fault)
    assert row["answer_error"] is None and row["answer"]  # the answer itself is kept
    # recorded as an error, never as a verdict (no silent WRONG)
    assert row["judge_verdict"] is None and row["judge_error"] and row["judge_calls"] == 1
    # the label in a foreign script does not validate: it surfaces as a schema violation
    assert f"[{'schema_violation' if kind == 'wrong_language' else kind}]" in row["judge_error"]
    write_part(tmp_path, "lychee", [row])
    assert not done_ok(load_answers(tmp_path, "lychee", "k")["q1"], judged=True)  # a resume redoes it
    again = _judged_row(query_store, judge_ok, None)
    write_part(tmp_path, "lychee", [again])
    latest = load_answers(tmp_path, "lychee", "k")["q1"]
    assert latest["judge_verdict"] == "CORRECT" and latest["judge_error"] is None and done_ok(latest, judged=True)


@pytest.mark.parametrize("fault", [k for k in KINDS if k != "wrong_language"])
def test_judge_transient_fault_is_retried(fault):
    handler = FaultInjector(judge_ok, fault, match=is_judge_request, text_keys=JUDGE_TEXT, times=1)
    with OpenAIServer(handler=handler) as srv:
        client = make_llm_client(judge_config(load_config(sets=llm_sets(srv.base_url, fault), env={})))
        try:
            out = LLMJudge(client).judge(Q, ANSWER, "On 7 May 2023.", question_id="q1")
        finally:
            client.close()
    assert handler.hits == 1 and out.verdict == "CORRECT" and out.error is None
    assert [u.attempts for u in client.ledger] == [2]
