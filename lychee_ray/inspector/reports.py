"""The build report page: quality figures, the token ledger, and the data of its plots.

Quality and tokens come from ``manifest.json`` (the build's own totals); the plots — records per
segment, segment lengths in turns, cut reasons — from the ``segments`` table of the conversations in
the request's scope, at most ``inspect.report_max_conversations`` of them (the first by id; the page
says how many it read). A report is remembered until the store's commits change.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

from lychee_ray.inspector.models import Histogram, StoreReport
from lychee_ray.io.store import StoreReader, read_part

SEGMENT_COLUMNS = ["turn_ids", "close_reason", "num_records"]


def integer_histogram(label: str, values: list[int]) -> Histogram:
    """Counts of each value from 0 to the largest (every bin shown, empty ones too)."""
    top = max(values, default=0)
    c = Counter(values)
    return Histogram(label=label, bins=[str(v) for v in range(top + 1)], counts=[c.get(v, 0) for v in range(top + 1)])


def category_histogram(label: str, values: list[str]) -> Histogram:
    """Counts of each value, most frequent first."""
    common = Counter(values).most_common()
    return Histogram(label=label, bins=[k for k, _ in common], counts=[n for _, n in common])


class ReportBuilder:
    """Store reports by scope, remembered until the store's commits change."""

    def __init__(self, max_conversations: int) -> None:
        self.max_conversations = max_conversations
        self._memo: dict[Any, StoreReport] = {}
        self._lock = threading.Lock()

    def report(self, reader: StoreReader, conversation_ids: list[str], manifest: dict[str, Any]) -> StoreReport:
        stamp = (reader.layout.commit_state(), tuple(conversation_ids[: self.max_conversations]))
        with self._lock:
            hit = self._memo.get(stamp)
        if hit is not None:
            return hit
        records: list[int] = []
        lengths: list[int] = []
        reasons: list[str] = []
        read = 0
        for cid in conversation_ids[: self.max_conversations]:
            m = reader.markers.get(cid)
            if m is None:
                continue
            try:
                d = read_part(reader.layout, "segments", m, columns=SEGMENT_COLUMNS).to_pydict()
            except (OSError, KeyError, ValueError):
                continue
            read += 1
            records += [int(n or 0) for n in d["num_records"]]
            lengths += [len(t or []) for t in d["turn_ids"]]
            reasons += [r or "?" for r in d["close_reason"]]
        rep = StoreReport(
            quality=manifest.get("quality"), tokens=manifest.get("tokens") or {}, last_run=manifest.get("last_run"),
            conversations_read=read, conversations_total=len(conversation_ids),
            plots=[integer_histogram("records per segment", records), integer_histogram("segment length (turns)", lengths),
                   category_histogram("cut reasons", reasons)])
        with self._lock:
            self._memo = {stamp: rep}  # one store, one current report (a scope per request is small)
        return rep


__all__ = ["ReportBuilder", "category_histogram", "integer_histogram"]
