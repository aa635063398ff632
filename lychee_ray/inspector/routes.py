"""The inspector's routes, mounted on the service's FastAPI app under a prefix (``/ui``).

The pages and their assets (``/ui/``, ``/ui/static/*``) hold no memory and are served without a
key; every ``/ui/api/*`` endpoint goes through the service's guard — the same bearer keys, tenant
scopes and admission as ``/v1/*``: a tenant's key lists, opens and searches only its users'
conversations (any other id answers the 404 a missing one gets), and eval runs, which span every
conversation of their dataset, are an admin's. The pages read; the one write is an erasure the
request confirms by repeating the conversation id.
"""

from __future__ import annotations

import asyncio
import mimetypes
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import FileResponse, RedirectResponse, Response

from lychee_ray.config import InspectConfig
from lychee_ray.inspector.catalog import ConversationCatalog
from lychee_ray.inspector.conversation import conversation_detail
from lychee_ray.inspector.evalruns import RunCatalog
from lychee_ray.inspector.models import (
    ConversationDetail,
    ConversationList,
    EvalQuestionPage,
    EvalRunInfo,
    SearchPage,
    StoreReport,
    StoreSummary,
)
from lychee_ray.inspector.reports import ReportBuilder
from lychee_ray.inspector.search import search_page
from lychee_ray.io.store import EraseReport
from lychee_ray.serve.app import Mount, valid_id
from lychee_ray.serve.errors import ServiceError, invalid_field
from lychee_ray.serve.middleware import principal_of
from lychee_ray.serve.schemas import QueryRequest
from lychee_ray.serve.scope import check_scope
from lychee_ray.serve.service import MemoryService
from lychee_ray.serve.tenancy import Principal

STATIC_DIR = Path(__file__).resolve().parent / "static"
UI_PREFIX = "/ui"
_NO_STORE = {"Cache-Control": "no-store"}


def static_files() -> dict[str, Path]:
    """The page's assets by name (the only files the static route serves)."""
    return {p.name: p for p in STATIC_DIR.iterdir() if p.is_file() and p.suffix in (".html", ".js", ".css", ".svg")}


class Inspector:
    """What the routes share: the service (store, engine, keys), the eval runs, what is remembered."""

    def __init__(self, service: MemoryService, runs: RunCatalog, cfg: InspectConfig) -> None:
        self.service = service
        self.runs = runs
        self.cfg = cfg
        self.catalog = ConversationCatalog(service.layout)
        self.reports = ReportBuilder(cfg.report_max_conversations)
        # the first read of the errors table costs pyarrow's one-time set-up (~1 s): paid here, not by
        # the first request for the list
        self.catalog.failed_builds(service.store.reader)

    @property
    def reader(self) -> Any:
        return self.service.store.reader

    def in_scope(self, principal: Principal) -> list[str]:
        """Conversation ids ``principal`` may see, by id."""
        r = self.reader
        return sorted(cid for u, cids in r.by_user.items() if principal.allows(u) for cid in cids)

    def summary(self, principal: Principal) -> StoreSummary:
        m = self.service.manifest if principal.admin else {}
        r = self.reader
        return StoreSummary(
            root=str(self.service.root) if principal.admin else "", conversations=len(self.in_scope(principal)),
            failed_builds=len(self.catalog.failed_builds(r)) if principal.admin else 0,
            users=sum(1 for u in r.by_user if principal.allows(u)), written_at=m.get("written_at"),
            backend=self.service.llm_backend(), models=m.get("models") or {}, counts=m.get("counts") or {},
            quality=m.get("quality"), tokens=m.get("tokens") or {}, last_run=m.get("last_run"),
            auth=self.service.keys.enabled, admin=principal.admin,
            eval_runs=self.runs.names() if principal.admin else [], page_size=self.cfg.page_size,
            kinds=["agent", "chat", "dialogue"])


def _run(insp: Inspector, name: str, principal: Principal) -> Any:
    if not principal.admin:
        raise ServiceError(403, "forbidden", "eval runs need an admin key")
    run = insp.runs.runs.get(name)
    if run is None:
        raise ServiceError(404, "not_found", f"unknown eval run {name!r}")
    return run


def install_ui(app: FastAPI, service: MemoryService, runs: RunCatalog, cfg: InspectConfig, prefix: str = UI_PREFIX) -> None:
    """Add the pages and their JSON endpoints under ``prefix``."""
    insp = Inspector(service, runs, cfg)
    files = static_files()
    tags: list[str | Enum] = ["inspector"]

    @app.get(prefix, include_in_schema=False)
    async def ui_root() -> RedirectResponse:
        return RedirectResponse(prefix + "/")

    @app.get(prefix + "/", include_in_schema=False)
    async def ui_index() -> Response:
        return FileResponse(files["index.html"], media_type="text/html", headers=_NO_STORE)

    @app.get(prefix + "/static/{name}", include_in_schema=False)
    async def ui_static(name: str) -> Response:
        path = files.get(name)
        if path is None:
            raise ServiceError(404, "not_found", f"no such file: {name}")
        kind = mimetypes.guess_type(name)[0] or "application/octet-stream"
        return FileResponse(path, media_type="text/javascript" if name.endswith(".js") else kind, headers=_NO_STORE)

    @app.get(prefix + "/api/store", response_model=StoreSummary, tags=tags, summary="the store in the key's scope")
    async def ui_store(request: Request) -> StoreSummary:
        await service.current()
        return insp.summary(principal_of(request.scope))

    @app.get(prefix + "/api/conversations", response_model=ConversationList, tags=tags,
             summary="a page of conversations in the key's scope, filtered")
    async def ui_conversations(
        request: Request, user: str | None = Query(None, min_length=1), kind: str | None = Query(None),
        status: str | None = Query(None, pattern="^(built|failed|degenerate)$"), q: str | None = Query(None),
        offset: int = Query(0, ge=0), limit: int | None = Query(None, ge=1),
    ) -> ConversationList:
        if limit is not None and limit > cfg.max_page_size:
            raise invalid_field("limit", f"limit may be at most {cfg.max_page_size}", "less_than_equal", where="query")
        principal = principal_of(request.scope)
        await service.current()
        return await asyncio.to_thread(insp.catalog.page, insp.reader, principal.allows, principal.admin,
                                       user=valid_id(user, "query", "user"), kind=kind or None, status=status, text=q or None,
                                       offset=offset, limit=limit or cfg.page_size)

    @app.get(prefix + "/api/kinds", response_model=dict[str, str], tags=tags,
             summary="the kinds (agent, chat, dialogue) of conversations in the key's scope")
    async def ui_kinds(request: Request, id: Annotated[list[str] | None, Query()] = None) -> dict[str, str]:
        ids = id or []
        if len(ids) > cfg.max_page_size:
            raise invalid_field("id", f"at most {cfg.max_page_size} ids", "too_long", where="query")
        principal = principal_of(request.scope)
        return dict(await asyncio.to_thread(insp.catalog.kinds_of, insp.reader, principal.allows, ids))

    @app.get(prefix + "/api/conversations/{conversation_id:id}", response_model=ConversationDetail, tags=tags,
             summary="one conversation: sessions, segments, turns, records, other tables")
    async def ui_conversation(conversation_id: str, request: Request) -> ConversationDetail:
        cid = valid_id(conversation_id, "path", "conversation_id")
        principal = principal_of(request.scope)
        await service.current(cid)
        check_scope(insp.reader, cid, None, principal)
        try:
            return await asyncio.to_thread(conversation_detail, service.layout, insp.reader.markers[cid])
        except (FileNotFoundError, KeyError):  # replaced or compacted meanwhile: once more on the current commit
            await service.reload_async()
            check_scope(insp.reader, cid, None, principal)
            return await asyncio.to_thread(conversation_detail, service.layout, insp.reader.markers[cid])

    @app.delete(prefix + "/api/conversations/{conversation_id:id}", response_model=EraseReport, tags=tags,
                summary="erase a conversation everywhere, confirmed by repeating its id")
    async def ui_erase(conversation_id: str, request: Request, confirm: str = Query(...)) -> EraseReport:
        cid = valid_id(conversation_id, "path", "conversation_id")
        if confirm != cid:
            raise invalid_field("confirm", "confirm must repeat the conversation id", "value_error", where="query")
        return await service.delete_conversation(cid, principal=principal_of(request.scope))

    @app.post(prefix + "/api/search", response_model=SearchPage, tags=tags,
              summary="a scoped search with channel ranks, fused scores, budget drops; as JSON and curl")
    async def ui_search(req: QueryRequest, request: Request) -> SearchPage:
        req = req.model_copy(update={"explain": True})
        raw = await service.search(req, principal=principal_of(request.scope))
        base = str(request.base_url).rstrip("/")
        return search_page(raw, req, base, service.keys.enabled, cfg.preview_chars)

    @app.get(prefix + "/api/report", response_model=StoreReport, tags=tags,
             summary="build report: quality, tokens and the segment plots of the conversations in scope")
    async def ui_report(request: Request) -> StoreReport:
        principal = principal_of(request.scope)
        await service.current()
        manifest = service.manifest if principal.admin else {}
        return await asyncio.to_thread(insp.reports.report, insp.reader, insp.in_scope(principal), manifest)

    @app.get(prefix + "/api/runs", response_model=list[EvalRunInfo], tags=tags, summary="the eval runs (admin)")
    async def ui_runs(request: Request) -> list[EvalRunInfo]:
        principal = principal_of(request.scope)
        return [r.info for r in insp.runs.runs.values()] if principal.admin else []

    @app.get(prefix + "/api/runs/{name}/questions", response_model=EvalQuestionPage, tags=tags,
             summary="an eval run's questions: gold vs selected, hit or miss (admin)")
    async def ui_run_questions(
        name: str, request: Request, system: str | None = None, category: str | None = None,
        result: str | None = Query(None, pattern="^(hit|partial|miss|n/a)$"), conversation: str | None = None,
        q: str | None = None, offset: int = Query(0, ge=0), limit: int | None = Query(None, ge=1),
    ) -> EvalQuestionPage:
        run = _run(insp, name, principal_of(request.scope))
        return run.page(system=system or None, category=category or None, result=result, conversation=conversation or None,
                        text=q or None, offset=offset, limit=min(limit or cfg.page_size, cfg.max_page_size))


def ui_mount(service: MemoryService, runs: RunCatalog, cfg: InspectConfig, prefix: str = UI_PREFIX) -> Mount:
    """The inspector as a :class:`~lychee_ray.serve.app.Mount` of the service's app: its pages and
    assets open, its API behind the guard."""
    return Mount(install=lambda app: install_ui(app, service, runs, cfg, prefix),
                 open_paths=frozenset({prefix, prefix + "/"}), open_prefixes=(prefix + "/static/",))


def service_mounts(service: MemoryService, cfg: InspectConfig) -> list[Mount]:
    """What ``lychee-ray serve`` mounts on its app: the pages under ``/ui`` (``inspect.serve_ui``),
    with the eval runs of ``inspect.eval_runs``."""
    return [ui_mount(service, RunCatalog(cfg.eval_runs), cfg)] if cfg.serve_ui else []


__all__ = ["Inspector", "STATIC_DIR", "UI_PREFIX", "install_ui", "service_mounts", "static_files", "ui_mount"]
