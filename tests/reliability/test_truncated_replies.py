"""Encode replies cut at the token limit (``finish_reason=length``) through the OpenAI-compatible test server.

The defined outcome (docs/reliability.md, "LLM faults"): a cut reply is tried ``encoder.truncated_attempts``
times (default once: the same prompt under the same limit is cut the same way); its complete records
are kept and the segment is stored as ``salvaged`` (kind ``truncated``), shown by ``lychee-ray errors
--warnings``; a reply cut before its first complete record fails the segment (kind ``truncated``, turns
kept), shown by ``lychee-ray errors`` and repaired by ``--retry-failed``.
"""

from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

import pytest

from lychee_ray.cli.main import main
from lychee_ray.config import load_config
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build
from lychee_ray.io.store import StoreReader
from lychee_ray.io.verify import verify_conversation
from lychee_ray.testing import OpenAIServer, Reply, truncated
from lychee_ray.testing.fake_llm import encoder_reply, is_encode_request
from lychee_ray.testing.synthetic import synthetic_conversation
from tests.reliability.test_llm_faults import EMB, assert_same_store, llm_sets

pytestmark = [pytest.mark.reliability, pytest.mark.heavy]


class Cutter:
    """Server handler: every encode reply cut in its second record (``mid``: the first is whole) or in
    its first (``first``: nothing whole); remembers the record texts written whole and the cut ones."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.whole: set[str] = set()
        self.lost: set[str] = set()
        self._lock = threading.Lock()

    def __call__(self, body: dict[str, Any]) -> Reply | dict[str, Any]:
        reply = encoder_reply(body)
        if not is_encode_request(body):
            return reply
        text = json.dumps(reply)
        records = reply["records"]
        starts = [text.index(json.dumps(r)) for r in records]
        if self.where == "first" or len(records) < 2:
            at, kept = starts[0] + 12, 0  # inside the first record ("type": "fa...)
        else:
            at, kept = starts[1] + len(json.dumps(records[1])) // 2, 1  # halfway through the second record
        if self.where == "mid" and len(records) < 2:
            at, kept = starts[0] + len(json.dumps(records[0])), 1  # one record: cut right after it
        with self._lock:
            self.whole |= {r["text"] for r in records[:kept]}
            self.lost |= {r["text"] for r in records[kept:]}
        return truncated(text[:at])


@pytest.fixture(scope="module")
def source(tmp_path_factory) -> Path:
    """One small conversation (a few segments of a few turns)."""
    path = tmp_path_factory.mktemp("cut_in") / "in.jsonl"
    conv = synthetic_conversation(0, seed=3, sessions=1, topics_per_session=1, exchanges_per_topic=(2, 3))
    path.write_text(conv.model_dump_json() + "\n")
    return path


def _build(url: str, src: Path, out: Path, *sets: str, retry_failed: bool = False):
    cfg = load_config(sets=[*llm_sets(url), *sets], env={})
    return run_local_build(cfg, "jsonl", src, out, backend="openai", retry_failed=retry_failed,
                           ctx=make_context(cfg, "openai", EMB))


def _errors(capsys, out: Path, *flags: str) -> str:
    assert main(["errors", "--memory", str(out), *flags]) == 0
    return capsys.readouterr().out


def test_reply_cut_mid_record_keeps_its_complete_records_and_errors_warnings_shows_it(source, tmp_path, capsys):
    cutter = Cutter("mid")
    with OpenAIServer(handler=cutter) as srv:
        s = _build(srv.base_url, source, tmp_path / "st")
        calls = len(srv.chat_requests())
    r = StoreReader(tmp_path / "st")
    [cid] = r.conversation_ids()
    d = r.load(cid)
    segs = d.segments.to_pylist()
    assert calls == len(segs)  # one call per segment: a cut reply is not tried again by default
    assert (s.built, s.failed, s.failed_segments) == (1, 0, 0), s.to_dict()
    assert s.quality.segments_salvaged == len(segs)
    # every segment salvaged, with its cause as data
    assert all(x["status"] == "salvaged" and x["error_kind"] == "truncated" and x["attempts"] == 1
               and x["error"].startswith("salvaged: reply cut at max_completion_tokens") for x in segs), segs
    # the complete records are stored, nothing of a cut one
    texts = {x["text"] for x in d.records.to_pylist()}
    assert texts and texts <= cutter.whole and not texts & cutter.lost
    assert sum(x["num_records"] for x in segs) == d.records.num_rows
    assert verify_conversation(r, cid) == []
    # `errors` lists failures only; `errors --warnings` names each salvaged segment with its cause
    assert _errors(capsys, tmp_path / "st").strip().endswith(f"no errors in {tmp_path / 'st'}")
    lines = _errors(capsys, tmp_path / "st", "--warnings").splitlines()
    for x in segs:
        line = next(ln for ln in lines if ln.startswith(f"segment {x['segment_id']} "))
        assert f"(turns {x['turn_ids'][0]}..{x['turn_ids'][-1]}) [{cid}] warning truncated, 1 attempt(s): salvaged:" in line
    rows = json.loads(_errors(capsys, tmp_path / "st", "--warnings", "--json"))
    assert [(r["stage"], r["kind"], r["status"], r["segment_id"], r["turn_range"], r["attempts"]) for r in rows] == [
        ("warning", "truncated", "salvaged", x["segment_id"], [x["turn_ids"][0], x["turn_ids"][-1]], 1) for x in segs]
    # stats counts them
    assert main(["stats", "--memory", str(tmp_path / "st"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["segments_salvaged"] == len(segs)


def test_reply_cut_before_any_complete_record_fails_the_segment_as_truncated_then_retry_failed(
        source, tmp_path, capsys):
    with OpenAIServer(handler=encoder_reply) as srv:
        _build(srv.base_url, source, tmp_path / "clean")
    with OpenAIServer(handler=Cutter("first")) as srv:
        s = _build(srv.base_url, source, tmp_path / "st")
        calls = len(srv.chat_requests())
    r = StoreReader(tmp_path / "st")
    [cid] = r.conversation_ids()
    d = r.load(cid)
    segs = d.segments.to_pylist()
    assert calls == len(segs) and (s.built, s.failed_segments, s.records) == (1, len(segs), 0), s.to_dict()
    assert all(x["status"] == "failed" and x["error_kind"] == "truncated" and x["attempts"] == 1 for x in segs), segs
    assert d.turns.num_rows == d.turn_index.ntotal and verify_conversation(r, cid) == []  # turns kept and indexed
    # `errors` (with or without --warnings) lists every failed segment with its cause
    for flags in ((), ("--warnings",)):
        lines = _errors(capsys, tmp_path / "st", *flags).splitlines()
        assert lines[-1] == f"{len(segs)} row(s)"
        for x in segs:
            assert (f"segment {x['segment_id']} (turns {x['turn_ids'][0]}..{x['turn_ids'][-1]}) [{cid}] encode "
                    "truncated, 1 attempt(s): LLMCallFailed:") in "\n".join(lines)
    rows = json.loads(_errors(capsys, tmp_path / "st", "--json"))
    assert {(r["stage"], r["kind"], r["status"], r["attempts"]) for r in rows} == {("encode", "truncated", "failed", 1)}
    assert sorted(r["segment_id"] for r in rows) == sorted(x["segment_id"] for x in segs)
    # a healthy endpoint: --retry-failed re-encodes them and the store equals a clean run's
    with OpenAIServer(handler=encoder_reply) as srv:
        again = _build(srv.base_url, source, tmp_path / "st", retry_failed=True)
    assert (again.built, again.failed_segments) == (1, 0)
    assert_same_store(tmp_path / "st", tmp_path / "clean")
    assert _errors(capsys, tmp_path / "st", "--warnings").strip().endswith("no errors or warnings in " + str(tmp_path / "st"))


def test_truncated_reply_fail_and_truncated_attempts_are_configuration(source, tmp_path):
    with OpenAIServer(handler=Cutter("mid")) as srv:
        s = _build(srv.base_url, source, tmp_path / "st", "encoder.truncated_reply=fail", "encoder.truncated_attempts=2")
        calls = len(srv.chat_requests())
    segs = StoreReader(tmp_path / "st").load(StoreReader(tmp_path / "st").conversation_ids()[0]).segments.to_pylist()
    assert calls == 2 * len(segs) and s.failed_segments == len(segs) and s.records == 0
    assert all(x["status"] == "failed" and x["error_kind"] == "truncated" and x["attempts"] == 2 for x in segs)
