"""What stands between a request and the routes: the bearer-key / body-size guard (pure ASGI,
before FastAPI parses anything), which resolves the key to a :class:`~.tenancy.Principal` the
routes read (:func:`principal_of`), and the mapping of :class:`ServiceError` to an error response."""

from __future__ import annotations

import json
from typing import Any
from collections.abc import Callable, Mapping

from fastapi import FastAPI, Request
from fastapi.responses import Response

from lychee_ray.serve.docs import ASSETS, ASSETS_URL, DOCS_URL, OPENAPI_URL, REDOC_URL
from lychee_ray.serve.errors import ErrorCode, ServiceError
from lychee_ray.serve.tenancy import ADMIN, KeyRing, Principal

# Paths served without the bearer token: liveness, and the API docs (pages, schema, assets: they
# describe the API and hold no memory; a browser fetching them sends no token).
OPEN_PATHS = frozenset({"/healthz", DOCS_URL, REDOC_URL, OPENAPI_URL, *(f"{ASSETS_URL}/{name}" for name in ASSETS)})
# Methods whose request body is size-checked and buffered.
_BODY_METHODS = ("POST", "PUT", "PATCH")
# Paths only an admin key may use (a tenant gets 403: they hold no conversation id to leak).
ADMIN_PREFIX = "/v1/admin/"
# Where the guard leaves the request's principal in the ASGI scope (routes: principal_of()).
PRINCIPAL_SCOPE_KEY = "lychee.principal"


def _error_body(code: ErrorCode, message: str) -> bytes:
    """The JSON of an :class:`~lychee_ray.serve.schemas.ErrorBody`."""
    return json.dumps({"detail": message, "error": code}).encode("utf-8")


def route_path(scope: dict) -> str:
    """The request's path below its ``root_path`` (a Ray Serve route prefix or a proxy's mount point):
    servers put the prefix in both ``path`` and ``root_path``, or only in ``root_path``."""
    path, root = scope.get("path", ""), scope.get("root_path", "")
    if root and path.startswith(root) and path[len(root):len(root) + 1] in ("/", ""):
        return path[len(root):] or "/"
    return path


def principal_of(scope: Mapping[str, Any]) -> Principal:
    """The principal the guard resolved for this request (a route without one is a wiring error:
    refused, never treated as admin)."""
    p = scope.get(PRINCIPAL_SCOPE_KEY)
    if not isinstance(p, Principal):
        raise ServiceError(401, "unauthorized", "missing or invalid bearer token", {"WWW-Authenticate": "Bearer"})
    return p


class GuardMiddleware:
    """401 without a valid bearer key (except ``OPEN_PATHS``, below the root path), 403 for a
    tenant's key on ``/v1/admin/*``; 413 for bodies over ``max_bytes`` (by Content-Length up front,
    or while reading a chunked body). The body is buffered (it is small by construction) and
    replayed to the app. The resolved principal goes into the scope (:func:`principal_of`); with no
    key configured every request is the admin."""

    def __init__(self, app: Any, keys: KeyRing, max_bytes: int, open_paths: frozenset[str] = frozenset(),
                 open_prefixes: tuple[str, ...] = ()) -> None:
        self.app = app
        self.keys = keys
        self.max_bytes = max_bytes
        # besides OPEN_PATHS: pages and assets other packages mount that hold no memory (the inspector's)
        self.open_paths = OPEN_PATHS | open_paths
        self.open_prefixes = open_prefixes

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        headers = {k.lower(): v for k, v in scope.get("headers") or []}
        path = route_path(scope)
        principal: Principal | None = ADMIN
        if self.keys.enabled and path not in self.open_paths and not (self.open_prefixes and path.startswith(self.open_prefixes)):
            auth = headers.get(b"authorization", b"")
            scheme, _, given = auth.partition(b" ")
            given = given.strip()
            principal = self.keys.resolve(given) if scheme.lower() == b"bearer" and given else None
            if principal is None:
                return await _send_error(send, 401, "unauthorized", "missing or invalid bearer token",
                                         {"WWW-Authenticate": "Bearer"})
            if not principal.admin and path.startswith(ADMIN_PREFIX):
                return await _send_error(send, 403, "forbidden", "this endpoint needs an admin key")
        scope[PRINCIPAL_SCOPE_KEY] = principal
        if scope.get("method") in _BODY_METHODS:
            cl = headers.get(b"content-length")
            if cl is not None:
                try:
                    n = int(cl)
                except ValueError:
                    return await _send_error(send, 400, "bad_request", "invalid Content-Length header")
                if n > self.max_bytes:
                    return await _send_error(send, 413, "too_large",
                                             f"request body of {n} bytes exceeds the limit of {self.max_bytes} bytes")
            chunks: list[bytes] = []
            size = 0
            while True:
                msg = await receive()
                if msg["type"] == "http.disconnect":
                    return
                chunk = msg.get("body", b"")
                size += len(chunk)
                if size > self.max_bytes:
                    return await _send_error(send, 413, "too_large",
                                             f"request body exceeds the limit of {self.max_bytes} bytes")
                chunks.append(chunk)
                if not msg.get("more_body", False):
                    break
            body = b"".join(chunks)
            replayed = False

            async def replay() -> dict:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            return await self.app(scope, replay, send)
        return await self.app(scope, receive, send)


async def _send_error(send: Callable, status: int, code: ErrorCode, message: str,
                      headers: dict[str, str] | None = None) -> None:
    body = _error_body(code, message)
    hdrs = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    hdrs += [(k.lower().encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": hdrs})
    await send({"type": "http.response.body", "body": body})


def install_guard(app: FastAPI, keys: KeyRing, max_bytes: int, open_paths: frozenset[str] = frozenset(),
                  open_prefixes: tuple[str, ...] = ()) -> None:
    """Guard ``app``: bearer ``keys`` (none configured = no auth) and bodies of at most
    ``max_bytes``; ``open_paths`` / ``open_prefixes``: more paths served without a key (pages and
    static assets that hold no memory). A :class:`ServiceError` raised by a route becomes its
    status, headers and error body."""
    app.add_middleware(GuardMiddleware, keys=keys, max_bytes=max_bytes, open_paths=open_paths,
                       open_prefixes=open_prefixes)

    @app.exception_handler(ServiceError)
    async def _service_error(_: Request, e: ServiceError) -> Response:
        return _json_error(e)


def _json_error(e: ServiceError) -> Response:
    body = json.dumps({"detail": e.message, "error": e.code, **e.data}, ensure_ascii=False,
                      separators=(",", ":")).encode("utf-8")
    return Response(body, status_code=e.status, media_type="application/json", headers=e.headers)


__all__ = ["ADMIN_PREFIX", "OPEN_PATHS", "PRINCIPAL_SCOPE_KEY", "GuardMiddleware", "install_guard", "principal_of",
           "route_path"]
