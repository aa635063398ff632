"""``lychee-ray verify --memory DIR``: integrity check of a memory store."""

from __future__ import annotations

import argparse
import json

from lychee_ray.io.verify import verify_store


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("verify", help="check a memory store's references, id maps and coverage")
    p.add_argument("--memory", required=True, help="memory store directory")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = verify_store(args.memory)
    print(json.dumps(report, indent=1))
    return 0 if report["ok"] else 1
