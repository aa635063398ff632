"""Progress of a build run as a person reads it, the same for ``--local``, the Ray job and ``eval``.

It counts conversations and turns **committed** (a conversation is done when its outcome is final:
its generation committed, or skipped, or quarantined) and, before that, the turns that passed each
stage (embedded, segmented, encoded — segment by segment, so one long conversation moves too —,
records embedded: ingest/stages/turn_report.py), with what the run is doing while nothing moves
yet (starting Ray, loading the embedding model). The first line appears when the run starts, then
one per ``ray.progress_interval_s`` (a terminal bar redraws faster), whether or not anything moved
meanwhile. The ETA is by turns through the stages (:class:`~lychee_ray.progress.StagesEta`: the
slowest stage decides), shown only once enough is done to tell.

Turns in all are known only as conversations are decided: until every conversation is, the total is
estimated from the mean size of those seen (``est.`` in the line).
"""

from __future__ import annotations

import threading
from dataclasses import asdict, dataclass, field
from typing import IO, Any
from collections.abc import Callable

from lychee_ray.config import LycheeConfig
from lychee_ray.ingest.stages.turn_report import StageTurns
from lychee_ray.names import BUILD_STAGES
from lychee_ray.progress import EtaPolicy, ProgressDisplay, StagesEta

# What the line calls each stage's count (the commit's is the line's ``turns`` count).
STAGE_WORDS = {"embed_turns": "embedded", "segment": "segmented", "encode": "encoded",
               "embed_memory": "records embedded"}
# The local run's phases before its stages move: deciding what to build, then (only when something
# is to build) making its build context.
READING_NOTE = "reading the input"
LOADING_MODEL_NOTE = "loading the embedding model"


@dataclass
class ProgressCounts:
    """Counters of one run (plain numbers: the Ray job keeps them in an actor)."""

    seen: int = 0  # conversations decided
    seen_turns: int = 0
    done: dict[str, int] = field(default_factory=lambda: {"built": 0, "skipped": 0, "failed": 0})
    done_turns: int = 0  # turns of the conversations done (any status)
    built_turns: int = 0
    passed: dict[str, int] = field(default_factory=dict)  # stage -> turns that passed it (worked or not)
    worked: dict[str, int] = field(default_factory=dict)  # stage -> turns it worked on

    def decided(self, turns: int, stored: list[StageTurns] | None = None) -> None:
        """A conversation of ``turns`` turns decided; ``stored``: an increment's stored turns."""
        self.seen += 1
        self.seen_turns += turns
        self.advanced(stored or [])

    def advanced(self, reports: list[StageTurns]) -> None:
        for stage, turns, worked in reports:
            self.passed[stage] = self.passed.get(stage, 0) + turns
            if worked:
                self.worked[stage] = self.worked.get(stage, 0) + turns

    def finished(self, status: str, turns: int, settled: list[StageTurns] | None = None) -> None:
        """A conversation's outcome; ``settled``: what its stages had left (None: it passed every
        stage at once, with work when built)."""
        self.done[status] = self.done.get(status, 0) + 1
        self.done_turns += turns
        if status == "built":
            self.built_turns += turns
        if settled is None:
            settled = [StageTurns(stage, turns, status == "built") for stage in BUILD_STAGES]
        self.advanced(settled)

    @property
    def moving(self) -> bool:
        """A stage has worked on turns (from then on the stage counts tell what the run does)."""
        return any(self.worked.values())

    @property
    def done_total(self) -> int:
        return sum(self.done.values())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ProgressCounts:
        return cls(**d)


class BuildProgress:
    """The display of one build run: ``decided`` / ``advanced`` / ``finished`` as conversations go
    (any thread), or :meth:`replace` with counts kept elsewhere; :meth:`ticking` prints on time
    meanwhile."""

    def __init__(self, total: int | None, cfg: LycheeConfig, *, label: str = "build", stream: IO[str] | None = None,
                 detail: Callable[[], str] | None = None) -> None:
        rc = cfg.ray
        policy = EtaPolicy(rc.progress_eta_min_done_fraction, rc.progress_eta_min_elapsed_s)
        self.total = total
        self.counts = ProgressCounts()
        self.display = ProgressDisplay(label, total, "conversations", interval_s=rc.progress_interval_s,
                                       stream=stream, eta=policy)
        self.eta = StagesEta(policy)
        self.detail = detail
        self.note = ""  # what the run is doing while no stage moves ("starting Ray", ...); "" once it does
        self._lock = threading.Lock()  # the counts
        self._show_lock = threading.Lock()  # the display (the ticker thread and the run's threads)
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None

    # -- counting -------------------------------------------------------------------------------
    def decided(self, turns: int, stored: list[StageTurns] | None = None) -> None:
        with self._lock:
            self.counts.decided(turns, stored)
            self._observe()

    def advanced(self, reports: list[StageTurns]) -> None:
        """Turns passed stages (a :data:`~lychee_ray.ingest.stages.turn_report.TurnSink`)."""
        with self._lock:
            self.counts.advanced(reports)
            self._observe()

    def finished(self, status: str, turns: int, settled: list[StageTurns] | None = None) -> None:
        with self._lock:
            self.counts.finished(status, turns, settled)
            self._observe()
        self.show()

    def replace(self, counts: ProgressCounts) -> None:
        """Counts kept elsewhere (the Ray job's progress actor)."""
        with self._lock:
            self.counts = counts
            self._observe()

    def _observe(self) -> None:
        c = self.counts
        for stage in BUILD_STAGES:
            self.eta.observe(stage, c.worked.get(stage, 0), c.passed.get(stage, 0))

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
        total, _ = self.total_turns()
        if self.total is not None and self.counts.done_total >= self.total:
            return 0.0
        return self.eta.remaining_s(total)

    def stages_text(self) -> str:
        """Turns past each stage before the commit (``embedded 2,100, segmented 1,800, …``), once any moved."""
        c = self.counts
        if not c.moving:
            return ""
        total, _ = self.total_turns()
        cap = total if total else None
        counts = [(word, c.passed.get(stage, 0)) for stage, word in STAGE_WORDS.items()]
        return "· " + ", ".join(f"{word} {min(n, cap) if cap else n:,}" for word, n in counts)

    def line(self) -> str:
        """The status after ``done/total conversations`` (turns committed, outcomes, turns past each
        stage, the run's phase, the caller's detail)."""
        c = self.counts
        total, est = self.total_turns()
        of = f"/{total:,}{' est.' if est else ''}" if total else ""
        parts = [f"turns {c.done_turns:,}{of}",
                 f"(built {c.done['built']}, skipped {c.done['skipped']}, failed {c.done['failed']})",
                 self.stages_text(), self.note]
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
        self.note = ""  # the last line says what was done, not a phase
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


__all__ = ["LOADING_MODEL_NOTE", "READING_NOTE", "STAGE_WORDS", "BuildProgress", "ProgressCounts"]
