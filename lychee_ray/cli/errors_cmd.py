"""``lychee-ray errors --memory DIR``: the failures of a store's builds — conversations and input lines
(``errors/``) and failed segments with their kind (``segments``) — and with ``--warnings`` also the
input repairs and the salvaged segments (a reply cut at the token limit whose complete records were
kept), so that nobody has to open Parquet."""

from __future__ import annotations

import argparse
import json

from lychee_ray.cli.store_view import open_layout, problem_rows
from lychee_ray.core.ids import printable


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory", required=True, help="memory store directory")
    p.add_argument("--warnings", action="store_true",
                   help="also the warnings: input repairs, and segments salvaged from a reply cut at the token limit")
    p.add_argument("--json", action="store_true", help="the rows as a JSON list")
    p.set_defaults(func=run)


def format_row(r: dict) -> str:
    """``file:line [conversation] stage: message``; a segment's row
    ``segment <id> (turns <first>..<last>) [conversation] stage <kind>, <n> attempt(s): message``."""
    if r.get("segment_id"):
        span = r.get("turn_range") or []
        turns = f" (turns {span[0]}..{span[-1]})" if span else ""
        return printable(f"segment {r['segment_id']}{turns} [{r.get('conversation_id')}] {r.get('stage')} "
                         f"{r.get('kind') or '-'}, {r.get('attempts')} attempt(s): {r.get('message')}")
    where = (r.get("file") or "-") + (f":{r['line']}" if r.get("line") is not None else "")
    return printable(f"{where} [{r.get('conversation_id') or '-'}] {r.get('stage')}: {r.get('message')}")


def run(args: argparse.Namespace) -> int:
    """Print the rows (oldest first); exit 0, or 2 when the path is not a store."""
    rows = problem_rows(open_layout(args.memory), warnings=args.warnings)
    if args.json:
        print(json.dumps(rows, indent=1, ensure_ascii=False, default=str))
        return 0
    for r in rows:
        print(format_row(r))
    kinds = "errors or warnings" if args.warnings else "errors"
    print(f"{len(rows)} row(s)" if rows else f"no {kinds} in {args.memory}")
    return 0
