"""Arguments several commands share: ``--config`` / ``--set``, the effective config they give, ids."""

from __future__ import annotations

import argparse

from lychee_ray.config import LycheeConfig, load_config
from lychee_ray.core.ids import id_problem


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


__all__ = ["add_config_args", "config_from_args", "id_arg"]
