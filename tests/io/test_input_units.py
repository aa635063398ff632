"""The explicit input unit (lychee_ray.io.adapters.units): a format registered from this test whose
conversations span files — a folder per channel, a file per day — goes through detection,
``convert``, a local build and the Ray job's read step without touching the package."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lychee_ray.config import load_config
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build
from lychee_ray.io.adapters import InputError, detect_format, input_units, read_input, survey_input
from lychee_ray.io.adapters.adapter import Adapter
from lychee_ray.io.adapters.base import AdapterItem, InputIssue, canonical_item, open_input
from lychee_ray.io.adapters.registry import format_names, register, unregister
from lychee_ray.io.adapters.units import count_one, folder_files, list_units
from lychee_ray.io.convert import convert
from lychee_ray.io.store import StoreReader

DAYS = {
    "general": {
        "2024-03-01": [("alice", "I moved the team offsite to Lisbon in May."), ("bob", "Great, I will book the flights.")],
        "2024-03-02": [("alice", "The offsite budget is 12000 euros."), ("bob", "Noted, I will keep the receipts.")],
    },
    "random": {
        "2024-03-05": [("carol", "My cat Miso learned to open doors."), ("dan", "Miso is a clever cat.")],
    },
}


def read_channel(unit: str) -> Iterator[AdapterItem]:
    """One channel folder → one conversation: a session per day file, a turn per message line."""
    sessions = []
    for f in folder_files(unit, (".jsonl",)):
        with open_input(f) as fh:
            lines = [json.loads(x) for x in fh.read().decode().splitlines() if x.strip()]
        day = Path(f).stem
        turns = [{"turn_id": f"{day}:{i}", "speaker": m["user"], "content": m["text"], "timestamp": m["ts"]}
                 for i, m in enumerate(lines)]
        sessions.append({"session_id": day, "started_at": lines[0]["ts"] if lines else None, "turns": turns})
    if not sessions:
        yield AdapterItem(unit, issues=[InputIssue(unit, "no day files in this channel folder")])
        return
    yield canonical_item({"conversation_id": f"chan-{Path(unit).name}", "sessions": sessions}, unit, None)


def sniff_day(obj: dict[str, Any] | None, head: str) -> bool:
    return obj is not None and {"ts", "user", "text"} <= set(obj)


DAYLOG = Adapter("daylog", "day-log export", (".jsonl",), read_channel, sniff_day, count_one, unit="folder")


@pytest.fixture
def daylog():
    register(DAYLOG)
    yield DAYLOG
    unregister(DAYLOG.name)


def write_export(root: Path) -> Path:
    for chan, days in DAYS.items():
        (root / chan).mkdir(parents=True)
        for day, msgs in days.items():
            lines = [json.dumps({"ts": f"{day}T09:0{i}:00", "user": u, "text": t}) for i, (u, t) in enumerate(msgs)]
            (root / chan / f"{day}.jsonl").write_text("\n".join(lines) + "\n")
    (root / "README.txt").write_text("not a channel")
    (root / "empty").mkdir()  # a folder with no day files is not a unit
    return root


def test_units_of_a_folder_format(tmp_path: Path, daylog: Adapter):
    root = write_export(tmp_path / "export")
    assert list_units(root, daylog.suffixes, "folder") == [str(root / "general"), str(root / "random")]
    assert list_units(root / "general", daylog.suffixes, "folder") == [str(root / "general")]  # one unit
    assert input_units("daylog", root) == [str(root / "general"), str(root / "random")]
    # a file format reads a folder's own files only: the subfolders' day files are no input of jsonl
    assert input_units("jsonl", root) == []
    with pytest.raises(FileNotFoundError):
        list_units(tmp_path / "missing", daylog.suffixes, "folder")


def test_detection_and_survey(tmp_path: Path, daylog: Adapter):
    root = write_export(tmp_path / "export")
    assert "daylog" in format_names()
    d = detect_format(root)
    assert (d.format, d.looks_like) == ("daylog", "a day-log export directory (2 folders)")
    one = detect_format(root / "general")
    assert (one.format, one.looks_like) == ("daylog", "a day-log export folder (2 .jsonl files)")
    s = survey_input(root)
    assert (s.format, s.conversations, s.unit, s.detected) == ("daylog", 2, "folder", True)
    assert s.files == [str(root / "general"), str(root / "random")]
    with pytest.raises(InputError) as e:  # a day file alone is not a unit of this format
        survey_input(root / "general" / "2024-03-01.jsonl", "daylog")
    assert e.value.kind == "needs_folder"
    with pytest.raises(InputError) as e:
        survey_input(root / "empty", "daylog")
    assert e.value.kind == "no_files"


def test_convert_reads_each_folder_whole(tmp_path: Path, daylog: Adapter):
    root = write_export(tmp_path / "export")
    rep = convert("daylog", root, tmp_path / "out.jsonl")
    assert (rep.conversations, rep.turns, rep.errors) == (2, 6, 0)
    convs = [json.loads(x) for x in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [c["conversation_id"] for c in convs] == ["chan-general", "chan-random"]
    assert [s["session_id"] for s in convs[0]["sessions"]] == ["2024-03-01", "2024-03-02"]
    assert [i.conversation.conversation_id for i in read_input("daylog", root / "random") if i.conversation] == ["chan-random"]


def test_local_build_of_a_folder_format(tmp_path: Path, daylog: Adapter, embedder):
    root = write_export(tmp_path / "export")
    cfg = load_config(env={})
    s = run_local_build(cfg, "daylog", root, tmp_path / "st", backend="rules", ctx=make_context(cfg, "rules", embedder))
    assert (s.inputs, s.built, s.failed) == (2, 2, 0)
    d = StoreReader(tmp_path / "st").load("chan-general")
    assert d.turns.num_rows == 4 and set(d.turns.column("session_id").to_pylist()) == {"2024-03-01", "2024-03-02"}


def test_ray_read_step_reads_a_folder_per_row(tmp_path: Path, daylog: Adapter):
    """The Ray job's read UDF gets one unit per row and reads the folder whole (run without a
    cluster: the function Ray Data maps over the unit rows)."""
    from lychee_ray.ray.build_job import read_unit_batches

    root = write_export(tmp_path / "export")
    rows = list(read_unit_batches({"path": [str(root / "general")]}, "daylog", 8))
    assert len(rows) == 1 and len(rows[0]["conversation"]) == 1
    conv = json.loads(rows[0]["conversation"][0])
    assert conv["conversation_id"] == "chan-general" and [s["session_id"] for s in conv["sessions"]] == ["2024-03-01",
                                                                                                          "2024-03-02"]
