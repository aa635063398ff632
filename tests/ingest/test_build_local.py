"""In-process build: rules and openai encoders end to end, failed segments, retry, quarantine, dry run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lychee_ray.config import load_config
from lychee_ray.ingest.dryrun import dry_run
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build
from lychee_ray.io.store import StoreReader, conversation_key
from lychee_ray.io.verify import verify_conversation, verify_store
from lychee_ray.testing.fake_llm import encoder_reply, is_encode_request
from lychee_ray.testing import OpenAIServer, malformed_content, ok, schema_violation, truncated
from lychee_ray.testing.synthetic import synthetic_conversation


def write_input(path: Path, n: int = 3, seed: int = 3) -> Path:
    path.write_text("\n".join(synthetic_conversation(i, seed=seed, sessions=2, topics_per_session=2).model_dump_json() for i in range(n)) + "\n")
    return path


def snapshot(root: Path) -> dict:
    r = StoreReader(root)
    out = {}
    for cid in r.conversation_ids():
        d = r.load(cid)
        out[cid] = {
            "records": sorted(zip(d.records.column("record_id").to_pylist(), d.records.column("text").to_pylist())),
            "nodes": sorted(d.nodes.column("node_id").to_pylist()),
            "segments": [(s["segment_id"], s["status"]) for s in d.segments.to_pylist()],
        }
    return out


def llm_cfg(base_url: str, *extra: str):
    return load_config(sets=[f"llm.base_url={base_url}", "llm.api_key=test", "llm.backoff_initial_s=0.01",
                             "llm.backoff_max_s=0.02", "llm.max_attempts=2", "llm.timeout_s=5", *extra], env={})


def test_rules_build_store_integrity(tmp_path, embedder):
    src = write_input(tmp_path / "in.jsonl")
    cfg = load_config(env={})
    s = run_local_build(cfg, "jsonl", src, tmp_path / "st", backend="rules", ctx=make_context(cfg, "rules", embedder))
    assert (s.inputs, s.built, s.failed) == (3, 3, 0) and s.records > 0
    report = verify_store(tmp_path / "st")
    assert report["ok"], report["problems"]
    assert report["conversations"] == 3 and report["records"] == s.records and report["turns"] > 0
    m = json.loads((tmp_path / "st" / "manifest.json").read_text())
    assert m["backend"] == "rules" and m["models"]["llm"] == "rules-v2" and m["embedding_dim"] == 384
    assert m["counts"]["conversations"] == 3 and m["counts"]["records"] == s.records
    assert "offline" in m["backend_description"]


@pytest.mark.heavy
def test_openai_encoder_failed_segments_then_retry_failed_equals_clean(tmp_path, embedder):
    src = write_input(tmp_path / "in.jsonl", n=2)
    with OpenAIServer(handler=encoder_reply) as srv:
        cfg = llm_cfg(srv.base_url, "build.conversations_in_flight=1")
        clean = run_local_build(cfg, "jsonl", src, tmp_path / "clean", backend="openai", ctx=make_context(cfg, "openai", embedder))
        assert clean.failed_segments == 0 and clean.llm_calls > 0 and clean.prompt_tokens > 0

        # every reply of the first conversation's first two segments is broken in a different way
        broken = iter([malformed_content(), truncated(), schema_violation({"records": "nope"}), malformed_content()])

        def flaky(body):
            if is_encode_request(body):
                nxt = next(broken, None)
                return nxt if nxt is not None else encoder_reply(body)
            return None

        srv.handler = flaky
        first = run_local_build(cfg, "jsonl", src, tmp_path / "flaky", backend="openai", ctx=make_context(cfg, "openai", embedder))
        assert first.built == 2 and first.failed_segments == 2
        r = StoreReader(tmp_path / "flaky")
        failed = [s for cid in r.conversation_ids() for s in r.load(cid).segments.to_pylist() if s["status"] == "failed"]
        assert len(failed) == 2 and all(s["error"] and s["turn_ids"] for s in failed)
        d = r.load(r.conversation_ids()[0])
        assert d.turns.num_rows == d.turn_index.ntotal  # raw turns of failed segments stay indexed
        assert verify_conversation(r, r.conversation_ids()[0]) == []

        srv.handler = encoder_reply
        calls_before = len(srv.chat_requests())
        again = run_local_build(cfg, "jsonl", src, tmp_path / "flaky", backend="openai", retry_failed=True,
                                ctx=make_context(cfg, "openai", embedder))
        assert again.built == 1 and again.skipped == 1 and again.failed_segments == 0
        assert len(srv.chat_requests()) - calls_before == 2  # only the failed segments were re-encoded
    assert snapshot(tmp_path / "flaky") == snapshot(tmp_path / "clean")


def test_build_stage_exception_is_quarantined(tmp_path, embedder):
    src = write_input(tmp_path / "in.jsonl", n=3)
    cfg = load_config(env={})
    ctx = make_context(cfg, "rules", embedder)
    real = ctx.embed

    async def poisoned(texts):
        if any("Zara" in t for t in texts):
            raise RuntimeError("embedding service exploded")
        return await real(texts)

    ctx.embed = poisoned
    s = run_local_build(cfg, "jsonl", src, tmp_path / "st", backend="rules", ctx=ctx)
    assert s.inputs == 3 and s.built + s.failed == 3 and s.failed >= 1
    errs = StoreReader(tmp_path / "st").errors().to_pylist()
    # the turn embedding stage failed for them (a batch that fails is embedded conversation by conversation)
    assert len(errs) == s.failed and all(e["stage"] == "embed" and "exploded" in e["message"] for e in errs)


@pytest.mark.heavy
def test_interrupted_build_rerun_gives_same_store(tmp_path, embedder):
    src = write_input(tmp_path / "in.jsonl", n=3)
    cfg = load_config(env={})
    run_local_build(cfg, "jsonl", src, tmp_path / "clean", backend="rules", ctx=make_context(cfg, "rules", embedder))
    part = tmp_path / "part.jsonl"
    part.write_text(src.read_text().splitlines()[0] + "\n")
    run_local_build(cfg, "jsonl", part, tmp_path / "st", backend="rules", ctx=make_context(cfg, "rules", embedder))
    # a crashed commit leaves a generation no marker names: invisible, then rebuilt
    key = conversation_key(json.loads(src.read_text().splitlines()[1])["conversation_id"])
    (tmp_path / "st" / "index" / key / "g000001-deadbeef").mkdir(parents=True)
    s = run_local_build(cfg, "jsonl", src, tmp_path / "st", backend="rules", ctx=make_context(cfg, "rules", embedder))
    assert (s.built, s.skipped) == (2, 1)
    assert snapshot(tmp_path / "st") == snapshot(tmp_path / "clean")


def test_dry_run_counts_calls_and_tokens(tmp_path, embedder):
    src = write_input(tmp_path / "in.jsonl", n=2)
    rep = dry_run(load_config(env={}), "jsonl", src, embedder=embedder)
    t = rep["total"]
    assert t["conversations"] == 2 and t["encode_calls"] == t["segments"] < t["eager_calls"] == t["turns"]
    assert t["eager_prompt_tokens"] > t["prompt_tokens"] > 0
    assert t["prompt_tokens_max"] >= t["prompt_tokens"]
    c = next(iter(rep["conversations"].values()))
    assert len(c["calls_per_segment_prompt_tokens"]) == c["segments"]
