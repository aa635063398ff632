"""``lychee-ray inspect --memory DIR [--eval RUN ...]``: the web inspector in this process (no Ray).

Binds ``inspect.host`` (127.0.0.1) on a free port (``--port`` / ``inspect.port`` to choose one),
prints the URL and serves until Ctrl-C. The pages: docs/inspector.md.
"""

from __future__ import annotations

import argparse
import sys

from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.cli.errors import CliError
from lychee_ray.inspector.evalruns import EvalRunError
from lychee_ray.inspector.server import InspectorServer


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.epilog = "the pages: conversations, one conversation, search playground, build and eval reports (docs/inspector.md)"
    p.add_argument("--memory", required=True, help="memory store directory or URI (written by `lychee-ray build`)")
    p.add_argument("--eval", action="append", default=[], metavar="RUN",
                   help="an eval run to show (repeatable): a `lychee-ray eval` run directory, or the JSON file of "
                        "`lychee-ray eval-retrieval --per-question --out`")
    p.add_argument("--host", default=None, help="bind address (default inspect.host = 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default inspect.port = 0: a free one)")
    add_config_args(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    """Open the store and the runs (one line and exit 2 when unusable), then serve until Ctrl-C."""
    cfg = config_from_args(args)
    if args.host is not None:
        cfg.inspect.host = args.host
    if args.port is not None:
        cfg.inspect.port = args.port
    try:
        server = InspectorServer(args.memory, cfg, args.eval)  # not a store: NotAStoreError, one line (cli.errors)
    except EvalRunError as e:
        raise CliError("input", str(e)) from None

    def ready() -> None:
        auth = "bearer keys as for `lychee-ray serve`" if server.service.keys.enabled else "no key (loopback)"
        print(f"lychee-ray inspect: {server.service.root} at {server.url}  ({len(server.runs.runs)} eval run(s); "
              f"auth: {auth}; Ctrl-C stops)", flush=True)

    try:
        server.run(on_ready=ready)
    except KeyboardInterrupt:
        pass
    print("lychee-ray inspect: stopped", file=sys.stderr)
    return 0
