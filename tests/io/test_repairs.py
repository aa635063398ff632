"""Repairs always say so (issue 39 item 6): missing LoCoMo fields, times that go backwards and
duplicate conversation ids each get a warning row, and the build summary names a skipped duplicate
line, never the conversation that was built from the first one."""

from __future__ import annotations

import json

import pytest

from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build
from lychee_ray.config import load_config
from lychee_ray.io.adapters import read_input
from lychee_ray.io.store import StoreReader

pytestmark = pytest.mark.reliability  # listed in docs/reliability.md (issue 39)


def locomo_sample(**session_2) -> dict:
    return {"sample_id": "77", "qa": [], "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bob",
        "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a grey cat named Pixel."},
                      {"dia_id": "D1:2", "text": "Lovely name!"},  # no speaker
                      {"speaker": "Ann", "text": "She likes tuna."},  # no dia_id
                      {"speaker": "Bob", "dia_id": "D1:4"}],  # no text
        "session_2_date_time": "10:00 am on 1 May, 2023",  # before session 1
        "session_2": [{"speaker": "Bob", "dia_id": "D2:1", "text": "How is Pixel?"}],
        "session_3": [{"speaker": "Ann", "dia_id": "D3:1", "text": "Pixel is fine."}],  # no date
        **session_2}}


def test_locomo_missing_fields_and_backwards_sessions_are_repaired_with_warnings(tmp_path):
    src = tmp_path / "77.json"
    src.write_text(json.dumps(locomo_sample()))
    [item] = list(read_input("locomo", src))
    conv = item.conversation
    assert conv is not None and conv.conversation_id == "locomo-77"
    t = conv.sessions[0].turns
    assert (t[1].speaker, t[2].turn_id, t[3].content) == ("user", "D1:3", "")  # the repairs themselves
    assert conv.sessions[2].started_at is None
    warned = {(i.field, i.message.split(" [")[0]) for i in item.issues if i.level == "warning"}
    assert ("session_1.1.speaker", "missing speaker (read as the role 'user')") in warned
    assert ("session_1.2.dia_id", "missing dia_id generated") in warned
    assert ("session_1.3.text", "missing text (an empty turn)") in warned
    assert ("session_3_date_time", "missing session date (no start time)") in warned
    assert ("session_2_date_time", "session starts before the session before it (kept)") in warned
    assert not [i for i in item.issues if i.level == "error"]


def test_locomo_turn_that_is_not_an_object_rejects_the_sample_naming_it(tmp_path):
    src = tmp_path / "77.json"
    src.write_text(json.dumps(locomo_sample(session_2=["not a turn"])))
    [item] = list(read_input("locomo", src))
    assert item.conversation is None
    [err] = [i for i in item.issues if i.level == "error"]
    assert err.field == "session_2.0" and "not an object" in err.message


def test_backwards_turn_times_duplicates_and_the_summary(tmp_path, embedder):
    rows = [
        {"conversation_id": "c-1", "user_id": "u", "sessions": [{"session_id": "s1", "turns": [
            {"turn_id": "1", "content": "I adopted a grey cat named Pixel.", "timestamp": "2024-01-05T10:00:00"},
            {"turn_id": "2", "content": "She likes tuna.", "timestamp": "2024-01-05T09:00:00+00:00"}]}]},
        {"conversation_id": "c-1", "user_id": "u", "sessions": [{"session_id": "s1", "turns": [
            {"turn_id": "1", "content": "Another text."}]}]},
        {"conversation_id": "c-2", "user_id": "u", "sessions": [{"session_id": "s1", "turns": [
            {"turn_id": "1", "content": "In order.", "timestamp": "2024-01-05T09:00:00"},
            {"turn_id": "2", "content": "Still in order.", "timestamp": "2024-01-05T10:00:00+01:00"}]}]},
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    cfg = load_config(env={})
    out = tmp_path / "store"
    s = run_local_build(cfg, "jsonl", src, out, backend="rules", ctx=make_context(cfg, "rules", embedder))
    assert (s.inputs, s.built, s.failed, s.duplicate) == (3, 2, 0, 1)
    table = s.table(str(out))
    assert "failed conversations" not in table and f"{src}:2 [c-1]" in table
    rows_by_cid: dict[str, list[str]] = {}
    for w in StoreReader(out).errors().to_pylist():
        assert w["stage"] == "warning"
        rows_by_cid.setdefault(w["conversation_id"], []).append(f"{w['line']}: {w['message']}")
    text = "\n".join(rows_by_cid["c-1"])
    assert "turn timestamp before the previous turn's (kept)" in text and "2024-01-05T09:00:00+00:00 < " in text
    assert f"2: conversation_id: duplicate conversation id: this line ({src}:2) skipped" in text
    assert "c-2" not in rows_by_cid  # 10:00+01:00 is 09:00 UTC: not backwards
