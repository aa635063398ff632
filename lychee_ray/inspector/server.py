"""``lychee-ray inspect``: the service's app with the inspector's pages, on uvicorn in this process.

No Ray: one :class:`~lychee_ray.serve.service.MemoryService` over the store (the engine, scope checks
and the configured keys, as one Serve replica has them) and its FastAPI app with the pages under
``/ui`` (``/`` leads there). It binds ``inspect.host`` (loopback by default) on ``inspect.port``, a
free port when 0. :class:`ThreadedServer` runs any such app on a thread (tests, benchmarks).
"""

from __future__ import annotations

import ipaddress
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from fastapi import FastAPI
from fastapi.responses import RedirectResponse
from starlette.middleware.trustedhost import TrustedHostMiddleware

from lychee_ray.config import LycheeConfig
from lychee_ray.inspector.evalruns import RunCatalog
from lychee_ray.inspector.routes import UI_PREFIX, ui_mount
from lychee_ray.serve.app import create_app
from lychee_ray.serve.service import MemoryService


# Host headers a loopback-bound inspector answers: a page elsewhere that re-points its own name at
# 127.0.0.1 (DNS rebinding) sends its name, and is refused.
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1", "[::1]")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def inspector_app(service: MemoryService, runs: RunCatalog, cfg: LycheeConfig,
                  trusted_hosts: list[str] | None = None) -> FastAPI:
    """The service's app with the pages under ``/ui`` and ``/`` redirecting there; ``trusted_hosts``:
    the only Host headers answered (None: any)."""
    app = create_app(service, [ui_mount(service, runs, cfg.inspect)])
    if trusted_hosts is not None:
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=trusted_hosts)

    @app.get("/", include_in_schema=False)
    async def root() -> RedirectResponse:
        return RedirectResponse(UI_PREFIX + "/")

    return app


def free_port(host: str) -> int:
    """A port nothing listens on now (the OS's choice)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def base_url(host: str, port: int) -> str:
    h = f"[{host}]" if ":" in host else host
    return f"http://{h}:{port}"


class ThreadedServer:
    """An ASGI app on uvicorn: :meth:`run` in the foreground, or :meth:`start` on a thread."""

    def __init__(self, app: Any, host: str, port: int = 0) -> None:
        self.port = port or free_port(host)
        self.base_url = base_url(host, self.port)
        self.server = uvicorn.Server(uvicorn.Config(app, host=host, port=self.port, log_level="warning",
                                                    access_log=False, lifespan="off"))
        self._thread: threading.Thread | None = None

    def run(self, on_ready: Callable[[], None] | None = None) -> None:
        """Serve until interrupted (Ctrl-C); ``on_ready()`` once it listens."""
        if on_ready is not None:
            threading.Thread(target=self._announce, args=(on_ready,), daemon=True).start()
        self.server.run()

    def _announce(self, on_ready: Callable[[], None]) -> None:
        while not self.server.started and not self.server.should_exit:
            time.sleep(0.05)
        if self.server.started:
            on_ready()

    def start(self, timeout_s: float = 60.0) -> str:
        """Serve on a thread (uvicorn installs no signal handlers off the main thread); the base URL."""
        self._thread = threading.Thread(target=self.server.run, name="lychee-http", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError(f"the server did not start on {self.base_url}")
            time.sleep(0.05)
        return self.base_url

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=30)


class InspectorServer(ThreadedServer):
    """The inspector of one store (and its eval runs) on ``inspect.host`` / ``inspect.port``."""

    def __init__(self, memory: str | Path, cfg: LycheeConfig, eval_runs: list[str] | None = None,
                 service: MemoryService | None = None) -> None:
        self.service = service if service is not None else MemoryService(memory, cfg)
        self.runs = RunCatalog([*cfg.inspect.eval_runs, *(eval_runs or [])])
        host = cfg.inspect.host
        trusted = [host, *LOOPBACK_HOSTS] if is_loopback(host) else None
        super().__init__(inspector_app(self.service, self.runs, cfg, trusted), host, cfg.inspect.port)
        self.url = self.base_url + UI_PREFIX + "/"

    def run(self, on_ready: Callable[[], None] | None = None) -> None:
        try:
            super().run(on_ready)
        finally:
            self.service.close()

    def stop(self) -> None:
        super().stop()
        self.service.close()


__all__ = ["LOOPBACK_HOSTS", "InspectorServer", "ThreadedServer", "base_url", "free_port", "inspector_app", "is_loopback"]
