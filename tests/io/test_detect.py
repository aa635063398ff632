"""Input format detection and the pre-build survey (lychee_ray.io.adapters.detect)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lychee_ray.io.adapters import InputError, detect_format, survey_input
from lychee_ray.io.adapters.detect import count_conversations, sniff_bytes

CONV = {"conversation_id": "c-1", "sessions": [{"session_id": "s1", "turns": [{"turn_id": "1", "content": "hi"}]}]}
LOCOMO = {"sample_id": "7", "conversation": {"speaker_a": "A", "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "x"}]}}
LME = [{"question_id": "q1", "haystack_sessions": [[{"role": "user", "content": "x"}]], "haystack_dates": ["2023/05/20 (Sat) 02:21"],
        "haystack_session_ids": ["s"]}]


def test_sniff_bytes():
    assert sniff_bytes(b"PAR1....") == "parquet"
    assert sniff_bytes(json.dumps(CONV).encode() + b"\n" + json.dumps(CONV).encode()) == "jsonl"
    assert sniff_bytes(json.dumps(LOCOMO, indent=1).encode()) == "locomo"
    assert sniff_bytes(json.dumps([LOCOMO]).encode()) == "locomo"
    assert sniff_bytes(json.dumps(LME).encode()) == "longmemeval"
    assert sniff_bytes(b"hello") is None and sniff_bytes(b"") is None


def test_detect_files_and_directories(tmp_path: Path):
    (tmp_path / "a.jsonl").write_text(json.dumps(CONV) + "\n")
    (tmp_path / "conv.json").write_text(json.dumps(CONV) + "\n")  # JSONL content under a .json name
    loc = tmp_path / "loc"
    loc.mkdir()
    for i in range(3):
        (loc / f"{i}.json").write_text(json.dumps(LOCOMO, indent=1))
    (tmp_path / "lme.json").write_text(json.dumps(LME))
    pq.write_table(pa.table({"x": [1]}), tmp_path / "t.parquet")
    assert detect_format(tmp_path / "a.jsonl").format == "jsonl"
    assert detect_format(tmp_path / "conv.json").format == "jsonl"
    d = detect_format(loc)
    assert (d.format, d.looks_like) == ("locomo", "a LoCoMo directory (3 .json files)")
    assert detect_format(tmp_path / "lme.json").format == "longmemeval"
    assert detect_format(tmp_path / "t.parquet").format == "parquet"
    assert detect_format(tmp_path) is None  # mixed formats: cannot tell
    assert detect_format(tmp_path / "missing") is None


def test_count_conversations(tmp_path: Path):
    (tmp_path / "a.jsonl").write_text(json.dumps(CONV) + "\n\n" + "{broken\n")
    assert count_conversations("jsonl", [str(tmp_path / "a.jsonl")]) == 2  # a broken line is still an item
    (tmp_path / "l.json").write_text(json.dumps([LOCOMO, LOCOMO]))
    assert count_conversations("locomo", [str(tmp_path / "l.json")]) == 2


def test_survey_refuses_what_cannot_be_built(tmp_path: Path):
    (tmp_path / "e.jsonl").write_text("")
    (tmp_path / "a.jsonl").write_text(json.dumps(CONV) + "\n")
    (tmp_path / "odd.txt").write_text("hello")
    cases = [("missing", None, "not_found"), ("e.jsonl", None, "empty"), ("odd.txt", None, "unknown_format"),
             ("a.jsonl", "locomo", "format_mismatch")]
    for name, fmt, kind in cases:
        with pytest.raises(InputError) as e:
            survey_input(tmp_path / name, fmt)
        assert e.value.kind == kind, name
    empty_dir = tmp_path / "d"
    empty_dir.mkdir()
    with pytest.raises(InputError) as e:
        survey_input(empty_dir, "jsonl")
    assert e.value.kind == "no_files"
    s = survey_input(tmp_path / "a.jsonl")
    assert (s.format, s.conversations, s.detected) == ("jsonl", 1, True)
    assert survey_input(tmp_path / "a.jsonl", "jsonl").detected is False
