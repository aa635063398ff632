"""What makes ``lychee-ray eval`` resumable: answer parts per variant and the small run state.

Finished answers are appended to ``answers/<variant>/`` in Parquet parts; a re-run keeps the latest
row per question id whose variant key matches (configuration, store fingerprint, backend, judge
model) and redoes failed ones. ``state.json`` keeps build and query wall times and store locations.
"""

from __future__ import annotations

import json
import logging
import os
import threading
import time
import uuid
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable, Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from lychee_ray.eval.setup.layout import ANSWER_PART_GLOB, RunLayout
from lychee_ray.eval.setup.rows import ANSWER_SCHEMA, AnswerRow

log = logging.getLogger(__name__)

# Characters of a random suffix that keep part names unique across concurrent writers.
PART_SUFFIX_CHARS = 8


class RunState:
    """``state.json``: build and query wall times and store locations; rewritten atomically."""

    def __init__(self, run_dir: Path) -> None:
        self.path = RunLayout(run_dir).state_path
        self.data: dict[str, Any] = {"stores": {}, "variants": {}}
        if self.path.exists():
            try:
                self.data = json.loads(self.path.read_text(encoding="utf-8"))
            except json.JSONDecodeError:
                log.warning("unreadable %s; starting a fresh state", self.path)
        self.data.setdefault("stores", {})
        self.data.setdefault("variants", {})
        self._lock = threading.Lock()

    def save(self) -> None:
        """Write the state (readers see the old or the new file, never a mix)."""
        with self._lock:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(f".state.{uuid.uuid4().hex}.tmp")
            tmp.write_text(json.dumps(self.data, indent=1, sort_keys=True), encoding="utf-8")
            os.replace(tmp, self.path)

    def store(self, key: str) -> dict[str, Any]:
        """The mutable state entry of one store."""
        return self.data["stores"].setdefault(key, {})

    def variant(self, name: str, key: str) -> dict[str, Any]:
        """The mutable state entry of one variant (reset when its variant key changed)."""
        v = self.data["variants"].get(name)
        if v is None or v.get("key") != key:  # another configuration: its timings do not apply
            v = self.data["variants"][name] = {"key": key, "query_wall_s": 0.0}
        return v


def answers_dir(run_dir: Path, variant: str) -> Path:
    """Where the answer parts of ``variant`` live."""
    return RunLayout(run_dir).answers_dir(variant)


def write_part(run_dir: Path, variant: str, rows: Sequence[AnswerRow | dict[str, Any]]) -> Path | None:
    """Append ``rows`` as one new answer part (atomically); None when there are none."""
    if not rows:
        return None
    d = answers_dir(run_dir, variant)
    d.mkdir(parents=True, exist_ok=True)
    name = f"part-{int(time.time() * 1000)}-{uuid.uuid4().hex[:PART_SUFFIX_CHARS]}.parquet"
    tmp = d / f".{name}.tmp"
    pq.write_table(pa.Table.from_pylist([{k: r.get(k) for k in ANSWER_SCHEMA.names} for r in rows], schema=ANSWER_SCHEMA), tmp)
    os.replace(tmp, d / name)
    return d / name


def done_ok(row: AnswerRow | dict[str, Any], judged: bool) -> bool:
    """A finished answer that a re-run keeps (failed answers and failed verdicts are redone)."""
    if row.get("answer_error"):
        return False
    if judged and (row.get("judge_verdict") is None):
        return False
    return True


def load_answers(run_dir: Path, variant: str, key: str | None = None) -> dict[str, dict[str, Any]]:
    """Latest row per question id for ``variant`` (only rows with variant key ``key`` when given)."""
    d = answers_dir(run_dir, variant)
    rows: dict[str, dict[str, Any]] = {}
    if not d.is_dir():
        return rows
    for f in sorted(d.glob(ANSWER_PART_GLOB)):
        try:
            t = pq.read_table(f)
        except (OSError, pa.ArrowInvalid) as e:
            log.warning("skipping unreadable answer part %s: %s", f, e)
            continue
        for r in t.to_pylist():
            if key is not None and r.get("variant_key") != key:
                continue
            prev = rows.get(r["question_id"])
            if prev is None or (r.get("answered_at") or 0) >= (prev.get("answered_at") or 0):
                rows[r["question_id"]] = r
    return rows


def write_rows_in_parts(rows: Iterable[AnswerRow | dict[str, Any]], run_dir: Path, variant: str, flush_every: int,
                        total: int, progress: Callable[[int, int], None] | None = None) -> int:
    """Append rows as they arrive, one part every ``flush_every`` rows (so a crash loses at most that
    many answers); ``progress(done, total)`` after each row. Returns the number of rows written."""
    buf: list[AnswerRow | dict[str, Any]] = []
    written = 0
    for row in rows:
        buf.append(row)
        if len(buf) >= flush_every:
            write_part(run_dir, variant, buf)
            written += len(buf)
            buf = []
        if progress is not None:
            progress(written + len(buf), total)
    write_part(run_dir, variant, buf)
    return written + len(buf)


__all__ = ["RunState", "answers_dir", "done_ok", "load_answers", "write_part", "write_rows_in_parts"]
