"""Store integrity checks (``lychee-ray verify``): references, id maps and coverage.

For every committed conversation: record and node ids are unique; every record's source turns
exist; every node's records exist; the FAISS id maps equal the Parquet row order and the index
sizes match; every turn belongs to exactly one segment (nothing dropped); plus the number of failed
segments waiting for ``--retry-failed``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lychee_ray.io.store import MemoryStoreReader


def verify_conversation(reader: MemoryStoreReader, conversation_id: str) -> list[str]:
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
    for rid, src in zip(rec_ids, d.records.column("source_turn_ids").to_pylist()):
        if not src or not set(src) <= turns:
            problems.append(f"record {rid}: source turns missing {sorted(set(src or []) - turns) or '(none)'}")
    recs = set(rec_ids)
    for nid, members in zip(node_ids, d.nodes.column("record_ids").to_pylist()):
        if not members or not set(members) <= recs:
            problems.append(f"node {nid}: records missing")
    if d.ids["records"] != rec_ids or d.ids["nodes"] != node_ids or d.ids["turns"] != turn_ids:
        problems.append("ids.json does not match the Parquet row order")
    if d.record_index.ntotal != len(rec_ids) or d.turn_index.ntotal != len(turn_ids) or d.node_index.ntotal > len(node_ids):
        problems.append("FAISS index sizes do not match the tables")
    seg_turns = [t for ts in d.segments.column("turn_ids").to_pylist() for t in ts]
    if sorted(set(seg_turns)) != sorted(turns):
        problems.append("segments do not cover every turn exactly")
    return problems


def verify_store(root: str | Path) -> dict[str, Any]:
    """Check every committed conversation; returns a JSON-able report."""
    reader = MemoryStoreReader(root)
    report: dict[str, Any] = {"conversations": 0, "records": 0, "nodes": 0, "turns": 0, "failed_segments": 0, "problems": {}}
    for cid in reader.conversation_ids():
        report["conversations"] += 1
        counts = reader.markers[cid].get("counts", {})
        for k in ("records", "nodes", "turns", "failed_segments"):
            report[k] += int(counts.get(k, 0))
        found = verify_conversation(reader, cid)
        if found:
            report["problems"][cid] = found[:20]
    report["ok"] = not report["problems"]
    return report
