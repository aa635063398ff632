"""The shared progress display: honest ETAs, plain lines without ANSI codes off a terminal."""

from __future__ import annotations

import io

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
