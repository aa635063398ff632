"""``lychee-ray build``: conversations → memory store (records, nodes, turns, FAISS indexes)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ..adapters import FORMATS
from ..adapters.base import is_uri
from ..cli import add_config_args, config_from_args


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("build", help="build a memory store from conversations")
    p.add_argument("--input", required=True, help="file or directory")
    p.add_argument("--format", default="jsonl", choices=FORMATS)
    p.add_argument("--out", required=True, help="memory store directory (resumable)")
    p.add_argument("--llm", choices=("openai", "rules"), default=None, help="LLM backend (default: auto)")
    p.add_argument("--local", action="store_true", help="run in this process without Ray")
    p.add_argument("--retry-failed", action="store_true", help="re-encode only the failed segments of built conversations")
    p.add_argument("--dry-run", action="store_true", help="no LLM call: count encode calls and exact prompt tokens")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    if not is_uri(args.input) and not Path(args.input).exists():
        print(f"lychee-ray build: input not found: {args.input}", file=sys.stderr)
        return 2
    if args.dry_run:
        from ..dryrun import dry_run

        report = dry_run(cfg, args.format, args.input)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "dry_run.json").write_text(json.dumps(report, indent=1))
        slim = {cid: {k: v for k, v in c.items() if k != "calls_per_segment_prompt_tokens"} for cid, c in report["conversations"].items()}
        print(json.dumps({"conversations": slim, "total": report["total"]}, indent=1))
        return 0 if report["conversations"] else 1
    if args.local:
        from ..runner import run_local_build as run_build
    else:
        from ..ray_build import run_ray_build as run_build
    summary = run_build(cfg, args.format, args.input, args.out, backend=args.llm, retry_failed=args.retry_failed)
    print(summary.table(), file=sys.stderr)
    print(json.dumps(summary.to_dict(), indent=1))
    for e in summary.errors:
        print(f"error: [{e.get('conversation_id') or '-'}] {e['stage']}: {e['message']}", file=sys.stderr)
    return 0 if summary.built + summary.skipped > 0 else 1
