"""One progress display for long jobs (build, eval): a bar with a known total on a terminal, plain
lines elsewhere, and an ETA only once enough work is done to estimate it honestly.

Layer 0 (next to :mod:`lychee_ray.logs`): the standard library and ``tqdm`` only. Thresholds come
from the caller (``ray.progress_*`` in the configuration); nothing here holds a default.
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass
from typing import IO, Any
from collections.abc import Callable

# Seconds between redraws of the terminal bar (a redraw may ask the caller for its detail text).
TTY_REFRESH_S = 0.5
# tqdm's format without its own remaining-time field: our ETA (or nothing) travels in the postfix.
_BAR_FORMAT = "{desc} {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}{postfix}]"
# ProgressDisplay.update's default: the ETA of its own item clock
_CLOCK: Any = object()


def is_terminal(stream: Any) -> bool:
    """True when ``stream`` is an interactive terminal (colours, bars and ``\\r`` are fine there)."""
    if os.environ.get("NO_COLOR") is not None and stream is not None:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # closed or replaced stream
        return False


@dataclass(frozen=True)
class EtaPolicy:
    """When an ETA may be shown: after ``min_done_fraction`` of the total (at least two items, so a
    rate exists) and ``min_elapsed_s`` seconds; the rate is measured from the first finished item,
    so start-up (Ray, model loading) does not inflate it."""

    min_done_fraction: float
    min_elapsed_s: float


class EtaClock:
    """Rate and remaining time of ``done``/``total`` items, or None while it would be a guess."""

    def __init__(self, policy: EtaPolicy) -> None:
        self.policy = policy
        self.t0 = time.perf_counter()
        self._first: tuple[float, int] | None = None  # (time, done) at the first progress

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    def remaining_s(self, done: int, total: int | None) -> float | None:
        """Seconds left, or None when the total is unknown or too little is done to tell."""
        now = time.perf_counter()
        if done > 0 and self._first is None:
            self._first = (now, done)
        if not total or done >= total:
            return 0.0 if total and done >= total else None
        if self._first is None or now - self.t0 < self.policy.min_elapsed_s:
            return None
        if done < max(2, self.policy.min_done_fraction * total):
            return None
        t1, d1 = self._first
        if done <= d1 or now <= t1:
            return None
        return (total - done) * (now - t1) / (done - d1)


class _StageRate:
    """One stage's progress: its first and latest worked units (with their times), how many times
    its work grew, and the units it has passed in any way."""

    def __init__(self) -> None:
        self.first: tuple[float, int] | None = None
        self.last: tuple[float, int] | None = None
        self.steps = 0
        self.passed = 0

    def observe(self, now: float, worked: int, passed: int) -> None:
        self.passed = passed
        if worked <= 0 or (self.last is not None and worked <= self.last[1]):
            return
        if self.first is None:
            self.first = (now, worked)
        self.last = (now, worked)
        self.steps += 1


class StagesEta:
    """Remaining time of work that flows through stages in order (a build's turns: embedded,
    segmented, encoded, …, committed), items of any size (conversations of 20 or 700 turns).

    Each stage's rate is its worked units over time, measured from its first worked unit (start-up
    and model loading do not count) to its latest — not to now: a stage that reports in lumps (a
    whole conversation at once) would look slower the longer it waits for its next lump, and its
    ETA would rise while it waits. A stage's time left is what it has not passed at that rate, less
    the time since its latest progress; the run's is the largest over the stages that can tell (the
    slowest stage, and the stages after it, decide when the run ends), and none while only stages
    that are through can tell (the time left is not nothing then). Units passed without work
    (skipped, failed conversations) shrink what is left without making a stage look faster. A stage
    can tell once ``min_done_fraction`` of the total has passed it, its work grew three times and
    ``min_elapsed_s`` seconds lie between its first and latest worked unit."""

    def __init__(self, policy: EtaPolicy) -> None:
        self.policy = policy
        self._stages: dict[str, _StageRate] = {}

    def observe(self, stage: str, worked: int, passed: int) -> None:
        """``stage`` has worked on ``worked`` units and passed ``passed`` (worked or not) so far."""
        self._stages.setdefault(stage, _StageRate()).observe(time.perf_counter(), worked, passed)

    def remaining_s(self, total: int | None) -> float | None:
        """Seconds left, or None while no stage can tell (or the total is unknown)."""
        if not total:
            return None
        now = time.perf_counter()
        lefts = [left for st in self._stages.values() if (left := self._left(st, total, now)) is not None]
        if not lefts or (not max(lefts) and any(st.passed < total for st in self._stages.values())):
            return None  # (only stages that are through can tell: the ones still working cannot yet)
        return max(lefts)

    def _left(self, st: _StageRate, total: int, now: float) -> float | None:
        if st.passed >= total:
            return 0.0
        if st.first is None or st.last is None or st.steps < 3 or st.passed < self.policy.min_done_fraction * total:
            return None
        (t1, w1), (t2, w2) = st.first, st.last
        if w2 <= w1 or t2 - t1 < max(self.policy.min_elapsed_s, 1e-9):
            return None
        return max(0.0, (total - st.passed) * (t2 - t1) / (w2 - w1) - (now - t2))


def format_seconds(s: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``."""
    s = int(round(s))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"


class ProgressDisplay:
    """Progress of ``total`` items: a tqdm bar on a terminal, else one plain line per ``interval_s``.

    ``update(done, detail)`` is cheap to call per item; ``close()`` prints the final state once.
    """

    def __init__(self, label: str, total: int | None, unit: str, *, interval_s: float, eta: EtaPolicy,
                 stream: IO[str] | None = None) -> None:
        self.label, self.total, self.unit, self.interval_s = label, total, unit, interval_s
        self.stream = stream if stream is not None else sys.stderr
        self.clock = EtaClock(eta)
        self.done = 0
        self._last_line: float | None = None  # the first update is shown at once
        self._closed = False
        self._bar = None
        if is_terminal(self.stream):
            from tqdm import tqdm

            self._bar = tqdm(total=total, desc=label, unit=f" {unit}", file=self.stream, bar_format=_BAR_FORMAT
                             if total else None, dynamic_ncols=True, leave=True, disable=False)

    def eta_text(self) -> str:
        left = self.clock.remaining_s(self.done, self.total)
        finished = bool(self.total and self.done >= self.total)
        return "" if left is None or finished else f"ETA {format_seconds(left)}"

    def update(self, done: int, detail: str | Callable[[], str] = "", force: bool = False,
               remaining_s: float | None | Callable[[], float | None] = _CLOCK) -> None:
        """Show ``done`` items finished; ``detail`` is a short status (or a function making it, called
        only when something is shown); ``remaining_s``: an ETA the caller measures (seconds, None =
        none yet; a function is called only when shown) instead of the item clock's."""
        self.done = done
        if remaining_s is _CLOCK:
            eta = self.eta_text()
        else:
            eta = ""  # (the caller's estimate is read below, only when a line is shown)
        now = time.perf_counter()
        wait = TTY_REFRESH_S if self._bar is not None else self.interval_s
        if not force and self._last_line is not None and now - self._last_line < wait:
            return
        self._last_line = now
        detail = detail() if callable(detail) else detail
        if remaining_s is not _CLOCK:
            left = remaining_s() if callable(remaining_s) else remaining_s
            finished = bool(self.total) and done >= (self.total or 0)
            eta = "" if left is None or finished else f"ETA {format_seconds(left)}"
        if self._bar is not None:
            self._bar.n = done
            self._bar.set_postfix_str(", ".join(x for x in (detail, eta) if x), refresh=False)
            self._bar.refresh()
            return
        of = f"/{self.total}" if self.total else ""
        parts = [f"[{self.label}] {done}{of} {self.unit}", detail, f"elapsed {format_seconds(self.clock.elapsed())}", eta]
        print(" ".join(p for p in parts if p), file=self.stream, flush=True)

    def close(self, detail: str = "") -> None:
        """Final state (printed once, whatever the interval)."""
        if self._closed:
            return
        self._closed = True
        if self._bar is not None:
            self.update(self.done, detail, force=True, remaining_s=None)
            self._bar.close()
        elif self.done or self._last_line is not None:
            self.update(self.done, detail, force=True, remaining_s=None)


__all__ = ["EtaClock", "EtaPolicy", "ProgressDisplay", "StagesEta", "format_seconds", "is_terminal"]
