"""Store integrity checks (``lychee-ray verify``): references, id maps and coverage.

For every committed conversation: record and node ids are unique; every record's source turns
exist; every node's records exist; every passage's turn exists; the FAISS id maps equal the Parquet
row order and the index sizes match; every turn belongs to exactly one segment (nothing dropped: only the open tail of an
append waits outside, as its segmenter state lists, and turns whose segmentation is queued, as the
marker counts); base and delta generations are checked as readers merge them; plus the number of failed
segments waiting for ``--retry-failed``; every drafted record is stored or rejected with a reason
(the memory checks' accounting, :mod:`lychee_ray.core.quality`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lychee_ray.core.quality import QualityCounts
from lychee_ray.io.store import MarkerError, StoreReader, StoreLayout
from lychee_ray.io.store.reader import read_segstate
from lychee_ray.io.store.tables import indexed_tables


def verify_conversation(reader: StoreReader, conversation_id: str) -> list[str]:
    """Problems found in one conversation (empty = consistent)."""
    d = reader.load(conversation_id)
    problems: list[str] = []
    turn_ids = d.turns.column("turn_id").to_pylist()
    rec_ids = d.records.column("record_id").to_pylist()
    node_ids = d.nodes.column("node_id").to_pylist()
    for name, ids in (("turn", turn_ids), ("record", rec_ids), ("node", node_ids)):
        if len(ids) != len(set(ids)):
            problems.append(f"duplicate {name} ids")
    turns = set(turn_ids)
    for rid, src in zip(rec_ids, d.records.column("source_turn_ids").to_pylist(), strict=False):
        if not src or not set(src) <= turns:
            problems.append(f"record {rid}: source turns missing {sorted(set(src or []) - turns) or '(none)'}")
    recs = set(rec_ids)
    for nid, members in zip(node_ids, d.nodes.column("record_ids").to_pylist(), strict=False):
        if not members or not set(members) <= recs:
            problems.append(f"node {nid}: records missing")
    for spec in indexed_tables():  # every table with a vector index (io/store/tables.py)
        assert spec.index is not None
        ids = d.tables[spec.name].column(spec.index.id_column).to_pylist() if spec.name in d.tables else None
        if ids is None or d.ids.get(spec.name) != ids:
            problems.append(f"ids.json does not match the Parquet row order of {spec.name}")
        elif d.indexes[spec.name].ntotal > len(ids):
            problems.append(f"the {spec.name} index has more vectors than rows")
    if d.record_index.ntotal != len(rec_ids) or d.turn_index.ntotal != len(turn_ids):  # every record and turn has one
        problems.append("FAISS index sizes do not match the tables")
    problems += _passage_problems(d.tables.get("passages"), d.indexes.get("passages"), turns)
    problems += _coverage_problems(reader, conversation_id, d.segments, turn_ids)
    problems += _quality_problems(d.segments.to_pylist(), len(rec_ids))
    return problems


def _passage_problems(passages: Any, index: Any, turns: set[str]) -> list[str]:
    """Every passage has a vector and a stored turn (stores built before passages have none)."""
    if passages is None or passages.num_rows == 0:
        return []
    out: list[str] = []
    ids = passages.column("passage_id").to_pylist()
    if len(ids) != len(set(ids)):
        out.append("duplicate passage ids")
    missing = sorted(set(passages.column("turn_id").to_pylist()) - turns)
    if missing:
        out.append(f"passages of turns that are not stored: {missing[:5]}")
    if index is not None and index.ntotal != len(ids):
        out.append("the passages index does not have one vector per passage")
    return out


def _coverage_problems(reader: StoreReader, conversation_id: str, segments: Any, turn_ids: list[str]) -> list[str]:
    """Every turn in a segment (a turn longer than the segment cap spans several, piece by piece) —
    except the open tail an append left undecided, which the
    segmenter state saved with the generation lists (docs/incremental.md); that state covers
    exactly the stored turns and names only stored segments as provisional."""
    out: list[str] = []
    turns = set(turn_ids)
    seg_turns = [t for ts in segments.column("turn_ids").to_pylist() for t in ts]
    if not set(seg_turns) <= turns:
        out.append(f"segments name unknown turns {sorted(set(seg_turns) - turns)[:5]}")
    marker = reader.markers[conversation_id]
    state = read_segstate(reader.layout, marker)
    # turns appended after the segmenter's resume point wait for it (queued encoding): the last ones
    queued = marker.unsegmented_turns
    open_tail = set((state or {}).get("open_turn_ids", [])) | set(turn_ids[len(turn_ids) - queued:] if queued else [])
    uncovered = turns - set(seg_turns)
    if not uncovered <= open_tail:
        out.append(f"segments do not cover every turn: {sorted(uncovered - open_tail)[:5]} in none (nor in the open tail)")
    if state is not None and state.get("num_turns") != len(turn_ids) - queued:
        out.append(f"segmenter state covers {state.get('num_turns')} turns, the conversation has {len(turn_ids)} "
                   f"({queued} waiting for the segmenter)")
    if state is not None and not set(state.get("provisional", [])) <= set(segments.column("segment_id").to_pylist()):
        out.append("segmenter state names provisional segments that are not stored")
    return out


def _quality_problems(segments: list[dict[str, Any]], records: int) -> list[str]:
    """Memory-check accounting: every drafted record is stored or rejected with a reason,
    and the segments' stored counts add up to the records table. Stores built before the checks
    (no ``quality`` column) have nothing to check."""
    if not segments or "quality" not in segments[0]:
        return []
    out: list[str] = []
    total = QualityCounts()
    for s in segments:
        q = QualityCounts.from_flat(s["quality"])
        if q.drafts != q.records + q.rejected_total:
            out.append(f"segment {s['segment_id']}: {q.drafts} drafts but {q.records} records + {q.rejected_total} rejected")
        total.add(q)
    if any(s["quality"] for s in segments) and total.records != records:
        out.append(f"segment quality counts {total.records} records but the records table has {records}")
    return out


def verify_store(root: str | Path | StoreLayout) -> dict[str, Any]:
    """Check every committed conversation; returns a JSON-able report."""
    reader = StoreReader(root)
    report: dict[str, Any] = {"conversations": 0, "records": 0, "nodes": 0, "turns": 0, "failed_segments": 0, "problems": {}}
    for cid in reader.conversation_ids():
        report["conversations"] += 1
        counts = reader.markers[cid].counts
        report["records"] += counts.records
        report["nodes"] += counts.nodes
        report["turns"] += counts.turns
        report["failed_segments"] += counts.failed_segments
        try:
            found = verify_conversation(reader, cid)
        except MarkerError as e:  # e.g. a version-1 fixed-path marker: `lychee-ray migrate` first
            found = [f"{e.kind}: {e}"]
        if found:
            report["problems"][cid] = found[:20]
    report["ok"] = not report["problems"]
    return report
