"""The shared progress display: honest ETAs, plain lines without ANSI codes off a terminal."""

from __future__ import annotations

import io

import pytest

from lychee_ray.progress import EtaClock, EtaPolicy, ProgressDisplay, format_seconds, is_terminal


def test_no_eta_before_enough_work(monkeypatch):
    now = [100.0]
    monkeypatch.setattr("lychee_ray.progress.time.perf_counter", lambda: now[0])
    clock = EtaClock(EtaPolicy(min_done_fraction=0.1, min_elapsed_s=5.0))
    now[0] = 130.0  # 30 s of start-up before the first item: not part of the rate
    assert clock.remaining_s(1, 100) is None  # one item: no rate yet
    now[0] = 131.0
    assert clock.remaining_s(5, 100) is None  # below 10 %
    now[0] = 136.0
    assert clock.remaining_s(11, 100) == (100 - 11) * 6.0 / 10  # rate from the first item: 10 items in 6 s
    assert clock.remaining_s(100, 100) == 0.0
    assert clock.remaining_s(3, None) is None


def test_plain_lines_on_a_pipe():
    out = io.StringIO()
    assert not is_terminal(out)
    p = ProgressDisplay("build", 10, "conversations", interval_s=3600, eta=EtaPolicy(0.1, 0.0), stream=out)
    p.update(1, "built 1")
    p.update(2, lambda: "never called before the interval")
    p.close("built 10")
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[build] 1/10 conversations built 1 elapsed 0s")
    assert lines[-1].startswith("[build] 2/10 conversations built 10")
    assert len(lines) == 2 and "\x1b" not in out.getvalue() and "\r" not in out.getvalue()


def test_format_seconds():
    assert [format_seconds(s) for s in (4.4, 65, 3720)] == ["4s", "1m05s", "1h02m"]


def test_turn_eta_predicts_the_real_finish_of_a_scripted_run(monkeypatch):
    """A scripted build: 30 s of start-up, resumed conversations skipped at once, then conversations
    of very different sizes (12 to 700 turns) committed at a steady 40 turns/s. Every ETA shown
    (after 10 % is done) predicts the real finish within 10 %; an ETA by conversation count would not."""
    import random

    from lychee_ray.ingest.run_progress import BuildProgress
    from lychee_ray.config import load_config

    now = [0.0]
    monkeypatch.setattr("lychee_ray.progress.time.perf_counter", lambda: now[0])
    rng = random.Random(7)
    sizes = [rng.choice([12, 24, 60, 300, 700]) for _ in range(60)]
    cfg = load_config(env={}, sets=["ray.progress_interval_s=1", "ray.progress_eta_min_done_fraction=0.1",
                                    "ray.progress_eta_min_elapsed_s=5"])
    out = io.StringIO()
    prog = BuildProgress(len(sizes), cfg, stream=out)
    prog.start("starting")
    for n in sizes:
        prog.decided(n)
    now[0] = 30.0
    for n in sizes[:5]:  # stored by an earlier run: skipped, no work
        prog.finished("skipped", n)
    shown: list[tuple[float, float]] = []
    by_count: list[tuple[float, float]] = []
    first_t, first_done = None, 0
    for i, n in enumerate(sizes[5:], start=6):
        now[0] += n / 40.0
        prog.finished("built", n)
        eta = prog.remaining_s()
        if eta is not None and 0 < eta:
            shown.append((now[0], now[0] + eta))
        if first_t is None:
            first_t, first_done = now[0], i
        elif i > first_done:
            by_count.append((now[0], now[0] + (len(sizes) - i) * (now[0] - first_t) / (i - first_done)))
    finish = now[0]
    prog.close()
    assert len(shown) > 20
    worst = max(abs(pred - finish) / (finish - t) for t, pred in shown if finish - t > 10)
    assert worst <= 0.10, worst
    worst_by_count = max(abs(pred - finish) / (finish - t) for t, pred in by_count if finish - t > 10)
    assert worst_by_count > 2 * worst  # sizes differ: counting conversations misjudges the rest
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("[build] 0/60 conversations turns 0 ") and "starting" in lines[0]
    assert lines[-1].startswith("[build] 60/60 conversations") and f"turns {sum(sizes):,}/{sum(sizes):,}" in lines[-1]
    assert "ETA" not in lines[-1]


def test_build_progress_shows_at_once_and_on_time():
    """The first line appears before anything is done; the ticker prints on time with nothing new."""
    import time as _time

    from lychee_ray.ingest.run_progress import BuildProgress
    from lychee_ray.config import load_config

    cfg = load_config(env={}, sets=["ray.progress_interval_s=0.05"])
    out = io.StringIO()
    prog = BuildProgress(3, cfg, stream=out)
    prog.start("loading the embedding model")
    assert out.getvalue().startswith("[build] 0/3 conversations turns 0 (built 0, skipped 0, failed 0) loading")
    prog.ticking()
    _time.sleep(0.5)
    prog.close()
    assert len(out.getvalue().splitlines()) >= 3


class _Timed(io.StringIO):
    """A stream that notes when each line was written."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[tuple[float, str]] = []

    def write(self, s: str) -> int:
        import time as _time

        for line in s.splitlines():
            if line.strip():
                self.lines.append((_time.perf_counter(), line))
        return super().write(s)


@pytest.mark.heavy
def test_local_build_progress_eta_against_the_real_finish(tmp_path):
    """A real in-process build paced by a fake LLM (fixed latency per segment): progress starts at
    once, counts committed conversations and turns, and each ETA it shows lands near the real finish."""
    import re
    import time as _time

    from lychee_ray.ingest.context import make_context
    from lychee_ray.ingest.runner import run_local_build
    from lychee_ray.config import load_config
    from lychee_ray.testing.fake_llm import encoder_reply
    from lychee_ray.testing.openai_server import OpenAIServer
    from lychee_ray.testing.synthetic import synthetic_conversation
    from tests.reliability.test_bad_input import HashEmbedder

    src = tmp_path / "in.jsonl"
    convs = [synthetic_conversation(i, seed=9, sessions=1 + i % 3, topics_per_session=2) for i in range(24)]
    src.write_text("\n".join(c.model_dump_json() for c in convs) + "\n")
    stream = _Timed()
    with OpenAIServer(handler=encoder_reply, latency_s=0.15) as srv:
        cfg = load_config(env={}, sets=[f"llm.base_url={srv.base_url}", "llm.api_key=test", "build.conversations_in_flight=2",
                                        "ray.progress_interval_s=0.2", "ray.progress_eta_min_done_fraction=0.25",
                                        "ray.progress_eta_min_elapsed_s=2"])
        t0 = _time.perf_counter()
        s = run_local_build(cfg, "jsonl", src, tmp_path / "st", backend="openai", ctx=make_context(cfg, "openai", HashEmbedder()),
                            progress=True, progress_stream=stream)
        end = _time.perf_counter()
    assert s.built == 24
    first_t, first = stream.lines[0]
    assert first_t - t0 < 2.0 and first.startswith("[build] 0/24 conversations")
    last = stream.lines[-1][1]
    assert last.startswith("[build] 24/24 conversations") and f"turns {sum(c.num_turns for c in convs)}/" in last
    etas = [(t, int(m.group(1) or 0) * 60 + int(m.group(2))) for t, line in stream.lines
            if (m := re.search(r"ETA (?:(\d+)m)?(\d+)s", line))]
    assert etas, stream.getvalue()
    for t, eta in etas:
        # LLM-paced: the rest of the run takes about what the ETA says (rounded to seconds, machine noise)
        assert abs((t + eta) - end) <= 0.5 * (end - t) + 1.5, (eta, end - t, "\n".join(f"{t - t0:.2f} {line}" for t, line in stream.lines))
