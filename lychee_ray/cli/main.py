"""``lychee-ray`` command line: one subcommand per module in :mod:`lychee_ray.cli`.

Every command runs inside one wrapper: an expected failure prints one line and exits with its
documented code (:mod:`lychee_ray.cli.errors`), anything else one line plus a hint to ``--debug``
(which shows the traceback). ``--verbose`` brings back debug logging and Ray's own console output.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from lychee_ray.cli.errors import report
from lychee_ray.config import LycheeConfig, load_config
from lychee_ray.core.ids import id_problem
from lychee_ray.logs import configure_logging, set_quiet

# Each module exposes ``register(subparsers)`` and sets ``func`` on its parser; order = help order.
COMMAND_MODULES = [
    "lychee_ray.cli.convert",
    "lychee_ray.cli.config_cmd",
    "lychee_ray.cli.build",
    "lychee_ray.cli.list_cmd",
    "lychee_ray.cli.errors_cmd",
    "lychee_ray.cli.verify",
    "lychee_ray.cli.stats",
    "lychee_ray.cli.delete",
    "lychee_ray.cli.migrate",
    "lychee_ray.cli.eval_seg",
    "lychee_ray.cli.query",
    "lychee_ray.cli.serve",
    "lychee_ray.cli.eval_retrieval",
    "lychee_ray.cli.eval",
]


def add_config_args(p: argparse.ArgumentParser) -> None:
    """``--config FILE`` (repeatable) and ``--set key=value`` (repeatable)."""
    p.add_argument("--config", action="append", default=[], metavar="FILE", help="YAML config merged over the defaults")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one key, e.g. llm.model=gpt-4o-mini")


def id_arg(value: str) -> str:
    """argparse ``type`` of an id argument (``--conversation``, ``--user``): the one id policy
    (core/ids.py), so the CLI refuses what the HTTP API refuses, with the reason."""
    problem = id_problem(value)
    if problem is not None:
        raise argparse.ArgumentTypeError(f"the id {problem}")
    return value


def config_from_args(args: argparse.Namespace) -> LycheeConfig:
    """Effective config for a parsed command line (commands pass its ``store`` section to the store
    they open: :class:`~lychee_ray.io.store.StoreLayout`)."""
    return load_config(files=getattr(args, "config", []), sets=getattr(args, "set", []))


def _add_global_flags(p: argparse.ArgumentParser, default: object) -> None:
    """``--verbose`` / ``--debug``, accepted before and after the command name."""
    p.add_argument("-v", "--verbose", action="store_true", default=default,
                   help="debug logging, and Ray's own logs and progress output")
    p.add_argument("--debug", action="store_true", default=default, help="show the traceback of an error")


def build_parser() -> argparse.ArgumentParser:
    """The ``lychee-ray`` parser with every command that is installed."""
    parser = argparse.ArgumentParser(prog="lychee-ray", description="LycheeMemory V2 long-term memory on Ray",
                                     epilog="exit codes: 0 done; 1 the work failed; 2 unusable request "
                                            "(arguments, input, store, conversation id); 130 interrupted")
    _add_global_flags(parser, False)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:  # a command whose module has not landed yet
                continue
            raise
        mod.register(sub)
    for p in sub.choices.values():  # after the command name too; SUPPRESS keeps the global value
        _add_global_flags(p, argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Run one command; its exit code (see :mod:`lychee_ray.cli.errors`)."""
    parser = build_parser()
    args = parser.parse_args(argv)
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
