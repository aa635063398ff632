"""The API's documentation pages, complete without internet: Swagger UI at ``/docs`` and ReDoc at
``/redoc``, their JavaScript, CSS and favicon served by the app itself under ``/docs-assets``.

Why: FastAPI's own pages load Swagger UI from a CDN (and ReDoc's fonts from Google), so on an
offline machine ``/docs`` is blank. The assets are the files the ``fastapi-offline`` package ships
(only its files are used). Every URL a page names is prefixed with the request's ``root_path``,
so the pages also work under a Ray Serve route prefix or behind a proxy that sets one.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html
from fastapi.responses import FileResponse, HTMLResponse

from lychee_ray.serve.errors import ServiceError

DOCS_URL = "/docs"
REDOC_URL = "/redoc"
OPENAPI_URL = "/openapi.json"
ASSETS_URL = "/docs-assets"
# The package whose static files are served, and their names in it
ASSETS_PACKAGE = "fastapi_offline"
SWAGGER_JS, SWAGGER_CSS, REDOC_JS, FAVICON = "swagger-ui-bundle.js", "swagger-ui.css", "redoc.standalone.js", "favicon.png"
# Only these files are served (a fixed list, not a directory): name -> media type
ASSETS = {SWAGGER_JS: "text/javascript", SWAGGER_CSS: "text/css", REDOC_JS: "text/javascript", FAVICON: "image/png"}
# Browsers may keep the assets a day (they change only with the package)
ASSET_CACHE_CONTROL = "public, max-age=86400"


def assets_dir() -> Path:
    """The directory holding the Swagger UI / ReDoc files (found without importing the package)."""
    spec = importlib.util.find_spec(ASSETS_PACKAGE)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"{ASSETS_PACKAGE} is not installed: the API docs pages need its assets "
                                  f"(pip install fastapi-offline)")
    return Path(spec.origin).parent / "static"


def _root(req: Request) -> str:
    return str(req.scope.get("root_path", "")).rstrip("/")


def install_docs(app: FastAPI) -> None:
    """Serve ``/docs`` and ``/redoc`` from local assets on ``app`` (created with ``docs_url=None,
    redoc_url=None``): a route for the fixed list of asset files (no directory is exposed). The guard
    middleware leaves these paths open, like ``/healthz``."""
    directory = assets_dir()
    missing = [n for n in ASSETS if not (directory / n).is_file()]
    if missing:
        raise FileNotFoundError(f"{ASSETS_PACKAGE} lacks the API docs assets {missing} in {directory}")
    title = app.title

    @app.get(ASSETS_URL + "/{name}", include_in_schema=False)
    async def asset(name: str) -> FileResponse:
        media_type = ASSETS.get(name)
        if media_type is None:
            raise ServiceError(404, "not_found", f"no docs asset {name!r}")
        return FileResponse(directory / name, media_type=media_type, headers={"Cache-Control": ASSET_CACHE_CONTROL})

    @app.get(DOCS_URL, include_in_schema=False)
    async def swagger_ui(req: Request) -> HTMLResponse:
        root = _root(req)
        return get_swagger_ui_html(openapi_url=root + OPENAPI_URL, title=f"{title} - Swagger UI",
                                   swagger_js_url=f"{root}{ASSETS_URL}/{SWAGGER_JS}",
                                   swagger_css_url=f"{root}{ASSETS_URL}/{SWAGGER_CSS}",
                                   swagger_favicon_url=f"{root}{ASSETS_URL}/{FAVICON}")

    @app.get(REDOC_URL, include_in_schema=False)
    async def redoc(req: Request) -> HTMLResponse:
        root = _root(req)
        return get_redoc_html(openapi_url=root + OPENAPI_URL, title=f"{title} - ReDoc",
                              redoc_js_url=f"{root}{ASSETS_URL}/{REDOC_JS}",
                              redoc_favicon_url=f"{root}{ASSETS_URL}/{FAVICON}", with_google_fonts=False)


__all__ = ["ASSETS", "ASSETS_URL", "DOCS_URL", "OPENAPI_URL", "REDOC_URL", "assets_dir", "install_docs"]
