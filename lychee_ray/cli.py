"""``lychee-ray`` command line: one subcommand per module in :mod:`lychee_ray.commands`."""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from .config import ConfigError, LycheeConfig, load_config

# Each module exposes ``register(subparsers)`` and sets ``func`` on its parser; order = help order.
COMMAND_MODULES = [
    "lychee_ray.commands.convert",
    "lychee_ray.commands.config_cmd",
    "lychee_ray.commands.build",
    "lychee_ray.commands.verify",
    "lychee_ray.commands.eval_seg",
    "lychee_ray.commands.query",
    "lychee_ray.commands.serve",
    "lychee_ray.commands.eval_retrieval",
    "lychee_ray.commands.eval",
]


def add_config_args(p: argparse.ArgumentParser) -> None:
    """``--config FILE`` (repeatable) and ``--set key=value`` (repeatable)."""
    p.add_argument("--config", action="append", default=[], metavar="FILE", help="YAML config merged over the defaults")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="override one key, e.g. llm.model=gpt-4o-mini")


def config_from_args(args: argparse.Namespace) -> LycheeConfig:
    """Effective config for a parsed command line."""
    return load_config(files=getattr(args, "config", []), sets=getattr(args, "set", []))


# Libraries that log every HTTP request or their own loading at INFO.
NOISY_LOGGERS = ("httpx", "httpx2", "httpcore", "openai", "faiss.loader", "sentence_transformers", "urllib3")


def configure_logging(verbose: bool = False) -> None:
    """INFO for lychee_ray, WARNING for chatty libraries (DEBUG everywhere with ``-v``)."""
    logging.basicConfig(
        level=logging.DEBUG if verbose else logging.INFO,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )
    if not verbose:
        for name in NOISY_LOGGERS:
            logging.getLogger(name).setLevel(logging.WARNING)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="lychee-ray", description="LycheeMemory V2 long-term memory on Ray")
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name == name:  # a command whose module has not landed yet
                continue
            raise
        mod.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    configure_logging(args.verbose)
    try:
        return int(args.func(args) or 0)
    except ConfigError as e:
        print(f"lychee-ray: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
