"""Evidence nodes from record metadata only (no LLM): entity, topic, entity×topic, time, event frame."""

from __future__ import annotations

import re
from datetime import date, timedelta
from collections.abc import Iterable

from lychee_ray.config import NodesConfig
from lychee_ray.core.keys import normalise_key
from lychee_ray.core.records import EvidenceNode, MemoryRecord, NodeKind
from lychee_ray.text.dates import iso_day


# What is no name when nothing else is left: numbers, list markers ("1.", "(b)", "iv)"), clock times and
# their ranges ("10:00 AM - 10:10 AM"), dates, durations ("30 min"), bullets and dashes.
_NOT_NAME_PARTS = re.compile(
    r"\d+(?:[.:,/-]\d+)*(?:st|nd|rd|th|%|k|m|x)?|(?<![a-z])(?:a\.?m|p\.?m|hrs?|hours?|mins?|minutes?|secs?|seconds?|"
    r"ms|s|h|days?|weeks?|months?|years?|utc|gmt|to|and|from|until|jan|feb|mar|apr|may|jun|jul|aug|sep|sept|oct|nov|"
    r"dec|january|february|march|april|june|july|august|september|october|november|december|mon|tue|wed|thu|fri|sat|"
    r"sun|monday|tuesday|wednesday|thursday|friday|saturday|sunday|step|item|no|nr|part|[ivx]{1,4}|[a-z])\b\.?|"
    r"[^\w+#]+|_",
    re.I)


# A code that names one thing: letters then a digit, at least three characters ("W777", "M05KNL", "B2B").
_CODE = re.compile(r"(?<![\w])[A-Za-z]+\d[A-Za-z\d]*(?![\w])")
_MIN_CODE_CHARS = 3


def is_entity_name(name: str) -> bool:
    """``name`` can name a thing: it is or holds a code ("order W777"), or it keeps a word once numbers,
    list markers ("1.", "(b)"), clock times, time ranges ("10:00 AM - 10:10 AM"), dates and units of time
    are taken out. Table cells and list items give such entities ("1", "2", "Step 3"); as nodes they
    link records that share nothing."""
    if any(len(m.group(0)) >= _MIN_CODE_CHARS for m in _CODE.finditer(name)):
        return True
    rest = _NOT_NAME_PARTS.sub("", name)
    return len(rest) >= 2


def time_keys(rec: MemoryRecord, max_days: int) -> list[tuple[str, str]]:
    """(key, display) pairs for the days and months a record's time span covers."""
    start = iso_day(rec.time.start)
    if start is None:
        return []
    end = iso_day(rec.time.end) or start
    if end < start:
        start, end = end, start
    out: list[tuple[str, str]] = []
    if rec.time.granularity not in ("month", "year") and (end - start).days < max_days:
        for i in range((end - start).days + 1):  # never steps past `end` (date.max has no successor)
            d = start + timedelta(days=i)
            out.append((f"day:{d.isoformat()}", f"{d.day} {d:%B %Y}"))
    if rec.time.granularity != "year":
        y, m = start.year, start.month
        while (y, m) <= (end.year, end.month):
            out.append((f"month:{y:04d}-{m:02d}", date(y, m, 1).strftime("%B %Y")))
            y, m = (y + 1, 1) if m == 12 else (y, m + 1)
    else:
        for y in range(start.year, end.year + 1):
            out.append((f"year:{y:04d}", str(y)))
    return out


class _NodeAcc:
    """Accumulates one node's record ids (deduplicated, capped) and its most common surface form."""

    def __init__(self, kind: NodeKind, key: str) -> None:
        self.kind, self.key = kind, key
        self.record_ids: list[str] = []
        self._ids: set[str] = set()
        self.surface: dict[str, int] = {}

    def add(self, record_id: str, display: str, cap: int) -> None:
        self.surface[display] = self.surface.get(display, 0) + 1
        if record_id not in self._ids and len(self.record_ids) < cap:
            self._ids.add(record_id)
            self.record_ids.append(record_id)

    def display(self) -> str:
        # most frequent surface form; ties broken alphabetically for determinism
        if len(self.surface) == 1:  # the common case, without the sort key
            return next(iter(self.surface))
        return min(self.surface.items(), key=lambda kv: (-kv[1], kv[0]))[0]


def _event_frames(records: list[MemoryRecord], turn_pos: dict[str, int], gap: int) -> Iterable[list[MemoryRecord]]:
    """Groups of records of one segment whose source turns lie close together."""
    by_seg: dict[str, list[MemoryRecord]] = {}
    for r in records:
        by_seg.setdefault(r.segment_id, []).append(r)
    for recs in by_seg.values():
        def pos(r: MemoryRecord) -> tuple[int, int]:
            ps = [turn_pos[t] for t in r.source_turn_ids if t in turn_pos] or [0]
            return min(ps), max(ps)

        ordered = sorted(recs, key=lambda r: (pos(r), r.ordinal))
        group: list[MemoryRecord] = []
        last_end = 0
        for r in ordered:
            lo, hi = pos(r)
            if group and lo - last_end > gap:
                yield group
                group = []
            last_end = hi if not group else max(last_end, hi)
            group.append(r)
        if group:
            yield group


def build_nodes(
    records: list[MemoryRecord], turn_order: list[str], cfg: NodesConfig
) -> list[EvidenceNode]:
    """Derive evidence nodes for one conversation's records.

    ``turn_order`` lists the conversation's turn ids in order (for event-frame closeness).
    Output order is deterministic: by kind, then key.
    """
    if not records:
        return []
    cid, uid = records[0].conversation_id, records[0].user_id
    cap = cfg.max_records_per_node
    acc: dict[tuple[NodeKind, str], _NodeAcc] = {}

    def add(kind: NodeKind, key: str, display: str, rid: str) -> None:
        if key:
            a = acc.get((kind, key))
            if a is None:  # (not setdefault: that builds a throwaway accumulator on every call)
                a = acc[(kind, key)] = _NodeAcc(kind, key)
            a.add(rid, display, cap)

    for r in records:
        ents = [(normalise_key(e), e) for e in r.entities if is_entity_name(e)]
        tops = [(normalise_key(t), t) for t in r.topics]
        for k, e in ents:
            add("entity", k, e, r.record_id)
        for k, t in tops:
            add("topic", k, t, r.record_id)
        pairs = [(ek, e, tk, t) for ek, e in ents for tk, t in tops if ek and tk and ek != tk]
        for ek, e, tk, t in pairs[: cfg.max_entity_topic_pairs]:
            add("entity_topic", f"{ek}|{tk}", f"{e} — {t}", r.record_id)
        for k, disp in time_keys(r, cfg.max_days_per_span):
            add("time", k, disp, r.record_id)

    turn_pos = {t: i for i, t in enumerate(turn_order)}
    frames: list[EvidenceNode] = []
    for group in _event_frames(records, turn_pos, cfg.event_frame_turn_gap):
        if len(group) < 2:
            continue  # a single record is already its own unit of recall
        first = group[0]
        key = f"frame:{first.segment_id}:{first.ordinal}"
        text = " ".join(r.text for r in group)[: cfg.event_frame_text_chars]
        ids = [r.record_id for r in group][:cap]
        frames.append(
            EvidenceNode(
                node_id=EvidenceNode.make_id(cid, "event_frame", key),
                conversation_id=cid, user_id=uid, kind="event_frame", key=key, text=text, record_ids=ids,
            )
        )
    nodes = [
        EvidenceNode(
            node_id=EvidenceNode.make_id(cid, a.kind, a.key),
            conversation_id=cid, user_id=uid, kind=a.kind, key=a.key,
            text=a.display(), record_ids=a.record_ids,
        )
        for a in acc.values()
    ]
    nodes.extend(frames)
    nodes.sort(key=lambda n: (n.kind, n.key))
    return nodes
