"""``lychee-ray convert``: dataset → canonical conversations JSONL (+ QA and errors side files)."""

from __future__ import annotations

import argparse
import json
import sys

from lychee_ray.cli.store_view import format_pairs
from lychee_ray.io.adapters import adapters, survey_input
from lychee_ray.io.adapters.registry import format_names
from lychee_ray.io.convert import ConvertReport, convert


def formats_help() -> str:
    """Every registered input format with its name (the registry's order)."""
    return "input formats: " + "; ".join(f"{a.name} ({a.title})" for a in adapters())


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.description = ("Convert any supported input to canonical conversations JSONL (docs/data-format.md), with its "
                     "questions and gold evidence in X.qa.jsonl and its problems in X.errors.jsonl. " + formats_help())
    p.add_argument("--format", default=None, choices=format_names(), help="input format (default: detected from the input)")
    p.add_argument("--input", required=True, help="file or directory")
    p.add_argument("--out", required=True, help="conversations.jsonl (QA → *.qa.jsonl, problems → *.errors.jsonl)")
    p.add_argument("--strict", action="store_true", help="exit non-zero when any input error occurred")
    p.add_argument("--json", action="store_true", help="print the report as JSON (default: a table)")
    p.set_defaults(func=run)


def report_table(rep: ConvertReport) -> str:
    """The report as a table."""
    return format_pairs([("conversations", rep.conversations), ("turns", rep.turns), ("questions", rep.questions),
                         ("errors", rep.errors), ("warnings", rep.warnings), ("conversations written to", rep.out),
                         ("questions written to", rep.qa_out), ("problems written to", rep.errors_out)])


def run(args: argparse.Namespace) -> int:
    """Convert; exit 0, 1 when nothing converted (or ``--strict`` and any error), 2 unusable input."""
    fmt = args.format or survey_input(args.input).format  # InputError: one line, exit 2
    try:
        rep = convert(fmt, args.input, args.out)
    except FileNotFoundError as e:
        print(f"lychee-ray convert: {e}", file=sys.stderr)
        return 2
    for m in rep.messages:
        print(m, file=sys.stderr)
    print(json.dumps(rep.to_dict(), indent=2) if args.json else report_table(rep))
    if rep.conversations == 0:
        print("lychee-ray convert: nothing could be converted", file=sys.stderr)
        return 1
    return 1 if args.strict and rep.errors else 0
