"""``lychee-ray verify --memory DIR``: integrity check of a memory store (a directory or a URI)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.cli.store_view import format_pairs
from lychee_ray.core.ids import printable
from lychee_ray.io.store import StoreLayout
from lychee_ray.io.store.gc import collect_garbage, garbage_paths
from lychee_ray.io.verify import verify_store

# Problems of one kind named in the table (all of them with --json).
_SHOWN = 3


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory", required=True, help="memory store directory or URI (s3://bucket/prefix, ...)")
    p.add_argument("--collect-garbage", action="store_true",
                   help="also remove files no commit marker names (crashed writers), once older than "
                        "store.garbage_min_age_s")
    p.add_argument("--json", action="store_true", help="print the report as JSON (default: a table)")
    add_config_args(p)  # store.* settings (garbage age, cache) for this run
    p.set_defaults(func=run)


def report_table(report: dict[str, Any]) -> str:
    """The report as a table: the counts, then one line per conversation with problems (its first few)."""
    pairs: list[tuple[str, Any]] = [(k.replace("_", " "), report[k]) for k in
                                    ("conversations", "turns", "records", "nodes", "failed_segments") if k in report]
    if "garbage_removed" in report:
        g = report["garbage_removed"]
        pairs.append(("garbage removed", f"{g['files']} file(s), {g['bytes']} bytes"))
    elif "garbage" in report:
        pairs.append(("garbage (unreferenced, sweepable)", report["garbage"]))
    problems = report.get("problems") or {}
    pairs.append(("conversations with problems", len(problems)))
    lines = [format_pairs(pairs)]
    for cid, items in problems.items():
        shown = items if isinstance(items, list) else [items]
        lines.append(f"  {printable(str(cid))}: " + "; ".join(printable(str(x)) for x in shown[:_SHOWN])
                     + (f" … ({len(shown)} in all)" if len(shown) > _SHOWN else ""))
    lines.append("ok" if report["ok"] else "problems found (--json for all of them)")
    return "\n".join(lines)


def run(args: argparse.Namespace) -> int:
    layout = StoreLayout(args.memory, config_from_args(args).store)  # garbage age, cache: this run's settings
    report = verify_store(layout)
    if args.collect_garbage:
        swept = collect_garbage(layout)
        report["garbage_removed"] = {"files": swept.files_removed, "bytes": swept.bytes_freed}
    else:
        report["garbage"] = len(garbage_paths(layout))  # unreferenced paths old enough to sweep
    print(json.dumps(report, indent=1) if args.json else report_table(report))
    return 0 if report["ok"] else 1
