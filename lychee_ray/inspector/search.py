"""The search playground: a scoped search with its explanation, and the same request as JSON and curl.

The search is the service's own ``POST /v1/search`` (same scope checks, limits and engine) with
``explain`` on; the page gets the result, the request body that reproduces it and a ``curl`` line for
that endpoint (the key as an environment variable, never its value). Texts in the pool and drop lists
are cut to ``inspect.preview_chars``.
"""

from __future__ import annotations

import json
import shlex
from typing import Any

from lychee_ray.inspector.models import SearchPage
from lychee_ray.serve.schemas import QueryRequest

# The variable the curl line reads the bearer key from (the one `lychee-ray query --url` reads).
KEY_ENV = "LYCHEE_SERVE_TOKEN"
SEARCH_PATH = "/v1/search"


def cut(text: str, n: int) -> str:
    """``text`` of at most ``n`` characters (an ellipsis marks a cut)."""
    return text if len(text) <= n else text[: max(0, n - 1)] + "…"


def request_body(req: QueryRequest) -> dict[str, Any]:
    """The ``POST /v1/search`` body that reproduces ``req`` (fields left at their defaults omitted)."""
    return req.body() | {"explain": True}


def curl_line(base_url: str, body: dict[str, Any], auth: bool) -> str:
    """A shell line that sends ``body`` to the service's search endpoint."""
    parts = ["curl", "-s", base_url.rstrip("/") + SEARCH_PATH, "-H", "Content-Type: application/json"]
    line = " ".join(shlex.quote(p) for p in parts)
    if auth:
        line += f' -H "Authorization: Bearer ${KEY_ENV}"'
    return line + " -d " + shlex.quote(json.dumps(body, ensure_ascii=False, separators=(",", ":")))


def search_page(result_json: bytes, req: QueryRequest, base_url: str, auth: bool, preview_chars: int) -> SearchPage:
    """The page of one search: ``result_json`` (the service's search body) with its long texts cut."""
    result = json.loads(result_json)
    ex = result.get("explain") or {}
    for item in [*ex.get("pool", []), *ex.get("dropped", [])]:
        item["text"] = cut(item.get("text") or "", preview_chars)
    body = request_body(req)
    return SearchPage(result=result, request=body, curl=curl_line(base_url, body, auth))


__all__ = ["KEY_ENV", "SEARCH_PATH", "curl_line", "cut", "request_body", "search_page"]
