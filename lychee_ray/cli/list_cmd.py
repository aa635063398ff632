"""``lychee-ray list --memory DIR``: the conversations of a store, and the ids to query them by."""

from __future__ import annotations

import argparse
import json

from lychee_ray.cli.store_view import conversation_rows, format_table, open_layout
from lychee_ray.core.ids import printable

COLUMNS = ["conversation_id", "status", "user_id", "sessions", "turns", "records", "failed_segments", "committed_at"]


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = "failed = the conversation could not be built (`lychee-ray errors --memory DIR` says why)"
    p.add_argument("--memory", required=True, help="memory store directory")
    p.add_argument("--json", action="store_true", help="one JSON object per conversation, in a list")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Print the table (or JSON); exit 0, or 2 when the path is not a store."""
    layout = open_layout(args.memory)
    rows = conversation_rows(layout)
    if args.json:
        print(json.dumps([r.to_dict() for r in rows], indent=1, ensure_ascii=False))
        return 0
    if not rows:
        print(f"no conversations in {args.memory}")
        return 0
    def cell(r, c: str):
        v = getattr(r, c)
        if c == "committed_at" and v:
            return v[:19].replace("T", " ") + " UTC"  # seconds are enough here
        return printable(v) if isinstance(v, str) else v  # ids an older version stored unchecked: escaped

    print(format_table(COLUMNS, [[cell(r, c) for c in COLUMNS] for r in rows]))
    built = sum(r.status == "built" for r in rows)
    print(f"{built} built, {len(rows) - built} failed")
    return 0
