"""``lychee-ray verify --memory DIR``: integrity check of a memory store (a directory or a URI)."""

from __future__ import annotations

import argparse
import json

from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.io.store import StoreLayout
from lychee_ray.io.store.gc import collect_garbage, garbage_paths
from lychee_ray.io.verify import verify_store


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory", required=True, help="memory store directory or URI (s3://bucket/prefix, ...)")
    p.add_argument("--collect-garbage", action="store_true",
                   help="also remove files no commit marker names (crashed writers), once older than "
                        "store.garbage_min_age_s")
    add_config_args(p)  # store.* settings (garbage age, cache) for this run
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    layout = StoreLayout(args.memory, config_from_args(args).store)  # garbage age, cache: this run's settings
    report = verify_store(layout)
    if args.collect_garbage:
        swept = collect_garbage(layout)
        report["garbage_removed"] = {"files": swept.files_removed, "bytes": swept.bytes_freed}
    else:
        report["garbage"] = len(garbage_paths(layout))  # unreferenced paths old enough to sweep
    print(json.dumps(report, indent=1))
    return 0 if report["ok"] else 1
