"""``lychee-ray config show``: print the effective configuration (secrets masked), or the defaults."""

from __future__ import annotations

import argparse

import yaml

from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.config.reference import default_yaml


def add_arguments(p: argparse.ArgumentParser) -> None:
    csub = p.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    show = csub.add_parser("show", help="print the effective config as YAML")
    show.add_argument("--defaults", action="store_true",
                      help="print the defaults with a comment per key (what configs/default.yaml holds) instead")
    add_config_args(show)
    show.set_defaults(func=run_show)


def run_show(args: argparse.Namespace) -> int:
    if args.defaults:
        print(default_yaml(), end="")
        return 0
    cfg = config_from_args(args)
    print(yaml.safe_dump(cfg.redacted(), sort_keys=False), end="")
    print(f"# fingerprint: {cfg.fingerprint()}  (store keys: {cfg.store_fingerprint()})")
    return 0
