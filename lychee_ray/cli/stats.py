"""``lychee-ray stats --memory DIR``: memory quality of a store's build.

What the encode step's checks did, per conversation and in total: drafted records, records per
segment, drafts rejected by reason (echo, ungrounded, invalid citation, ...), records repaired by
code (citations, entities, times), segments repaired or failed as degenerate, segments salvaged
from a reply cut at the token limit (``lychee-ray errors --warnings`` names them), and the evidence
nodes stored per record (what a build embeds and stores besides its records). The figures come
from the commit markers (the same ones ``manifest.json`` and the Serve conversation info show).
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from lychee_ray.cli.errors import EXIT_USAGE, CliError
from lychee_ray.cli.args import id_arg
from lychee_ray.cli.store_view import format_table, open_layout
from lychee_ray.core.ids import printable
from lychee_ray.core.quality import REJECT_REASONS, REPAIR_KINDS, QualityCounts

COLUMNS = ["conversation_id", "segments", "drafts", "records", "rec/seg", "rejected", "repaired", "repaired_seg",
           "degenerate_seg", "salvaged_seg", "nodes", "nodes/rec"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = "reasons and repairs: docs/llm-quality.md"
    p.add_argument("--memory", required=True, help="memory store directory")
    p.add_argument("--conversation", type=id_arg, help="only this conversation")
    p.add_argument("--json", action="store_true", help="the figures as JSON ({total, conversations})")
    p.set_defaults(func=run)


def store_quality(memory: str, conversation: str | None = None) -> dict[str, Any]:
    """``{"total": report, "conversations": {id: report}}`` from the store's commit markers."""
    layout = open_layout(memory)
    total = QualityCounts()
    per: dict[str, Any] = {}
    nodes = records = 0
    for m in layout.iter_markers():
        cid = m.conversation_id
        if conversation is not None and cid != conversation:
            continue
        q = QualityCounts.from_report(m.quality)
        per[cid] = {**q.report(), **_node_counts(m.counts.nodes, m.counts.records)}
        nodes, records = nodes + m.counts.nodes, records + m.counts.records
        total.add(q)
    if conversation is not None and not per:
        raise CliError("unknown_conversation", f"no committed conversation {conversation!r} in {memory}", EXIT_USAGE)
    return {"total": {**total.report(), **_node_counts(nodes, records)}, "conversations": per}


def _node_counts(nodes: int, records: int) -> dict[str, Any]:
    """The stored nodes and nodes per stored record."""
    return {"nodes": nodes, "nodes_per_record": round(nodes / records, 2) if records else 0.0}


def _by_reason(counts: dict[str, int], names: tuple[str, ...]) -> str:
    return ", ".join(f"{k} {counts[k]}" for k in names if counts.get(k)) or "-"


def run(args: argparse.Namespace) -> int:
    """Print the per-conversation table and the totals by reason (or JSON); exit 0."""
    stats = store_quality(args.memory, args.conversation)
    if args.json:
        print(json.dumps(stats, indent=1, ensure_ascii=False))
        return 0
    rows = [[printable(cid), q["segments_encoded"], q["drafts"], q["records"], q["records_per_segment"], q["rejected_total"],
             sum(q["repaired"].values()), q["segments_repaired"], q["segments_degenerate"], q["segments_salvaged"],
             q["nodes"], q["nodes_per_record"]]
            for cid, q in stats["conversations"].items()]
    t = stats["total"]
    rows.append(["TOTAL", t["segments_encoded"], t["drafts"], t["records"], t["records_per_segment"], t["rejected_total"],
                 sum(t["repaired"].values()), t["segments_repaired"], t["segments_degenerate"], t["segments_salvaged"],
                 t["nodes"], t["nodes_per_record"]])
    print(format_table(COLUMNS, rows))
    print(f"rejected by reason: {_by_reason(t['rejected'], REJECT_REASONS)}")
    print(f"repaired by code:   {_by_reason(t['repaired'], REPAIR_KINDS)}")
    return 0
