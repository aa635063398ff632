"""``lychee-ray build``: conversations → memory store (records, nodes, turns, FAISS indexes).

The input is surveyed first (:func:`lychee_ray.io.adapters.survey_input`): its format is detected
when ``--format`` is not given, a given format the input clearly is not is refused, and an input
without conversations is refused — all before Ray starts or ``--out`` is created.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from lychee_ray.ingest.dryrun import dry_run
from lychee_ray.ingest.runner import run_local_build
from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.cli.errors import EXIT_FAILED, EXIT_OK
from lychee_ray.io.adapters.registry import format_names
from lychee_ray.io.adapters import survey_input
from lychee_ray.io.adapters.base import is_uri


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = ("exit codes: 0 at least one conversation built or already built; 1 none could be "
                "built (see `lychee-ray errors`); 2 unusable input or arguments (nothing is started)")
    p.add_argument("--input", required=True, help="file or directory (a folder format: one folder or a folder of them)")
    p.add_argument("--format", default=None, choices=format_names(),
                   help="input format (default: detected from the input: LoCoMo directory/file, LongMemEval JSON, "
                        "BEAM folders, JSONL, Parquet, chat logs)")
    p.add_argument("--out", required=True, help="memory store directory (resumable)")
    p.add_argument("--llm", choices=("openai", "rules"), default=None, help="LLM backend (default: auto)")
    p.add_argument("--local", action="store_true", help="run in this process without Ray")
    p.add_argument("--retry-failed", action="store_true", help="re-encode only the failed segments of built conversations")
    p.add_argument("--on-conflict", choices=("error", "rebuild"), default=None,
                   help="a built conversation whose input changed, removed or reordered stored turns: error = report "
                        "it (stage conflict) and keep the stored one; rebuild = build it again from scratch "
                        "(default: build.on_conflict). New turns of a built conversation are always appended.")
    p.add_argument("--dry-run", action="store_true", help="no LLM call: count encode calls and exact prompt tokens")
    p.add_argument("--json", action="store_true", help="print the summary as JSON (default: a table)")
    add_config_args(p)
    p.set_defaults(func=run)


def _survey(args: argparse.Namespace) -> str:
    """The input's format, checked (InputError when unusable); URIs are read as given."""
    if is_uri(args.input) and args.format is not None:
        return args.format
    survey = survey_input(args.input, args.format)
    if survey.detected:
        print(f"lychee-ray build: {args.input}: {survey.conversations} conversation(s) in {len(survey.files)} "
              f"{survey.unit}(s), format {survey.format} (detected)", file=sys.stderr)
    return survey.format


def run(args: argparse.Namespace) -> int:
    """Survey the input, build, print the summary once; the exit code (see ``add_arguments``)."""
    cfg = config_from_args(args)
    fmt = _survey(args)
    if args.dry_run:
        report = dry_run(cfg, fmt, args.input)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "dry_run.json").write_text(json.dumps(report, indent=1))
        slim = {cid: {k: v for k, v in c.items() if k != "calls_per_segment_prompt_tokens"} for cid, c in report["conversations"].items()}
        print(json.dumps({"conversations": slim, "total": report["total"]}, indent=1))
        return EXIT_OK if report["conversations"] else EXIT_FAILED
    # progress on stderr from the first second (the same display in both runners)
    if args.local:
        summary = run_local_build(cfg, fmt, args.input, args.out, backend=args.llm, retry_failed=args.retry_failed,
                                  on_conflict=args.on_conflict, progress=True)
    else:
        from lychee_ray.ray.build_job import run_ray_build  # lazy: Ray itself, which a --local build never loads

        summary = run_ray_build(cfg, fmt, args.input, args.out, backend=args.llm, retry_failed=args.retry_failed,
                                on_conflict=args.on_conflict, progress=True)
    for line in summary.error_lines():
        print(line, file=sys.stderr)
    if args.json:
        print(json.dumps(summary.to_dict(), indent=1))
    else:
        print(summary.table(store=str(args.out)), flush=True)
    if summary.built + summary.skipped == 0:
        print(f"lychee-ray build: no conversation could be built — `lychee-ray errors --memory {args.out}` "
              "shows why", file=sys.stderr)
    return EXIT_OK if summary.built + summary.skipped > 0 else EXIT_FAILED
