"""``lychee-ray convert``: dataset → canonical conversations JSONL (+ QA and errors side files)."""

from __future__ import annotations

import argparse
import json
import sys

from lychee_ray.io.adapters.registry import format_names
from lychee_ray.io.adapters import survey_input
from lychee_ray.io.convert import convert


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--format", default=None, choices=format_names(), help="input format (default: detected from the input)")
    p.add_argument("--input", required=True, help="file or directory")
    p.add_argument("--out", required=True, help="conversations.jsonl (QA → *.qa.jsonl, problems → *.errors.jsonl)")
    p.add_argument("--strict", action="store_true", help="exit non-zero when any input error occurred")
    p.set_defaults(func=run)


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
    print(json.dumps(rep.to_dict(), indent=2))
    if rep.conversations == 0:
        print("lychee-ray convert: nothing could be converted", file=sys.stderr)
        return 1
    return 1 if args.strict and rep.errors else 0
