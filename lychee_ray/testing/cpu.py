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


__all__ = ["CpuSampler", "descendants", "process_cpu"]
