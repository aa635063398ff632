"""One conversation as the conversation page shows it: read from the store, table by table.

Every table of the store's registry is read through :func:`~lychee_ray.io.store.read_part` (the
reader's own path: base part or compacted row group, delta generations applied). The core ones get
their own views — turns (tool calls parsed, the system prompt once, a long turn's passages placed in
its content), sessions and segments on the timeline, records with every column they have, with
their derived statuses and slot chains (:mod:`.currency`, when the engine is given), tokens by stage
from ``usage`` — and any other table is passed on as rows by column for the page to render as it is.
"""

from __future__ import annotations

import time
from typing import Any

import pyarrow as pa

from lychee_ray.core.kinds import conversation_kind
from lychee_ray.core.tools import ToolInfo, render_turn_text, split_tool_meta
from lychee_ray.inspector.catalog import parse_meta
from lychee_ray.inspector.currency import has_links, record_currency
from lychee_ray.inspector.models import (
    ConversationDetail,
    PassageView,
    SegmentView,
    SessionView,
    SystemPrompt,
    TableView,
    TurnView,
)
from lychee_ray.io.store import CommitMarker, StoreLayout, read_part, table_specs
from lychee_ray.query.engine import QueryEngine

# Tables the page has views of its own for (the rest are shown by column); nodes are the index's
# derived keys, counted in the header rather than listed.
OWN_VIEWS = frozenset({"turns", "segments", "records", "usage", "nodes", "passages"})


def _rows(layout: StoreLayout, table: str, marker: CommitMarker) -> pa.Table | None:
    try:
        return read_part(layout, table, marker)
    except (OSError, KeyError, ValueError):  # a table this generation has no part of (a newer table)
        return None


def _py(v: Any) -> Any:
    """A cell as JSON: Arrow maps (lists of pairs) as objects."""
    if isinstance(v, list) and v and all(isinstance(x, tuple) and len(x) == 2 for x in v):
        return {str(k): val for k, val in v}
    return v


def _passages_of(table: pa.Table | None) -> dict[str, list[dict[str, Any]]]:
    """Passage rows by turn id, in passage order."""
    out: dict[str, list[dict[str, Any]]] = {}
    for row in table.to_pylist() if table is not None else []:
        out.setdefault(str(row["turn_id"]), []).append(row)
    for rows in out.values():
        rows.sort(key=lambda r: r["index"])
    return out


def _passage_views(rows: list[dict[str, Any]], content: str, info: ToolInfo | None) -> list[PassageView]:
    """A turn's passages, each span also placed in the turn's content: a passage spans the turn's
    text, which adds the rendered tool calls after the content (or a ``name result:`` label before a
    tool result's)."""
    text = render_turn_text(content, info)
    offset = text.find(content) if content else -1
    out = []
    for r in rows:
        a, b = int(r["char_start"]), int(r["char_end"])
        cs, ce = (max(0, a - offset), min(len(content), b - offset)) if offset >= 0 else (0, 0)
        inside = offset >= 0 and ce > cs
        out.append(PassageView(passage_id=r["passage_id"], index=int(r["index"]) + 1, count=int(r["count"]), char_start=a,
                               char_end=b, tokens=int(r["tokens"]), content_start=cs if inside else None,
                               content_end=ce if inside else None))
    return out


def _turns(t: dict[str, list], segment_of: dict[str, int], passages: dict[str, list[dict[str, Any]]]
           ) -> tuple[list[TurnView], list[SessionView]]:
    turns: list[TurnView] = []
    sessions: list[SessionView] = []
    for i, tid in enumerate(t["turn_id"]):
        meta, info = split_tool_meta(parse_meta(t["meta"][i]))
        sid = t["session_id"][i]
        if not sessions or sessions[-1].session_id != sid:
            sessions.append(SessionView(session_id=sid, started_at=t["session_started_at"][i], first_turn=i, turns=0))
        sessions[-1].turns += 1
        turns.append(TurnView(
            turn_id=tid, position=i, session_id=sid, role=t["role"][i], speaker=t["speaker"][i], content=t["content"][i],
            timestamp=t["timestamp"][i], segment=segment_of.get(tid, -1),
            tool_calls=[c.model_dump() for c in info.calls] if info else [],
            tool_call_id=info.call_id if info else None, tool_name=info.name if info else None, meta=meta,
            passages=_passage_views(passages[tid], t["content"][i], info) if tid in passages else []))
    return turns, sessions


def _system_prompt(turns: list[TurnView]) -> SystemPrompt | None:
    """The first system turn's text, with the later system turns that repeat it (each session of an
    agent log may open with the same prompt): shown once."""
    first = next((t for t in turns if t.role == "system"), None)
    if first is None:
        return None
    repeats = [t.turn_id for t in turns if t.role == "system" and t is not first and t.content == first.content]
    return SystemPrompt(turn_id=first.turn_id, content=first.content, repeats=repeats)


def _usage(table: pa.Table | None) -> dict[str, dict[str, float]]:
    out: dict[str, dict[str, float]] = {}
    if table is None or not table.num_rows:
        return out
    d = table.to_pydict()
    for i, stage in enumerate(d.get("stage") or []):
        s = out.setdefault(str(stage), {"calls": 0, "prompt_tokens": 0, "completion_tokens": 0})
        s["calls"] += 1
        s["prompt_tokens"] += int(d["prompt_tokens"][i] or 0) if "prompt_tokens" in d else 0
        s["completion_tokens"] += int(d["completion_tokens"][i] or 0) if "completion_tokens" in d else 0
    return out


def conversation_detail(layout: StoreLayout, marker: CommitMarker, engine: QueryEngine | None = None) -> ConversationDetail:
    """The conversation ``marker`` publishes, every table of its generation read once; with
    ``engine`` (at the same commit), its records' derived statuses and slot chains too."""
    t0 = time.perf_counter()
    turns_t = _rows(layout, "turns", marker)
    segs_t = _rows(layout, "segments", marker)
    recs_t = _rows(layout, "records", marker)
    t = turns_t.to_pydict() if turns_t is not None else {k: [] for k in ("turn_id", "meta", "role")}
    s = segs_t.to_pydict() if segs_t is not None else {}
    order = sorted(range(len(s.get("segment_id", []))), key=lambda i: s["index"][i])
    segment_of: dict[str, int] = {}
    for n, i in enumerate(order):
        for tid in s["turn_ids"][i] or []:
            segment_of[tid] = n
    turns, sessions = _turns(t, segment_of, _passages_of(_rows(layout, "passages", marker))) if turns_t is not None else ([], [])
    pos = {tv.turn_id: tv.position for tv in turns}
    segments = []
    for i in order:
        ids = list(s["turn_ids"][i] or [])
        segments.append(SegmentView(
            segment_id=s["segment_id"][i], index=s["index"][i], first_turn=min((pos[x] for x in ids if x in pos), default=-1),
            turns=len(ids), turn_ids=ids, close_reason=s["close_reason"][i] or "", status=s["status"][i],
            num_records=s["num_records"][i] or 0, num_tokens=s["num_tokens"][i] or 0, error=s["error"][i],
            error_kind=s["error_kind"][i], quality=_py(s["quality"][i]) or {}))
    seg_rank = {sv.segment_id: n for n, sv in enumerate(segments)}
    records = [{k: _py(v) for k, v in r.items()} for r in (recs_t.to_pylist() if recs_t is not None else [])]
    records.sort(key=lambda r: (seg_rank.get(str(r.get("segment_id")), len(segments)), r.get("ordinal") or 0))
    currency, slots = record_currency(engine, marker.conversation_id) if engine is not None and has_links(records) else ({}, [])
    tables = []
    for spec in table_specs():
        if spec.name in OWN_VIEWS:
            continue
        tb = _rows(layout, spec.name, marker)
        if tb is not None:
            tables.append(TableView(name=spec.name, columns=tb.column_names,
                                    rows=[{k: _py(v) for k, v in r.items()} for r in tb.to_pylist()]))
    c = marker.counts
    return ConversationDetail(
        conversation_id=marker.conversation_id, user_id=marker.owner, committed_at=marker.committed_at,
        backend=marker.backend, model=marker.model, embedder=marker.embedder,
        kind=conversation_kind(t["role"], t["meta"]),
        counts={"turns": c.turns, "segments": c.segments, "failed_segments": c.failed_segments, "records": c.records,
                "nodes": c.nodes, "open_turns": marker.open_turns, "unsegmented_turns": marker.unsegmented_turns},
        quality=marker.quality, sessions=sessions, segments=segments, turns=turns, system_prompt=_system_prompt(turns),
        records=records, record_columns=recs_t.column_names if recs_t is not None else [], currency=currency, slots=slots,
        tables=tables,
        usage=_usage(_rows(layout, "usage", marker)), server_ms=round((time.perf_counter() - t0) * 1000.0, 3))


__all__ = ["OWN_VIEWS", "conversation_detail"]
