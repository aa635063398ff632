"""``lychee-ray serve``: run the query service on a memory store in the foreground (Ctrl-C stops it).

The Ray side (starting Ray and Serve, deploying, shutting down) is
:func:`lychee_ray.ray.serve.serve_until_stopped`; the client side of ``lychee-ray query --url`` is
:class:`lychee_ray.serve.MemoryClient`.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import socket
import sys
from typing import Any

from lychee_ray.cli.args import add_config_args, config_from_args
from lychee_ray.config import ray_address
from lychee_ray.io.store import NotAStoreError, StoreLayout
from lychee_ray.io.store.fs import store_root
from lychee_ray.ray.serve import serve_until_stopped

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--memory", required=True, help="memory store directory (written by `lychee-ray build`)")
    p.add_argument("--host", default=None, help="bind address (default serve.host = 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default serve.port = 8000)")
    p.add_argument("--replicas", type=int, default=None, help="replicas (default serve.replicas)")
    add_config_args(p)
    p.set_defaults(func=run)


def _auth_summary(s: Any) -> str:
    """How requests are authenticated, by key names (never a key)."""
    if not s.keys:
        return "on (one token, admin)" if s.token else "off"
    admins = sum(k.admin for k in s.keys) + bool(s.token)
    return f"on ({len(s.keys) - sum(k.admin for k in s.keys)} tenant key(s), {admins} admin)"


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def run(args: argparse.Namespace) -> int:
    """Check the store and the address, then serve until Ctrl-C; the exit code (2: unusable arguments)."""
    cfg = config_from_args(args)
    if args.host is not None:
        cfg.serve.host = args.host
    if args.port is not None:
        cfg.serve.port = args.port
    if args.replicas is not None:
        cfg.serve.replicas = args.replicas
    s = cfg.serve
    root = store_root(args.memory)  # a directory or a pyarrow.fs URI (s3://bucket/prefix)
    layout = StoreLayout(root, cfg.store)
    if not layout.is_store():
        print(f"lychee-ray serve: {NotAStoreError(root)}", file=sys.stderr)
        return 2
    if not layout.has_manifest():
        log.warning("%s has no manifest.json (build not finished?); serving the committed conversations", root)
    if not _is_loopback(s.host):
        log.warning("binding %s: the service is reachable from other machines%s", s.host,
                    "" if s.token or s.keys else " and NO key is set (serve.keys / LYCHEE_SERVE_KEYS, serve.token / "
                                                 "LYCHEE_SERVE_TOKEN)")

    # with RAY_ADDRESS the cluster's Serve proxy binds the port (possibly on another node)
    if ray_address() is None and not _port_free(s.host, s.port):
        print(f"lychee-ray serve: {s.host}:{s.port} is already in use (choose --port)", file=sys.stderr)
        return 2

    def ready(url: str) -> None:
        print(f"lychee-ray serve: {root} at {url}  (API docs {url}/docs; "
              f"auth {_auth_summary(s)}; Ctrl-C stops)", flush=True)

    def stopping() -> None:
        print("lychee-ray serve: shutting down", file=sys.stderr, flush=True)

    serve_until_stopped(args.memory, cfg, log_to_driver=args.verbose, on_ready=ready, on_stopping=stopping)
    return 0
