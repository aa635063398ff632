"""Progress of a build run as a person reads it, the same for ``--local``, the Ray job and ``eval``.

What it counts is what is **committed** (a conversation is done when its outcome is final: its
generation committed, or skipped, or quarantined), in conversations and in turns; the first line
appears when the run starts, then one per ``ray.progress_interval_s`` (a terminal bar redraws
faster), whether or not anything finished meanwhile; the ETA is by turns
(:class:`~lychee_ray.progress.WorkEta`), shown only once enough is done to tell.

Turns in all are known only as conversations are decided: until every conversation is, the total is
estimated from the mean size of those seen (``est.`` in the line).
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import IO, Any
from collections.abc import Callable

from lychee_ray.config import LycheeConfig
from lychee_ray.progress import EtaPolicy, ProgressDisplay, WorkEta


@dataclass
class ProgressCounts:
    """Counters of one run (plain numbers: the Ray job keeps them in an actor)."""

    seen: int = 0  # conversations decided
    seen_turns: int = 0
    done: dict[str, int] = field(default_factory=lambda: {"built": 0, "skipped": 0, "failed": 0})
    done_turns: int = 0  # turns of the conversations done (any status)
    built_turns: int = 0

    def decided(self, turns: int) -> None:
        self.seen += 1
        self.seen_turns += turns

    def finished(self, status: str, turns: int) -> None:
        self.done[status] = self.done.get(status, 0) + 1
        self.done_turns += turns
        if status == "built":
            self.built_turns += turns

    @property
    def done_total(self) -> int:
        return sum(self.done.values())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProgressCounts:
        return cls(**d)


class BuildProgress:
    """The display of one build run: ``decided`` / ``finished`` as conversations go (any thread),
    or :meth:`replace` with counts kept elsewhere; :meth:`ticking` prints on time meanwhile."""

    def __init__(self, total: int | None, cfg: LycheeConfig, *, label: str = "build", stream: IO[str] | None = None,
                 detail: Callable[[], str] | None = None) -> None:
        rc = cfg.ray
        policy = EtaPolicy(rc.progress_eta_min_done_fraction, rc.progress_eta_min_elapsed_s)
        self.total = total
        self.counts = ProgressCounts()
        self.display = ProgressDisplay(label, total, "conversations", interval_s=rc.progress_interval_s,
                                       stream=stream, eta=policy)
        self.eta = WorkEta(policy)
        self.detail = detail
        self.note = ""  # what the run is doing before anything is done ("starting Ray", ...)
        self._lock = threading.Lock()  # the counts
        self._show_lock = threading.Lock()  # the display (the ticker thread and the run's threads)
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- counting -------------------------------------------------------------------------------
    def decided(self, turns: int) -> None:
        with self._lock:
            self.counts.decided(turns)

    def finished(self, status: str, turns: int) -> None:
        with self._lock:
            self.counts.finished(status, turns)
        self.show()

    def replace(self, counts: ProgressCounts) -> None:
        """Counts kept elsewhere (the Ray job's progress actor)."""
        with self._lock:
            self.counts = counts

    # -- what is shown --------------------------------------------------------------------------
    def total_turns(self) -> tuple[int | None, bool]:
        """(turns in all, estimated?): exact once every conversation is decided."""
        c = self.counts
        if self.total is None:
            return (c.seen_turns or None), True
        if c.seen >= self.total:
            return c.seen_turns, False
        if not c.seen:
            return None, True
        return round(c.seen_turns + (self.total - c.seen) * c.seen_turns / c.seen), True

    def remaining_s(self) -> float | None:
        c = self.counts
        total, _ = self.total_turns()
        return self.eta.remaining_s(c.built_turns, c.done_turns, total, c.done.get("built", 0))

    def line(self) -> str:
        """The status after ``done/total conversations`` (turns, outcomes, the caller's detail)."""
        c = self.counts
        total, est = self.total_turns()
        of = f"/{total:,}{' est.' if est else ''}" if total else ""
        parts = [f"turns {c.done_turns:,}{of}",
                 f"(built {c.done['built']}, skipped {c.done['skipped']}, failed {c.done['failed']})"]
        if self.note and not c.done_total:
            parts.append(self.note)
        extra = self.detail() if self.detail is not None else ""
        return " ".join(p for p in (*parts, extra) if p)

    def show(self, force: bool = False) -> None:
        with self._show_lock:
            self.display.update(self.counts.done_total, self.line, force=force, remaining_s=self.remaining_s)

    def start(self, note: str = "") -> None:
        """The first line, at once."""
        self.note = note
        self.show(force=True)

    def close(self) -> None:
        self.stop_ticking()
        with self._show_lock:
            self.display.done = self.counts.done_total
            self.display.close(self.line())

    # -- printing on time -----------------------------------------------------------------------
    def ticking(self, poll: Callable[[], None] | None = None) -> BuildProgress:
        """Start a thread that (after ``poll()``, e.g. reading the Ray job's counters) shows the
        progress every interval; :meth:`close` stops it."""
        interval = min(self.display.interval_s, 1.0)

        def run() -> None:
            while not self._stop.wait(interval):
                if poll is not None:
                    try:
                        poll()
                    except Exception:  # noqa: BLE001 — progress must never break the run it reports
                        pass
                self.show()

        self._ticker = threading.Thread(target=run, name="build-progress", daemon=True)
        self._ticker.start()
        return self

    def stop_ticking(self) -> None:
        self._stop.set()
        if self._ticker is not None:
            self._ticker.join(timeout=5)
            self._ticker = None


__all__ = ["BuildProgress", "ProgressCounts"]
