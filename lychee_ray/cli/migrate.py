"""``lychee-ray migrate --memory STORE``: bring a version-1 store to the current store version."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict

from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.cli.store_view import open_layout
from lychee_ray.io.store.migrate import migrate_store


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = ("safe to run while the store is served; running it again changes nothing "
                "(docs/architecture.md, 'The store contract')")
    p.add_argument("--memory", required=True, help="memory store directory or URI (s3://bucket/prefix, ...)")
    add_config_args(p)  # store.* settings (leases on object stores)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Migrate and print what changed as JSON; exit 2 when the path is not a store."""
    settings = config_from_args(args).store
    report = migrate_store(open_layout(args.memory, settings))
    print(json.dumps(asdict(report), indent=1))
    return 0
