"""``lychee-ray serve``: run the query service on a memory store in the foreground (Ctrl-C stops it).

Also the client side of ``lychee-ray query --url``: :func:`run_remote`.
"""

from __future__ import annotations

import argparse
import ipaddress
import logging
import os
import signal
import socket
import sys
import time
from typing import Any

from ..cli import add_config_args, config_from_args

log = logging.getLogger(__name__)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("serve", help="serve a memory store over HTTP (Ray Serve; runs until Ctrl-C)")
    p.add_argument("--memory", required=True, help="memory store directory (written by `lychee-ray build`)")
    p.add_argument("--host", default=None, help="bind address (default serve.host = 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default serve.port = 8000)")
    p.add_argument("--replicas", type=int, default=None, help="replicas (default serve.replicas)")
    add_config_args(p)
    p.set_defaults(func=run)


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
    from pathlib import Path

    cfg = config_from_args(args)
    if args.host is not None:
        cfg.serve.host = args.host
    if args.port is not None:
        cfg.serve.port = args.port
    if args.replicas is not None:
        cfg.serve.replicas = args.replicas
    s = cfg.serve
    root = Path(args.memory)
    if not (root / "commits").is_dir():
        print(f"lychee-ray serve: not a memory store (no commits/): {root}", file=sys.stderr)
        return 2
    if not (root / "manifest.json").exists():
        log.warning("%s has no manifest.json (build not finished?); serving the committed conversations", root)
    if not _is_loopback(s.host):
        log.warning("binding %s: the service is reachable from other machines%s", s.host,
                    "" if s.token else " and NO bearer token is set (serve.token / LYCHEE_SERVE_TOKEN)")

    import ray

    from ..config import ray_address
    from ..serve_deploy import apply_ray_env, start_service, stop_service

    external = ray_address() is not None
    if not external and not _port_free(s.host, s.port):
        print(f"lychee-ray serve: {s.host}:{s.port} is already in use (choose --port)", file=sys.stderr)
        return 2

    def on_term(signum: int, frame: Any) -> None:  # `kill` stops it as cleanly as Ctrl-C
        raise KeyboardInterrupt

    # Ctrl-C even where SIGINT was inherited as ignored (e.g. started with `&` from a script)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started_ray = False
    try:
        if not ray.is_initialized():
            kw: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": args.verbose}
            if external:
                ray.init(address=ray_address(), **kw)
            else:
                if cfg.ray.object_store_memory_mb:
                    kw["object_store_memory"] = cfg.ray.object_store_memory_mb * 1024 * 1024
                apply_ray_env(cfg)
                ray.init(include_dashboard=False, **kw)
                started_ray = True
        signal.signal(signal.SIGTERM, on_term)  # after ray.init, which installs its own
        url = start_service(root, cfg)
        print(f"lychee-ray serve: {root} at {url}  (API docs {url}/docs; "
              f"auth {'on' if s.token else 'off'}; Ctrl-C stops)", flush=True)
        while True:
            time.sleep(1.0)
    except KeyboardInterrupt:
        print("lychee-ray serve: shutting down", file=sys.stderr, flush=True)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the shutdown short
        try:
            if ray.is_initialized():
                stop_service(shutdown_serve=not external)
        finally:
            if started_ray:
                ray.shutdown()
            signal.signal(signal.SIGINT, signal.default_int_handler)
    return 0


# ------------------------------------------------------------------------------------------------
# client side of `lychee-ray query --url`
# ------------------------------------------------------------------------------------------------


def run_remote(args: argparse.Namespace) -> Any:
    """POST the question to ``args.url``; the result model, or an exit code after printing why."""
    import httpx

    from ..query import QueryResult, SearchResult

    token = args.token or os.environ.get("LYCHEE_SERVE_TOKEN")
    body = {"conversation_id": args.conversation, "user_id": args.user, "question": args.question,
            "question_date": args.question_date, "budget_tokens": args.budget_tokens}
    body = {k: v for k, v in body.items() if v is not None}
    if getattr(args, "llm", None):
        print("lychee-ray query: --llm is ignored with --url (the service's configuration decides)", file=sys.stderr)
    path = "/v1/search" if args.search_only else "/v1/query"
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        r = httpx.post(args.url.rstrip("/") + path, json=body, headers=headers, timeout=args.timeout)
    except httpx.HTTPError as e:
        print(f"lychee-ray query: cannot reach {args.url}: {e}", file=sys.stderr)
        return 1
    if r.status_code != 200:
        try:
            detail = r.json().get("detail", r.text)
        except ValueError:
            detail = r.text
        print(f"lychee-ray query: HTTP {r.status_code}: {detail}", file=sys.stderr)
        return 2 if r.status_code in (401, 404, 413, 422) else 1
    d = r.json()
    d["timings_ms"] = d.pop("timings", {})
    return (SearchResult if args.search_only else QueryResult).model_validate(d)
