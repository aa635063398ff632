"""CPU seconds of groups of processes, including processes that ended (benchmarks).

Why sampling: a process's CPU time is readable only while it lives, and its parent's "children"
times count it only if the parent waited for it. Ray's raylet does not (an actor that Ray Data
kills at the end of a stage vanishes with its CPU time: a test measured 3 s lost per killed
actor), so summing the live processes at the end undercounts a Ray job badly. The sampler reads
every process of every group every ``interval_s`` and keeps each one's last reading; a process that
ended between two readings loses at most ``interval_s`` of CPU.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path
from collections.abc import Callable

# /proc/<pid>/stat after the command name: utime, stime are fields 14-15, starttime 22 (1-based)
_UTIME, _STIME, _START = 11, 12, 19


def process_cpu(pid: int) -> tuple[int, float] | None:
    """(start time in ticks, CPU seconds of the process itself) from ``/proc``, None when gone."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        tick = os.sysconf("SC_CLK_TCK")
        return int(fields[_START]), (int(fields[_UTIME]) + int(fields[_STIME])) / tick
    except (OSError, IndexError, ValueError):
        return None


class CpuSampler:
    """CPU seconds by group, from ``groups()`` (group name → process ids) read every ``interval_s``,
    counted from when the sampler starts (``with CpuSampler(...) as s: ...; s.totals()``)."""

    def __init__(self, groups: Callable[[], dict[str, list[int]]], interval_s: float = 0.5) -> None:
        self.groups = groups
        self.interval_s = interval_s
        self._last: dict[tuple[str, int, int], float] = {}  # (group, pid, start) -> CPU seconds
        self._base: dict[tuple[str, int, int], float] = {}  # readings when the sampler started
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="cpu-sampler", daemon=True)

    def sample(self) -> None:
        """Read every process of every group once."""
        for name, pids in self.groups().items():
            for pid in pids:
                got = process_cpu(pid)
                if got is not None:
                    with self._lock:
                        self._last[(name, pid, got[0])] = got[1]

    def totals(self) -> dict[str, float]:
        """CPU seconds of every process seen so far, by group (each process's last reading)."""
        out: dict[str, float] = {}
        with self._lock:
            for key, sec in self._last.items():
                out[key[0]] = out.get(key[0], 0.0) + sec - self._base.get(key, 0.0)
        return {k: round(v, 2) for k, v in out.items()}

    def _run(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def __enter__(self) -> CpuSampler:
        self.sample()
        with self._lock:
            self._base = dict(self._last)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()


def descendants(root: int, exclude: set[int] | None = None) -> list[int]:
    """``root`` and its descendants (from ``/proc``), less ``exclude`` and theirs."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry.name}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo, skip = [], [root], exclude or set()
    while todo:
        pid = todo.pop()
        if pid in skip:
            continue
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


# Ray's own processes, by a word of their command line (in this order: a worker's names the raylet)
_DAEMONS = (("gcs_server", "gcs_server"), ("raylet", "raylet"), ("dashboard/agent.py", "dashboard_agent"),
            ("runtime_env/agent", "runtime_env_agent"), ("log_monitor", "log_monitor"), ("monitor.py", "monitor"),
            ("dashboard", "dashboard"))


class ProcessLabels:
    """What each process is, for a CPU breakdown of a Ray job: ``ray::<Actor or task>`` for a worker
    (its process title; the method it runs now and ``IDLE`` are dropped, so a worker keeps the label
    of the actor it became), the daemon's name for Ray's own processes (``raylet``, ``gcs_server``,
    ...), ``driver`` for ``driver_pid``. A label, once specific, is kept: a process's CPU time is read
    until it ends, and its title changes as it works."""

    def __init__(self, driver_pid: int) -> None:
        self.driver_pid = driver_pid
        self._labels: dict[int, str] = {}

    def observe(self, pid: int) -> None:
        """Read ``pid``'s command line now and keep its label once it is specific."""
        if pid in self._labels:
            return
        label = self._read(pid)
        if label is not None:
            self._labels[pid] = label

    def label(self, pid: int) -> str:
        """The kept label, or ``other`` (a process never seen with a specific title)."""
        return self._labels.get(pid, "other")

    def _read(self, pid: int) -> str | None:
        if pid == self.driver_pid:
            return "driver"
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            return None
        return command_label(cmd)


def command_label(cmd: str) -> str | None:
    """The label of a process by its command line (see :class:`ProcessLabels`); None: not specific yet."""
    m = re.match(r"ray::(\S+)", cmd)
    if m:
        # the method it runs now: MapWorker(...).submit -> MapWorker(...), x:_StatsActor.__init__ -> x:_StatsActor
        name = re.sub(r"\.[A-Za-z_]\w*$", "", m.group(1))
        return None if name == "IDLE" else f"ray::{name}"
    if "default_worker.py" in cmd or "setup_worker.py" in cmd:
        return None  # a worker before its title is set
    return next((label for needle, label in _DAEMONS if needle in cmd), None)


def sample_by_process(root: int, labels: ProcessLabels) -> dict[str, list[int]]:
    """:class:`CpuSampler` groups: ``root``'s process tree, one group per process (observed by ``labels``)."""
    out: dict[str, list[int]] = {}
    for pid in descendants(root):
        labels.observe(pid)
        out[str(pid)] = [pid]
    return out


def totals_by_label(totals: dict[str, float], labels: ProcessLabels) -> dict[str, float]:
    """Per-process totals (groups of :func:`sample_by_process`) summed by label, largest first."""
    out: dict[str, float] = {}
    for pid, sec in totals.items():
        key = labels.label(int(pid))
        out[key] = out.get(key, 0.0) + sec
    return {k: round(v, 2) for k, v in sorted(out.items(), key=lambda kv: -kv[1])}


__all__ = ["CpuSampler", "ProcessLabels", "command_label", "descendants", "process_cpu", "sample_by_process", "totals_by_label"]
