"""The first hour's rough edges, each pinned (issue: the web inspector and the first hour): a CSV
given as JSONL is refused before anything starts; a command's default output is its results and at
most one short notice; an unknown or malformed ``--conversation`` is one line; the id repair shows
the id before and after; help, README and table/JSON output agree with the registry; a small build
or one with nothing to do starts no Ray; the evidence lines say when and, across conversations, where."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
from pathlib import Path

import pytest

from tests.cli.test_new_user import EXAMPLE, REPO, clean, lychee, one_line

# The progress display's lines ("[build] 2/2 conversations ..."): progress, not a notice.
PROGRESS = re.compile(r"^\[build\] ")


def notices(p: subprocess.CompletedProcess) -> list[str]:
    """stderr lines that are not the progress display."""
    return [ln for ln in p.stderr.splitlines() if ln.strip() and not PROGRESS.match(ln)]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, subprocess.CompletedProcess]:
    """The README's example built with no runner flag and no --llm: a small build, in-process."""
    tmp = tmp_path_factory.mktemp("first_hour")
    (tmp / "in.jsonl").write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    return tmp, lychee("build", "--input", "in.jsonl", "--out", "store", cwd=tmp)


@pytest.mark.subprocess
def test_a_csv_given_as_jsonl_is_refused_before_anything_starts(tmp_path):
    (tmp_path / "in.csv").write_text("id,text,user\n1,hello there,u1\n2,how are you,u2\n3,fine,u3\n")
    p = clean(lychee("build", "--input", "in.csv", "--format", "jsonl", "--out", "store", cwd=tmp_path, timeout=120))
    assert p.returncode == 2
    assert one_line(p) == ("lychee-ray build: in.csv looks like comma-separated text (CSV), not jsonl: give JSONL "
                           "input (docs/data-format.md) or the --format it is in")
    assert not (tmp_path / "store").exists()


def test_foreign_content_is_named_and_json_with_a_bad_first_line_is_not_refused(tmp_path):
    from lychee_ray.io.adapters import InputError, survey_input

    (tmp_path / "t.tsv").write_text("id\ttext\n1\thello\n")
    with pytest.raises(InputError, match="tab-separated text, not openai") as e:
        survey_input(tmp_path / "t.tsv", "openai")
    assert e.value.kind == "format_mismatch"
    (tmp_path / "p.jsonl").write_text("plain words\nmore words\n")
    with pytest.raises(InputError, match=r"plain text \(not JSON\), not parquet"):
        survey_input(tmp_path / "p.jsonl", "parquet")
    # a JSONL file whose first line is broken is the build's to report line by line
    (tmp_path / "b.jsonl").write_text("oops\n" + EXAMPLE.read_text(encoding="utf-8"))
    assert survey_input(tmp_path / "b.jsonl", "jsonl").conversations == 3


@pytest.mark.subprocess
def test_a_small_build_runs_in_process_with_one_notice_line(built):
    tmp, p = built
    assert p.returncode == 0, p.stderr
    clean(p)
    assert notices(p) == ["lychee-ray build: in.jsonl: 2 conversation(s) in 1 file(s), format jsonl (detected); "
                          "runner local, in-process: small build: 2 conversation(s), 4 turn(s) (--ray for Ray); "
                          "LLM backend: rules (no endpoint configured)"]
    assert "embedder" not in p.stderr and "INFO" not in p.stderr  # model loading is for --verbose
    assert json.loads((tmp / "store" / "manifest.json").read_text())["runner"] == "local"


@pytest.mark.subprocess
def test_a_re_run_with_nothing_to_build_starts_no_ray(built):
    tmp, _ = built
    p = clean(lychee("build", "--input", "in.jsonl", "--out", "store", cwd=tmp))
    assert p.returncode == 0
    assert "runner local, in-process: nothing to build" in notices(p)[0] and len(notices(p)) == 1
    assert re.search(r"^skipped \(already built\)\s+2$", p.stdout, re.M), p.stdout


@pytest.mark.subprocess
def test_query_prints_results_and_one_short_notice(built):
    tmp, _ = built
    p = clean(lychee("query", "--memory", "store", "--conversation", "demo-2", "What is the name of the cat?", cwd=tmp))
    assert p.returncode == 0, p.stderr
    assert notices(p) == ["lychee-ray: LLM backend: rules (offline heuristics, no LLM) — no endpoint configured "
                          "(OPENAI_BASE_URL or llm.base_url)"]
    assert p.stdout.startswith("Answer (extractive, quoted from memory): ") and "Pixel" in p.stdout
    # each evidence line says the day it was said
    assert re.search(r"^  1\.000 \w+ +\w+ +2024-01-02 \[1", p.stdout, re.M), p.stdout


@pytest.mark.subprocess
def test_an_unknown_or_malformed_conversation_is_one_line(built):
    tmp, _ = built
    p = clean(lychee("query", "--memory", "store", "--conversation", "26", "q?", cwd=tmp))  # no --llm: auto
    assert p.returncode == 2
    assert one_line(p) == "lychee-ray query: unknown conversation '26' — `lychee-ray list --memory store` shows the ids"
    p = clean(lychee("query", "--memory", "store", "--conversation", "demo\x07-2", "q?", cwd=tmp))
    assert p.returncode == 2
    line = one_line(p)
    assert line.startswith("lychee-ray query: argument --conversation: the id contains the control or formatting "
                           "character U+0007") and line.endswith("(see lychee-ray query --help)")


def test_evidence_across_conversations_names_their_turns_by_conversation():
    from lychee_ray.cli.query import evidence_line
    from lychee_ray.query.results import EvidenceItem

    e = EvidenceItem(id="r1", kind="record", conversation_id="demo-1", text="Ann  adopted\na cat.", type="event",
                     session_date="2024-01-02T09:00:00", source_turn_ids=["m3", "m4"], score=0.5, channels=["bm25"],
                     routes=[0], tokens=9)
    assert evidence_line(e, qualified=True) == "0.500 record  event      2024-01-02 [demo-1:m3,m4] (bm25) Ann adopted a cat."
    assert "[m3,m4]" in evidence_line(e, qualified=False)
    undated = e.model_copy(update={"session_date": None})
    assert " undated " in evidence_line(undated, qualified=False)


def test_id_repair_warning_shows_the_id_before_and_after(tmp_path):
    from lychee_ray.io.adapters import read_input

    row = {"conversation_id": "c\x1b[31m-1", "user_id": "u\x07", "sessions": [
        {"session_id": "\x07", "turns": [{"turn_id": "t\x002", "content": "hello there"}]}]}
    (tmp_path / "in.jsonl").write_text(json.dumps(row) + "\n")
    [item] = list(read_input("jsonl", tmp_path / "in.jsonl"))
    conv = item.conversation
    assert conv is not None and (conv.conversation_id, conv.user_id) == ("c-1", "u")
    assert conv.sessions[0].session_id == "session-1"  # nothing left of it: generated, as a missing one
    assert conv.sessions[0].turns[0].turn_id == "t2"
    repaired = [i.message for i in item.issues if "id repaired" in i.message]
    assert len(repaired) == 1
    assert repaired[0].endswith("[conversation_id, user_id, sessions.0.turns.0.turn_id]: "
                                "c\\x1b[31m-1 -> c-1; u\\x07 -> u; t\\x002 -> t2")
    assert not [i for i in item.issues if "control characters removed" in i.message]  # no "6 chars; 1 chars"


def test_help_names_every_registered_format(capsys):
    from lychee_ray.cli.main import main
    from lychee_ray.io.adapters import adapters

    for cmd in ("convert", "build"):
        with pytest.raises(SystemExit):
            main([cmd, "--help"])
        text = "".join(capsys.readouterr().out.split())  # (help wraps lines, also at hyphens)
        for a in adapters():
            assert a.name in text and "".join(a.title.split()) in text, (cmd, a.name)
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "LoCoMo / LongMemEval / JSONL" not in capsys.readouterr().out


def test_readme_query_row_names_user_and_search():
    row = next(ln for ln in (REPO / "README.md").read_text(encoding="utf-8").splitlines()
               if ln.startswith("| `lychee-ray query --memory"))
    assert "--user" in row and "--search" in row


@pytest.mark.subprocess
def test_verify_convert_and_dry_run_print_a_table_and_json_with_json(built, capsys):
    from lychee_ray.cli.main import main

    tmp, _ = built
    assert main(["verify", "--memory", str(tmp / "store")]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^conversations\s+2$", out, re.M) and out.rstrip().endswith("ok")
    assert main(["verify", "--memory", str(tmp / "store"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["ok"] is True
    args = ["convert", "--input", str(tmp / "in.jsonl"), "--out", str(tmp / "conv" / "c.jsonl")]
    assert main(args) == 0
    assert re.search(r"^conversations\s+2$", capsys.readouterr().out, re.M)
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["conversations"] == 2
    args = ["build", "--input", str(tmp / "in.jsonl"), "--out", str(tmp / "dry"), "--dry-run", "--llm", "rules"]
    assert main(args) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split()[:3] == ["conversation_id", "turns", "segments"] and "\nTOTAL " in out
    assert main([*args, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["total"]["conversations"] == 2


def test_runner_choice(tmp_path, monkeypatch, embedder):
    """Nothing to build or a small build: in-process; past the bounds or on a cluster: Ray."""
    from lychee_ray.api import build_memory
    from lychee_ray.config import load_config
    from lychee_ray.ingest.runner_choice import choose_runner

    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    src = tmp_path / "in.jsonl"
    src.write_text(EXAMPLE.read_text(encoding="utf-8"))
    cfg = load_config(env={})
    first = choose_runner(cfg, "jsonl", src, tmp_path / "store", "rules")
    assert (first.runner, first.reason, first.to_build, first.turns) == (
        "local", "small build: 2 conversation(s), 4 turn(s)", 2, 4)
    tight = load_config(env={}, sets=["build.local_max_conversations=1"])
    assert choose_runner(tight, "jsonl", src, tmp_path / "store", "rules").runner == "ray"
    assert choose_runner(load_config(env={}, sets=["build.local_max_turns=3"]), "jsonl", src, tmp_path / "s",
                         "rules").runner == "ray"
    build_memory(src, tmp_path / "store", cfg, llm="rules")
    again = choose_runner(tight, "jsonl", src, tmp_path / "store", "rules")  # even past the bounds: nothing to do
    assert (again.runner, again.reason) == ("local", "nothing to build")
    monkeypatch.setenv("RAY_ADDRESS", "127.0.0.1:6379")
    assert choose_runner(cfg, "jsonl", src, tmp_path / "store", "rules").runner == "ray"


def test_ray_start_up_says_which_stages_are_starting():
    from lychee_ray.ingest.run_progress import ProgressCounts
    from lychee_ray.ray.build_job import startup_note

    c = ProgressCounts()
    assert startup_note([], c) == ("starting the stages: 0/5 ready, waiting for decide, embed turns, build, embed memory, "
                                   "commit (loading the embedding model)")
    assert startup_note(["decide", "embed_turns", "embed_memory"], c) == (
        "starting the stages: 3/5 ready, waiting for build, commit")
    assert startup_note(["decide", "embed_turns", "build", "embed_memory", "commit"], c) == "stages ready, reading the input"
    c.decided(12)
    assert startup_note(["decide", "embed_turns", "build", "embed_memory", "commit"], c) == (
        "stages ready, 1 conversation(s) in the pipeline")


def test_one_line_usage_errors():
    from lychee_ray.cli.main import OneLineParser

    p = OneLineParser(prog="lychee-ray x")
    p.add_argument("--n", type=int, required=True)
    with pytest.raises(SystemExit) as e:
        p.parse_args(["--n", "two"])
    assert e.value.code == 2
    assert isinstance(p, argparse.ArgumentParser)
