"""A build's progress in turns through its stages: reported per stage (the encode stage segment by
segment) in an in-process build, shown in the line with an ETA from the stages; a re-run with
nothing to build loads no model; the command's first line names the runner."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from lychee_ray.config import load_config
from lychee_ray.embed.base import embedder_name
from lychee_ray.ingest import runner
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.run_progress import LOADING_MODEL_NOTE, BuildProgress
from lychee_ray.ingest.runner import run_local_build_items
from lychee_ray.ingest.stages.turn_report import StageTurns
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store import StoreReader
from lychee_ray.names import BUILD_STAGES, EMBED_MEMORY_STAGE, EMBED_TURNS_STAGE, ENCODE_STAGE
from lychee_ray.testing.synthetic import synthetic_conversation
from tests.reliability.test_bad_input import HashEmbedder


class ConfiguredHashEmbedder(HashEmbedder):
    """The cheap hashing embedder under the configured model's name, so that a build context made
    with it has the fingerprint a build plans before loading any model."""

    name = embedder_name(load_config(env={}).embedding)


def _items(conv) -> list[AdapterItem]:
    return [AdapterItem(file="test", line=1, conversation=conv)]


def _record(monkeypatch) -> list[StageTurns]:
    """Every stage report the build's progress display receives, in order."""
    events: list[StageTurns] = []
    advanced, finished = BuildProgress.advanced, BuildProgress.finished

    def on_advanced(self, reports):
        events.extend(reports)
        advanced(self, reports)

    def on_finished(self, status, turns, settled=None):
        events.extend(settled or [])
        finished(self, status, turns, settled)

    monkeypatch.setattr(BuildProgress, "advanced", on_advanced)
    monkeypatch.setattr(BuildProgress, "finished", on_finished)
    return events


def test_one_conversation_moves_through_the_stages_segment_by_segment(tmp_path, monkeypatch):
    """Encoding reports each segment; the embedding stages each call of ``embedding.progress_texts`` texts."""
    cfg = load_config(env={}, sets=["ray.progress_interval_s=3600", "embedding.progress_texts=8"])
    conv = synthetic_conversation(0, seed=3, sessions=3, topics_per_session=2)
    events = _record(monkeypatch)
    out = io.StringIO()
    s = run_local_build_items(cfg, _items(conv), tmp_path / "st", backend="rules",
                              ctx=make_context(cfg, "rules", ConfiguredHashEmbedder()), progress=True, total=1,
                              progress_stream=out)
    assert s.built == 1
    n = conv.num_turns
    # every stage passes every turn, with work
    for stage in BUILD_STAGES:
        mine = [e for e in events if e.stage == stage]
        assert sum(e.turns for e in mine) == n and all(e.worked for e in mine), (stage, mine)
    # the encode stage reports each segment as it is encoded (not the conversation at its commit)
    segments = StoreReader(tmp_path / "st").load(conv.conversation_id).segments.to_pylist()
    assert len(segments) >= 3
    assert [e.turns for e in events if e.stage == ENCODE_STAGE] == [len(r["turn_ids"]) for r in segments]
    # turn vectors: one text per turn, 8 per model call
    assert [e.turns for e in events if e.stage == EMBED_TURNS_STAGE] == [8] * (n // 8) + ([n % 8] if n % 8 else [])
    assert len([e for e in events if e.stage == EMBED_MEMORY_STAGE]) > 1
    # in pipeline order: a stage's first report comes after the one before it started
    firsts = [next(i for i, e in enumerate(events) if e.stage == stage) for stage in BUILD_STAGES]
    assert firsts == sorted(firsts)
    last = out.getvalue().splitlines()[-1]
    assert f"turns {n}/{n}" in last and f"embedded {n}, segmented {n}, encoded {n}, records embedded {n}" in last


def test_the_line_shows_turns_per_stage_and_an_eta_from_them(monkeypatch):
    """One long conversation (60 turns) encoded 6 turns every 2 s: the line counts the turns past
    each stage while nothing is committed, and the ETA comes from the encode stage's rate."""
    now = [0.0]
    monkeypatch.setattr("lychee_ray.progress.time.perf_counter", lambda: now[0])
    cfg = load_config(env={}, sets=["ray.progress_interval_s=3600", "ray.progress_eta_min_done_fraction=0.1",
                                    "ray.progress_eta_min_elapsed_s=1"])
    prog = BuildProgress(1, cfg, stream=io.StringIO())
    prog.decided(60)
    now[0] = 30.0  # model loading: not part of any rate
    prog.advanced([StageTurns("embed_turns", 60), StageTurns("segment", 60)])
    assert prog.remaining_s() is None  # only stages that are through can tell: no "ETA 0s"
    for _ in range(4):
        now[0] += 2.0
        prog.advanced([StageTurns("encode", 6)])
    assert "turns 0/60 (built 0, skipped 0, failed 0) · embedded 60, segmented 60, encoded 24, records embedded 0" in prog.line()
    # 18 turns in 6 s since the first segment: 36 turns left at 3 turns/s
    assert prog.remaining_s() == pytest.approx(12.0)
    now[0] += 1.0  # waiting for the next segment: the ETA counts down, it does not rise
    assert prog.remaining_s() == pytest.approx(11.0)


def test_a_re_run_with_nothing_to_build_loads_no_model(tmp_path, monkeypatch):
    """The models are loaded when the first conversation needs building: the phase says so while
    they load and not after; a re-run of the built input decides everything without them."""
    cfg = load_config(env={}, sets=["ray.progress_interval_s=3600"])
    conv = synthetic_conversation(1, seed=3, sessions=2, topics_per_session=2)
    made: list[str] = []

    def counting_context(cfg_, backend):
        made.append(backend)
        return make_context(cfg_, backend, ConfiguredHashEmbedder())

    monkeypatch.setattr(runner, "make_context", counting_context)
    out = io.StringIO()
    first = run_local_build_items(cfg, _items(conv), tmp_path / "st", backend="rules", progress=True, total=1,
                                  progress_stream=out)
    assert first.built == 1 and made == ["rules"]
    lines = out.getvalue().splitlines()
    loading = [i for i, line in enumerate(lines) if LOADING_MODEL_NOTE in line]
    assert loading and loading[-1] < len(lines) - 1  # shown while loading, gone once loaded
    assert all(LOADING_MODEL_NOTE not in line for line in lines[loading[-1] + 1:])
    out = io.StringIO()
    again = run_local_build_items(cfg, _items(conv), tmp_path / "st", backend="rules", progress=True, total=1,
                                  progress_stream=out)
    assert (again.built, again.skipped) == (0, 1)
    assert made == ["rules"]  # no second context: no model loaded
    assert LOADING_MODEL_NOTE not in out.getvalue() and "encoded" not in out.getvalue()


def test_the_first_line_of_build_names_the_runner(tmp_path, monkeypatch, capsys):
    from lychee_ray.cli import build as build_cmd
    from lychee_ray.cli.main import main
    from lychee_ray.ingest.outcomes import BuildSummary
    from lychee_ray.ingest.runner_choice import RunnerChoice

    src = Path(__file__).resolve().parents[2] / "docs" / "examples" / "conversations.jsonl"
    monkeypatch.setattr(build_cmd, "run_local_build", lambda *a, **kw: BuildSummary())
    for flags, words in ((["--local"], "runner local, in-process (--local)"),
                         ([], "runner local, in-process: small build: 2 conversation(s), 4 turn(s) (--ray for Ray)")):
        main(["build", "--input", str(src), "--out", str(tmp_path / "st"), "--llm", "rules", *flags])
        first = capsys.readouterr().err.splitlines()[0]
        assert first.startswith("lychee-ray build: ") and words in first, first
    assert build_cmd.runner_words(False, None) == "runner ray (--ray)"
    assert build_cmd.runner_words(False, RunnerChoice("ray", "more than 16 conversation(s) or 2,000 turn(s) to build",
                                                      17, 900)) == (
        "runner ray: more than 16 conversation(s) or 2,000 turn(s) to build (--local for in-process)")
    assert build_cmd.runner_words(False, RunnerChoice("ray", "RAY_ADDRESS is set")) == "runner ray: RAY_ADDRESS is set"
