"""The first hour of a new user, as subprocesses of the real command: build a directory without
``--format``, ``list``, query an id from ``list``, query an unknown id, ``verify`` a wrong path,
build an empty file, build a LoCoMo directory as ``--format jsonl``. Each step checks the exit
code and the exact one-line message; none prints a traceback or an ANSI code (the output is a pipe).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
EXAMPLE = REPO / "docs" / "examples" / "conversations.jsonl"
ANSI = re.compile(r"\x1b\[")
# Ray's own console lines: "file.py:123 --" (Python loggers), "file.cc:123:" (C++), worker prefixes.
RAY_LINE = re.compile(r"\.py:\d+ -- |\.cc:\d+:|\(\w*MapWorker|pid=\d+\)|Ray instance|progress UI")


def lychee(*args: str, cwd: Path, env: dict[str, str] | None = None, timeout: int = 600) -> subprocess.CompletedProcess:
    """``python -m lychee_ray.cli ARGS`` with the rules backend and no endpoint."""
    # a command of its own: not told by this test process that its backend notice was given already
    base = {k: v for k, v in os.environ.items()
            if k not in ("RAY_ADDRESS", "OPENAI_BASE_URL", "LYCHEE_LLM_BASE_URL", "LYCHEE_BACKEND_NOTICE")}
    return subprocess.run([sys.executable, "-m", "lychee_ray.cli", *args], cwd=cwd, env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=timeout)


def clean(p: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    """No traceback and no ANSI code anywhere in the output."""
    both = p.stdout + p.stderr
    assert "Traceback" not in both, both
    assert not ANSI.search(both), both
    return p


def one_line(p: subprocess.CompletedProcess) -> str:
    """The only line on stderr (expected failures print exactly one)."""
    lines = [ln for ln in p.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, p.stderr
    return lines[0]


def locomo_sample(sample_id: str) -> dict:
    return {"sample_id": sample_id, "conversation": {
        "speaker_a": "Ann", "speaker_b": "Bo", "session_1_date_time": "1:56 pm on 8 May, 2023",
        "session_1": [{"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a cat named Pixel."},
                      {"speaker": "Bo", "dia_id": "D1:2", "text": "What a lovely name!"}]}, "qa": []}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """A directory holding the README's example file, built without --format (in-process runner)."""
    tmp = tmp_path_factory.mktemp("new_user")
    data = tmp / "data"
    data.mkdir()
    (data / "conversations.jsonl").write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    p = lychee("build", "--input", "data", "--out", "store", "--local", "--llm", "rules", cwd=tmp)
    return tmp, p


@pytest.mark.subprocess
def test_build_a_directory_without_format(built):
    tmp, p = built
    assert p.returncode == 0, p.stderr
    clean(p)
    assert "lychee-ray build: data: 2 conversation(s) in 1 file(s), format jsonl (detected)" in p.stderr
    assert re.search(r"^built\s+2$", p.stdout, re.M), p.stdout
    assert "conversation ids: lychee-ray list --memory store" in p.stdout
    assert p.stdout.count("input conversations") == 1  # the summary once, no JSON after it
    assert "Loading weights" not in p.stderr  # no model-loading bar


@pytest.mark.subprocess
def test_list_then_query_an_id_from_list(built):
    tmp, _ = built
    table = clean(lychee("list", "--memory", "store", cwd=tmp))
    assert table.returncode == 0
    assert table.stdout.splitlines()[0].split() == ["conversation_id", "status", "user_id", "sessions", "turns",
                                                     "records", "failed_segments", "committed_at"]
    assert table.stdout.splitlines()[-1] == "2 built, 0 failed"
    rows = json.loads(clean(lychee("list", "--memory", "store", "--json", cwd=tmp)).stdout)
    assert [(r["conversation_id"], r["user_id"], r["sessions"], r["turns"]) for r in rows] == [
        ("demo-1", "alice", 1, 2), ("demo-2", "bob", 1, 2)]
    q = clean(lychee("query", "--memory", "store", "--conversation", rows[1]["conversation_id"], "--llm", "rules",
                     "--search-only", "What is the name of the cat?", cwd=tmp))
    assert q.returncode == 0, q.stderr
    assert "Pixel" in q.stdout


@pytest.mark.subprocess
def test_query_an_unknown_id(built):
    tmp, _ = built
    p = clean(lychee("query", "--memory", "store", "--conversation", "26", "--llm", "rules", "q?", cwd=tmp))
    assert p.returncode == 2
    assert one_line(p) == "lychee-ray query: unknown conversation '26' — `lychee-ray list --memory store` shows the ids"
    p = clean(lychee("query", "--memory", "store", "--conversation", "2", "--llm", "rules", "q?", cwd=tmp))
    assert one_line(p) == ("lychee-ray query: unknown conversation '2' (did you mean 'demo-2'?) — "
                           "`lychee-ray list --memory store` shows the ids")


@pytest.mark.subprocess
def test_verify_and_list_a_wrong_path(tmp_path):
    (tmp_path / "somewhere").mkdir()
    for cmd in ("verify", "list", "errors"):
        p = clean(lychee(cmd, "--memory", "nowhere", cwd=tmp_path))
        assert p.returncode == 2
        assert one_line(p) == f"lychee-ray {cmd}: no memory store at nowhere: the folder does not exist"
        p = clean(lychee(cmd, "--memory", "somewhere", cwd=tmp_path))
        assert p.returncode == 2
        assert one_line(p) == f"lychee-ray {cmd}: not a memory store (no commits/): somewhere"


@pytest.mark.subprocess
def test_build_an_empty_file_starts_nothing(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    p = clean(lychee("build", "--input", "empty.jsonl", "--out", "store", cwd=tmp_path, timeout=120))
    assert p.returncode == 2
    assert one_line(p) == "lychee-ray build: no conversations in empty.jsonl: the file is empty"
    assert not (tmp_path / "store").exists()  # refused before Ray or the store directory


@pytest.mark.subprocess
def test_build_a_locomo_directory_as_jsonl(tmp_path):
    d = tmp_path / "locomo"
    d.mkdir()
    for sid in ("1", "2"):
        (d / f"{sid}.json").write_text(json.dumps(locomo_sample(sid)))
    p = clean(lychee("build", "--input", "locomo", "--format", "jsonl", "--out", "store", cwd=tmp_path, timeout=120))
    assert p.returncode == 2
    assert one_line(p) == ("lychee-ray build: locomo looks like a LoCoMo directory (2 .json files), not jsonl: "
                           "use --format locomo (or leave --format out)")
    assert not (tmp_path / "store").exists()


@pytest.mark.subprocess
def test_build_a_jsonl_file_as_locomo_and_missing_input(tmp_path):
    (tmp_path / "in.jsonl").write_text(EXAMPLE.read_text(encoding="utf-8"))
    p = clean(lychee("build", "--input", "in.jsonl", "--format", "locomo", "--out", "store", cwd=tmp_path, timeout=120))
    assert p.returncode == 2
    assert one_line(p) == ("lychee-ray build: in.jsonl looks like a JSONL file, not locomo: use --format jsonl "
                           "(or leave --format out)")
    p = clean(lychee("build", "--input", "missing", "--out", "store", cwd=tmp_path, timeout=120))
    assert (p.returncode, one_line(p)) == (2, "lychee-ray build: input not found: missing")
    assert not (tmp_path / "store").exists()


@pytest.mark.subprocess
def test_bad_lines_are_named_by_file_and_line_and_errors_reads_them(tmp_path):
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    (tmp_path / "in.jsonl").write_text(lines[0] + "\n{not json\n")
    p = clean(lychee("build", "--input", "in.jsonl", "--out", "store", "--local", "--llm", "rules", cwd=tmp_path))
    assert p.returncode == 0
    assert "error: in.jsonl:2 [-] input: malformed JSON" in p.stderr
    assert "errors and warnings: lychee-ray errors --memory store --warnings" in p.stdout
    e = clean(lychee("errors", "--memory", "store", cwd=tmp_path))
    assert e.returncode == 0 and e.stdout.splitlines()[0].startswith("in.jsonl:2 [-] input: malformed JSON")
    rows = json.loads(lychee("errors", "--memory", "store", "--json", cwd=tmp_path).stdout)
    assert [(r["file"], r["line"], r["stage"]) for r in rows] == [("in.jsonl", 2, "input")]


def test_unexpected_errors_are_one_line_unless_debug(tmp_path, monkeypatch, capsys):
    from lychee_ray.cli import main as cli_main

    def boom(args):
        raise RuntimeError("kaput\nsecond line")

    monkeypatch.setattr("lychee_ray.cli.verify.run", boom)  # register() binds the command to `run`
    assert cli_main.main(["verify", "--memory", str(tmp_path)]) == 1
    assert capsys.readouterr().err == ("lychee-ray verify: RuntimeError: kaput second line "
                                       "(run with --debug for the traceback)\n")
    with pytest.raises(RuntimeError):
        cli_main.main(["verify", "--memory", str(tmp_path), "--debug"])


@pytest.mark.ray
def test_ray_build_on_a_pipe_prints_no_ray_lines_and_no_ansi(tmp_path):
    """A small build on its own local Ray (``--ray``: alone it would run in-process): only the project's
    lines (detected format, progress, summary)."""
    (tmp_path / "in.jsonl").write_text(EXAMPLE.read_text(encoding="utf-8"))
    p = clean(lychee("build", "--input", "in.jsonl", "--out", "store", "--llm", "rules", "--ray", cwd=tmp_path))
    assert p.returncode == 0, p.stderr
    noisy = [ln for ln in (p.stdout + p.stderr).splitlines() if RAY_LINE.search(ln)]
    assert not noisy, "\n".join(noisy)
    assert "[build] 2/2 conversations" in p.stderr


def test_quiet_ray_switches(monkeypatch):
    """What keeps Ray off the console (checked without starting Ray; the build above checks the result)."""
    import logging

    from lychee_ray.ray.runtime import QUIET_DRIVER_ENV, quiet_environment, ray_init_kwargs

    assert ray_init_kwargs(True) == {"ignore_reinit_error": True, "log_to_driver": False, "logging_level": logging.WARNING}
    assert ray_init_kwargs(False) == {"ignore_reinit_error": True, "log_to_driver": True}  # --verbose: Ray's defaults
    for k in (*QUIET_DRIVER_ENV, "RAY_COLOR_PREFIX"):
        monkeypatch.delenv(k, raising=False)
    quiet_environment(True)
    assert os.environ["RAY_BACKEND_LOG_LEVEL"] == "fatal"  # core_worker.cc lines (actor max_restarts)
    assert os.environ["RAY_COLOR_PREFIX"] == "0"  # pytest's output is not a terminal
    assert logging.getLogger("ray._private.authentication.authentication_token_setup").level == logging.ERROR
