"""``lychee-ray config show``: print the effective configuration (secrets masked)."""

from __future__ import annotations

import argparse

import yaml

from lychee_ray.cli.args import add_config_args, config_from_args


def add_arguments(p: argparse.ArgumentParser) -> None:
    csub = p.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    show = csub.add_parser("show", help="print the effective config as YAML")
    add_config_args(show)
    show.set_defaults(func=run_show)


def run_show(args: argparse.Namespace) -> int:
    cfg = config_from_args(args)
    print(yaml.safe_dump(cfg.redacted(), sort_keys=False), end="")
    print(f"# fingerprint: {cfg.fingerprint()}")
    return 0
