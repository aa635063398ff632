import json

import numpy as np
import pyarrow as pa
import pytest

from lychee_ray.llm.usage import UsageLedger
from lychee_ray.core.conversation import TURN_SCHEMA, Conversation
from lychee_ray.core.records import EvidenceNode, MemoryRecord, SegmentRow
from lychee_ray.io.store import ConversationArtifacts, StoreReader, StoreWriter, conversation_key


def artifacts(cid="c-1", n_rec=3, dim=8, fp="fp1"):
    conv = Conversation.model_validate({"conversation_id": cid, "sessions": [{"session_id": "s1", "turns": [
        {"turn_id": f"t{i}", "content": f"turn {i}"} for i in range(4)]}]})
    recs = [MemoryRecord(record_id=f"{cid}-r{i}", conversation_id=cid, user_id=cid, session_id="s1", segment_id=f"{cid}#s0",
                         ordinal=i, type="fact", text=f"fact {i}", source_turn_ids=["t0"], backend="rules", model="m") for i in range(n_rec)]
    nodes = [EvidenceNode(node_id=f"{cid}-n0", conversation_id=cid, user_id=cid, kind="topic", key="x", text="x", record_ids=[r.record_id for r in recs])]
    seg = [SegmentRow(conversation_id=cid, segment_id=f"{cid}#s0", index=0, session_ids=["s1"], turn_ids=["t0"], num_tokens=3,
                      close_reason="end_of_stream", status="ok", backend="rules", model="m")]
    rng = np.random.default_rng(0)
    unit = lambda n: (lambda m: m / np.linalg.norm(m, axis=1, keepdims=True))(rng.normal(size=(n, dim)).astype(np.float32))
    return ConversationArtifacts(
        conversation_id=cid, user_id=cid, records=recs, nodes=nodes,
        turns=pa.Table.from_pylist(conv.turn_rows(), schema=TURN_SCHEMA), segments=seg, usage=UsageLedger().to_table(),
        record_vectors=unit(n_rec), node_vectors=unit(1), turn_vectors=unit(4), fingerprint=fp,
    )


def test_commit_and_read_back(tmp_path):
    w = StoreWriter(tmp_path)
    art = artifacts()
    marker = w.commit(art)
    assert marker.counts.as_dict() == {"turns": 4, "segments": 1, "failed_segments": 0, "records": 3, "nodes": 1}
    assert w.is_committed("c-1", "fp1") and not w.is_committed("c-1", "other")
    r = StoreReader(tmp_path)
    assert r.conversation_ids() == ["c-1"]
    d = r.load("c-1")
    assert d.records.column("record_id").to_pylist() == d.ids["records"]
    assert d.record_index.ntotal == 3 and d.turn_index.ntotal == 4 and d.node_index.ntotal == 1
    # FAISS ids are row positions: searching a stored vector finds its own row
    _, ids = d.record_index.search(art.record_vectors[1:2], 1)
    assert ids[0, 0] == 1
    assert not (tmp_path / "_staging").exists()  # store version 2: one path scheme, no staging area
    with pytest.raises(KeyError):
        r.load("nope")


def test_recommit_replaces_without_duplicates_and_manifest(tmp_path):
    w = StoreWriter(tmp_path)
    w.commit(artifacts("a"))
    w.commit(artifacts("a", n_rec=2))
    w.commit(artifacts("b/with spaces"))
    r = StoreReader(tmp_path)
    assert r.load("a").records.num_rows == 2
    assert r.read_table("records").num_rows == 2 + 3
    m = w.write_manifest({"backend": "rules"})
    assert m["counts"]["conversations"] == 2 and m["counts"]["records"] == 5
    assert json.loads((tmp_path / "manifest.json").read_text())["backend"] == "rules"
    assert conversation_key("b/with spaces") != conversation_key("b_with_spaces")


def test_uncommitted_conversation_is_invisible(tmp_path):
    w = StoreWriter(tmp_path)
    w.commit(artifacts("a"))
    # simulate a crash after the old marker was removed and before the new one was written
    (tmp_path / "commits" / f"{conversation_key('a')}.json").unlink()
    assert StoreReader(tmp_path).conversation_ids() == []
    assert not w.is_committed("a")


def test_vector_count_mismatch_is_an_error(tmp_path):
    art = artifacts()
    art.record_vectors = art.record_vectors[:1]
    with pytest.raises(ValueError, match="records"):
        StoreWriter(tmp_path).commit(art)
    assert StoreReader(tmp_path).conversation_ids() == []


def test_errors_table(tmp_path):
    w = StoreWriter(tmp_path)
    w.write_errors([{"conversation_id": "x", "stage": "input", "message": "bad", "file": "f", "line": 3}])
    t = StoreReader(tmp_path).errors()
    assert t.num_rows == 1 and t.column("stage").to_pylist() == ["input"]


def test_compaction_keeps_rows_and_recommit_after_compaction(tmp_path):
    from lychee_ray.io.store import compact

    w = StoreWriter(tmp_path)
    for cid in ("a", "b", "c"):
        w.commit(artifacts(cid))
    before = StoreReader(tmp_path).read_table("records").sort_by("record_id")
    merged = compact(tmp_path, conversations_per_file=2)
    assert merged["records"] == 3
    files = sorted(p.name for p in (tmp_path / "records").glob("*.parquet"))
    assert len(files) == 2 and all(f.startswith("compact-") for f in files)
    r = StoreReader(tmp_path)
    assert r.read_table("records").sort_by("record_id").equals(before)
    assert r.load("b").records.column("conversation_id").unique().to_pylist() == ["b"]
    # a conversation rebuilt after compaction is read from its new part, without duplicates
    w.commit(artifacts("b", n_rec=1))
    r.refresh()
    assert r.load("b").records.num_rows == 1
    assert r.read_table("records").num_rows == 3 + 1 + 3
    compact(tmp_path, conversations_per_file=2)
    r.refresh()
    assert r.read_table("records").num_rows == 7 and r.load("b").records.num_rows == 1


def test_a_reader_whose_marker_predates_a_compaction_reads_the_moved_rows(tmp_path):
    """Compaction repoints a marker (same commit, new location) and then deletes the old parts; a
    reader that read the marker before that finds a part gone, re-reads the marker and loads the
    rows from the compacted file (it used to raise: the re-read marker was "the same commit")."""
    from lychee_ray.io.store import compact

    w = StoreWriter(tmp_path)
    for cid in ("a", "b"):
        w.commit(artifacts(cid))
    r = StoreReader(tmp_path)  # markers read now: per-conversation parts
    expected = r.load("a").records
    compact(tmp_path, conversations_per_file=2)
    assert not list((tmp_path / "records").glob("a*.parquet"))  # the part the stale marker names is gone
    assert r.load("a").records.equals(expected)
    assert r.markers["a"].location  # the reader now holds the repointed marker


def test_claims_detect_duplicates_but_allow_retries(tmp_path):
    w = StoreWriter(tmp_path)
    assert w.claim("c", "run1", "a.jsonl:1") is None
    assert w.claim("c", "run1", "a.jsonl:1") is None  # the same input retried
    assert w.claim("c", "run1", "b.jsonl:7") == "a.jsonl:1"  # a duplicate id elsewhere
    assert w.claim("c", "run2", "b.jsonl:7") is None  # another run starts fresh
    w.release_claims("run1")
    assert w.claim("c", "run1", "b.jsonl:7") is None


def test_verify_flags_broken_references(tmp_path):
    from lychee_ray.io.verify import verify_store

    w = StoreWriter(tmp_path)
    art = artifacts("a")
    art.records[0] = art.records[0].model_copy(update={"source_turn_ids": ["missing"]})
    w.commit(art)
    rep = verify_store(tmp_path)
    assert not rep["ok"] and any("source turns missing" in p for p in rep["problems"]["a"])
    assert any("segments do not cover" in p for p in rep["problems"]["a"])
