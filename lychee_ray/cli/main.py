"""``lychee-ray`` command line: one subcommand per module in :mod:`lychee_ray.cli`.

Every command runs inside one wrapper: an expected failure prints one line and exits with its
documented code (:mod:`lychee_ray.cli.errors`), anything else one line plus a hint to ``--debug``
(which shows the traceback). ``--verbose`` brings back debug logging and Ray's own console output.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from typing import NoReturn

from lychee_ray.cli.errors import EXIT_USAGE, report
from lychee_ray.core.ids import printable
from lychee_ray.logs import configure_logging, set_quiet

# Command -> (its module, its one-line help); order = help order. A module's ``add_arguments(parser)``
# adds the command's arguments and sets ``func``, the function that runs it.
COMMANDS: dict[str, tuple[str, str]] = {
    "convert": ("lychee_ray.cli.convert", "convert any supported input format to canonical conversations JSONL "
                                          "(`convert --help` lists the formats)"),
    "config": ("lychee_ray.cli.config_cmd", "configuration tools"),
    "build": ("lychee_ray.cli.build", "build a memory store from conversations"),
    "list": ("lychee_ray.cli.list_cmd", "list the conversations of a memory store (ids, user, sizes, build date)"),
    "errors": ("lychee_ray.cli.errors_cmd", "show a memory store's build errors (and input warnings)"),
    "verify": ("lychee_ray.cli.verify", "check a memory store's references, id maps and coverage"),
    "stats": ("lychee_ray.cli.stats", "memory quality of a store: records per segment, rejected / repaired records"),
    "delete": ("lychee_ray.cli.delete", "erase a conversation or a user's conversations from a memory store, everywhere"),
    "migrate": ("lychee_ray.cli.migrate", "rewrite a store written by an older lychee-ray in the current layout"),
    "eval-seg": ("lychee_ray.cli.eval_seg", "Pk / WindowDiff / boundary F1 of the segmenter on a gold segmentation corpus"),
    "query": ("lychee_ray.cli.query", "answer a question from a memory store"),
    "history": ("lychee_ray.cli.history", "a slot's values in time order: when each held and what replaced it"),
    "serve": ("lychee_ray.cli.serve", "serve a memory store over HTTP (Ray Serve; runs until Ctrl-C)"),
    "inspect": ("lychee_ray.cli.inspect_cmd", "open the web inspector on a memory store (and eval runs) in this "
                                              "process, on 127.0.0.1 (no Ray; runs until Ctrl-C)"),
    "eval-retrieval": ("lychee_ray.cli.eval_retrieval",
                       "id/content coverage of the selected context vs baselines at the same budget (no LLM)"),
    "eval": ("lychee_ray.cli.eval", "benchmark evaluation: build (or reuse) memory, answer, judge, report"),
}


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose usage errors are one line (``lychee-ray query: argument --conversation:
    …; see --help``) and exit 2, as every other expected failure (README, "Exit codes")."""

    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: {printable(' '.join(message.split()))} (see {self.prog} --help)\n")


def _add_global_flags(p: argparse.ArgumentParser, default: object) -> None:
    """``--verbose`` / ``--debug``, accepted before and after the command name."""
    p.add_argument("-v", "--verbose", action="store_true", default=default,
                   help="debug logging, and Ray's own logs and progress output")
    p.add_argument("--debug", action="store_true", default=default, help="show the traceback of an error")


def command_in(argv: Sequence[str]) -> str | None:
    """The command ``argv`` names: its first argument that is no flag (the global flags take no value)."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``lychee-ray`` parser: every command, with the arguments of the one ``argv`` names
    (of every command when ``argv`` is None: the whole parser, which loads every command's module)."""
    parser = OneLineParser(prog="lychee-ray", description="LycheeMemory V2 long-term memory on Ray",
                                     epilog="exit codes: 0 done; 1 the work failed; 2 unusable request "
                                            "(arguments, input, store, conversation id); 130 interrupted")
    _add_global_flags(parser, False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    wanted = None if argv is None else command_in(argv)
    for name, (module, help_text) in COMMANDS.items():
        p = sub.add_parser(name, help=help_text)
        if argv is None or name == wanted:
            # lazy: a command's module loads what the command needs (the build runner, the query engine,
            # Ray); `lychee-ray --help` and the other commands load none of it
            importlib.import_module(module).add_arguments(p)
        _add_global_flags(p, argparse.SUPPRESS)  # after the command name too; SUPPRESS keeps the global value
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code (see :mod:`lychee_ray.cli.errors`)."""
    argv = sys.argv[1:] if argv is None else argv
    args = build_parser(argv).parse_args(argv)
    configure_logging(args.verbose)
    set_quiet(not args.verbose)
    try:
        return int(args.func(args) or 0)
    except BaseException as e:  # noqa: BLE001 — the one place errors become a line and an exit code
        if isinstance(e, SystemExit) or args.debug:
            raise
        return report(e, f"lychee-ray {args.command}")


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
