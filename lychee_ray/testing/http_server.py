"""The test server's HTTP plumbing: a threaded keep-alive server, a request handler that hands
every request to its owner, and the writers of JSON / raw / OpenAI-style error replies."""

from __future__ import annotations

import json
import socket
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Protocol

from lychee_ray.testing.recording import RecordedRequest

_ACCEPT_BACKLOG = 256  # many concurrent clients in benchmarks


class Dispatcher(Protocol):
    """What the handler hands requests to (the :class:`~lychee_ray.testing.openai_server.OpenAIServer`)."""

    def _dispatch(self, h: RequestHandler, raw: bytes | None) -> None: ...


class HTTPServer(ThreadingHTTPServer):
    """Daemon-threaded server that does not wait for open connections when it closes."""

    daemon_threads = True
    block_on_close = False
    request_queue_size = _ACCEPT_BACKLOG
    allow_reuse_address = True
    owner: Dispatcher


class RequestHandler(BaseHTTPRequestHandler):
    """Reads the request body and hands the request to ``server.owner``; silent access log."""

    protocol_version = "HTTP/1.1"  # keep-alive, like real providers
    server: HTTPServer

    def setup(self) -> None:
        super().setup()
        # Headers and body go out in separate writes; without NODELAY, Nagle + delayed ACK add ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 — silence stderr access log
        pass

    def handle_one_request(self) -> None:
        try:
            super().handle_one_request()
        except (TimeoutError, BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
            self.close_connection = True  # client gave up (e.g. its timeout); nothing to answer

    def do_POST(self) -> None:  # noqa: N802
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        self.server.owner._dispatch(self, raw)

    def do_GET(self) -> None:  # noqa: N802
        self.server.owner._dispatch(self, None)


def send_error(h: RequestHandler, rec: RecordedRequest, code: int, message: str, *,
               retry_after: float | str | None = None, param: str | None = None, err_type: str | None = None) -> None:
    """An OpenAI-style error body (``{"error": {message, type, param, code}}``), with ``Retry-After``."""
    headers = {}
    if retry_after is not None:
        headers["Retry-After"] = (retry_after if isinstance(retry_after, str)
                                  else f"{retry_after:g}")
    body = {"error": {"message": message, "type": err_type or ("server_error" if code >= 500 else
                                                                "invalid_request_error"),
                      "param": param, "code": err_type}}
    if not rec.action:
        rec.action = f"status:{code}"
    send_json(h, rec, code, body, headers)


def send_json(h: RequestHandler, rec: RecordedRequest, code: int, obj: Any,
              headers: dict[str, str] | None = None) -> None:
    """``obj`` as a JSON reply."""
    send_raw(h, rec, code, json.dumps(obj).encode(), "application/json", headers)


def send_raw(h: RequestHandler, rec: RecordedRequest, code: int, payload: bytes, ctype: str,
             headers: dict[str, str] | None = None) -> None:
    """Any reply; records its status. A client that already gave up is not an error."""
    rec.status = code
    try:
        h.send_response(code)
        h.send_header("Content-Type", ctype)
        h.send_header("Content-Length", str(len(payload)))
        for k, v in (headers or {}).items():
            h.send_header(k, v)
        h.end_headers()
        h.wfile.write(payload)
    except (BrokenPipeError, ConnectionResetError, ConnectionAbortedError):
        h.close_connection = True  # the client already gave up (timeout)


__all__ = ["HTTPServer", "RequestHandler", "send_error", "send_json", "send_raw"]
