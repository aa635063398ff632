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
from typing import Any

from lychee_ray.ingest.dryrun import dry_run
from lychee_ray.ingest.runner import run_local_build
from lychee_ray.ingest.runner_choice import RunnerChoice, choose_runner
from lychee_ray.llm.backend import auto_rules, claim_notice, resolve_backend
from lychee_ray.names import LLM_BACKENDS, LOCAL_RUNNER, ON_CONFLICT_CHOICES, RULES_BACKEND
from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.cli.errors import EXIT_FAILED, EXIT_OK
from lychee_ray.cli.store_view import format_table
from lychee_ray.core.ids import printable
from lychee_ray.io.adapters import adapters, survey_input
from lychee_ray.io.adapters.registry import format_names
from lychee_ray.io.adapters.base import is_uri


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = ("exit codes: 0 at least one conversation built or already built; 1 none could be "
                "built (see `lychee-ray errors`); 2 unusable input or arguments (nothing is started)")
    p.add_argument("--input", required=True, help="file or directory (a folder format: one folder or a folder of them)")
    p.add_argument("--format", default=None, choices=format_names(),
                   help="input format (default: detected from the input's content: "
                        + ", ".join(f"{a.name} = {a.title}" for a in adapters()) + "; docs/data-format.md)")
    p.add_argument("--out", required=True, help="memory store directory (resumable)")
    p.add_argument("--llm", choices=LLM_BACKENDS, default=None, help="LLM backend (default: auto)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--local", action="store_true", help="run in this process without Ray")
    where.add_argument("--ray", action="store_true",
                       help="run the Ray Data job even for a small input (default: Ray, except that nothing to build "
                            "or a build of at most build.local_max_conversations conversations and "
                            "build.local_max_turns turns runs in this process; RAY_ADDRESS: always Ray)")
    p.add_argument("--retry-failed", action="store_true", help="re-encode only the failed segments of built conversations")
    p.add_argument("--on-conflict", choices=ON_CONFLICT_CHOICES, default=None,
                   help="a built conversation whose input changed, removed or reordered stored turns: error = report "
                        "it (stage conflict) and keep the stored one; rebuild = build it again from scratch "
                        "(default: build.on_conflict). New turns of a built conversation are always added (an "
                        "increment); an older copy of one that grew since is skipped with a warning.")
    p.add_argument("--dry-run", action="store_true", help="no LLM call: count encode calls and exact prompt tokens")
    p.add_argument("--json", action="store_true", help="print the summary (or the --dry-run report) as JSON "
                                                       "(default: a table)")
    add_config_args(p)
    p.set_defaults(func=run)


_DRY_COLUMNS = ["conversation_id", "turns", "segments", "encode_calls", "prompt_tokens", "eager_calls",
                "eager_prompt_tokens"]


def dry_run_table(report: dict[str, Any], saved: Path) -> str:
    """``--dry-run``'s report as a table: per conversation, a total row, the ratio to eager encoding."""
    rows = [[printable(cid), *(c.get(k) for k in _DRY_COLUMNS[1:])] for cid, c in report["conversations"].items()]
    t = report["total"]
    rows.append(["TOTAL", *(t.get(k) for k in _DRY_COLUMNS[1:])])
    return "\n".join([
        format_table(_DRY_COLUMNS, rows),
        f"turns per segment {round((t.get('turns') or 0) / max(1, t.get('segments') or 0), 2)}; eager per-turn encoding needs "
        f"{t.get('eager_over_lychee_prompt_tokens')}x the prompt tokens (no LLM call was made)",
        f"the whole report: {saved}",
    ])


def _survey(args: argparse.Namespace) -> tuple[str, str | None]:
    """The input's format, checked (InputError when unusable; URIs are read as given), and what the
    notice says of it when it was detected."""
    if is_uri(args.input) and args.format is not None:
        return args.format, None
    survey = survey_input(args.input, args.format)
    if survey.detected:
        return survey.format, (f"{args.input}: {survey.conversations} conversation(s) in {len(survey.files)} "
                               f"{survey.unit}(s), format {survey.format} (detected)")
    return survey.format, None


def run(args: argparse.Namespace) -> int:
    """Survey the input, build, print the summary once; the exit code (see ``add_arguments``).

    Before the build the command says, in one line on stderr, the format it detected (when it did),
    the runner (local or ray, and why) and that the LLM backend is the offline rules one when no
    endpoint is configured."""
    cfg = config_from_args(args)
    fmt, detected = _survey(args)
    notice = [detected] if detected else []
    if args.dry_run:
        _say(notice)
        report = dry_run(cfg, fmt, args.input)
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / "dry_run.json").write_text(json.dumps(report, indent=1))
        slim = {cid: {k: v for k, v in c.items() if k != "calls_per_segment_prompt_tokens"} for cid, c in report["conversations"].items()}
        print(json.dumps({"conversations": slim, "total": report["total"]}, indent=1) if args.json
              else dry_run_table(report, out / "dry_run.json"))
        return EXIT_OK if report["conversations"] else EXIT_FAILED
    rules = auto_rules(cfg.llm, args.llm)
    backend = RULES_BACKEND if rules else resolve_backend(cfg.llm, args.llm)
    local = args.local
    choice = None
    if not args.local and not args.ray:
        choice = choose_runner(cfg, fmt, args.input, args.out, backend, args.retry_failed)
        local = choice.runner == LOCAL_RUNNER
    notice.append(runner_words(local, choice))
    if rules and claim_notice():
        notice.append("LLM backend: rules (no endpoint configured)")
    _say(notice)
    # progress on stderr from the first second (the same display in both runners)
    if local:
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


def runner_words(local: bool, choice: RunnerChoice | None) -> str:
    """The notice's runner part: ``runner local`` or ``runner ray``, with why (``choice``: the
    command chose it; None: ``--local`` or ``--ray`` said so) and the flag for the other one."""
    if choice is None:
        return "runner local, in-process (--local)" if local else "runner ray (--ray)"
    if local:
        return f"runner local, in-process: {choice.reason} (--ray for Ray)"
    return f"runner ray: {choice.reason}" + (" (--local for in-process)" if choice.to_build else "")


def _say(parts: list[str]) -> None:
    """The command's one notice line (nothing when there is nothing to say)."""
    if parts:
        print(f"lychee-ray build: {'; '.join(parts)}", file=sys.stderr, flush=True)
