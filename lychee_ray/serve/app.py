"""The query service's HTTP API (DESIGN §4): the FastAPI app and its routes.

Plain Python, testable without Ray (``fastapi.testclient.TestClient(create_app(service))``);
``lychee_ray.ray.serve`` mounts the same app as a Ray Serve ingress deployment. The routes only
delegate: the work is :class:`~lychee_ray.serve.service.MemoryService`'s, the bodies are in
:mod:`lychee_ray.serve.schemas`, auth and limits in :mod:`lychee_ray.serve.middleware`.

Endpoints (JSON; every one but ``/healthz`` and the docs needs ``Authorization: Bearer <key>`` when a
key is configured: ``serve.keys`` (per tenant, scoped to users; :mod:`.tenancy`) or the single
``serve.token`` (admin)). A tenant's key reaches only conversations whose owner is in its scope —
any other answers 404, as a missing one — and never ``/v1/admin/*`` (403)::

    POST /v1/query                 answer a question from one conversation's (or user's) memory
    POST /v1/search                the same without the answer call (works while the LLM is down)
    GET  /v1/conversations         a page of conversation ids with counts (?user_id= &limit= &offset=)
    GET  /v1/conversations/{id}    counts, sessions, date range, records/segments, failed segments
    POST /v1/conversations/{id}/turns  append turns (idempotent by turn id; creates the conversation
                                   when appends.create and a user_id allow it)
    POST /v1/conversations/{id}/flush  encode the open tail segment now
    DELETE /v1/conversations/{id}  erase the conversation everywhere (store files, indexes, caches);
                                   ?user_id= erases it only if it is that user's
    DELETE /v1/users/{user_id}     erase all of the user's conversations (docs/erasure.md)
    POST /v1/users/{user_id}/forget  forget one record, a slot's, an entity's or the expired records
                                   of the user (?conversation_id in the body: only there; docs/erasure.md)
    GET  /v1/history               a slot's values in time order (?conversation_id= or ?user_id=, and
                                   ?slot= | ?subject= | ?record_id=; docs/current-memory.md)
    POST /v1/admin/reload          pick up conversations a build added or rebuilt
    GET  /v1/admin/stats           cache (count/bytes), resident memory, embedding batches, LLM state
    GET  /healthz                  liveness (no auth)
    GET  /docs, /redoc             the API's pages, assets served locally (no auth; :mod:`.docs`)
    GET  /openapi.json             the API's schema (no auth)

Search/query bodies are :func:`lychee_ray.query.results.result_json`, the same JSON as
``lychee-ray query --json``.

Status codes: 401 missing/wrong key; 403 a tenant's key on ``/v1/admin/*``; 404 unknown
conversation or user, a conversation that is not the named user's or outside the key's scope (one
message for all: nothing leaks); 413 body over ``serve.max_request_bytes``;
422 malformed body, with the reason; 502 the LLM answered unusably; 503 the LLM endpoint is
unreachable/overloaded (``Retry-After``; ``/v1/search`` keeps working with the rules planner), and
``overloaded`` (``Retry-After``) when the replica's own bounded admission is full
(:mod:`.admission`: ``serve.max_ongoing_requests`` working, ``serve.max_queued_requests`` waiting).
Appends add 409 (``history_conflict`` with the ``turn_id``, ``conversation_deleting``,
``config_mismatch``) and 503 ``conversation_busy``
(``Retry-After``); a forget adds 404 for a selector matching nothing, 422 ``invalid_request`` and 409
(``conversation_building``, ``conversation_deleting``); docs/serving.md has the table. Every error body is ``{"detail", "error"}``.

Query embeddings of concurrent requests are coalesced into one model call (``@serve.batch`` in the
deployment, :class:`lychee_ray.serve.embedding.Coalescer` without Ray).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, overload

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import Response
from fastapi.security import HTTPBearer
from starlette.convertors import Convertor, register_url_convertor

from lychee_ray import __version__
from lychee_ray.core.ids import id_problem
from lychee_ray.query.history import HistoryResult
from lychee_ray.serve.currency import history as slot_history
from lychee_ray.serve.admission import AdmissionMiddleware
from lychee_ray.serve.docs import OPENAPI_URL, install_docs
from lychee_ray.serve.forgetting import forget as forget_records
from lychee_ray.serve.middleware import install_guard, principal_of
from lychee_ray.serve.schemas import (
    AppendBody,
    AppendResult,
    ConversationInfo,
    ConversationPage,
    EraseReport,
    ErrorBody,
    FlushBody,
    ForgetBody,
    ForgetReport,
    Health,
    QueryRequest,
    QueryResponse,
    ReloadResult,
    SearchResponse,
)
from lychee_ray.serve.service import MemoryService

_JSON = "application/json"
_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"model": ErrorBody, "description": "missing or invalid bearer key"},
    404: {"model": ErrorBody, "description": "unknown conversation/user, a conversation not the user's, or outside "
                                             "the key's scope (the same answer)"},
    413: {"model": ErrorBody, "description": "request body too large"},
}
_ADMIN_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS, 403: {"model": ErrorBody, "description": "a tenant's key: admin endpoints need an admin key"}}
_APPEND_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "unknown conversation (and creating it is off), or not the user's"},
    409: {"model": ErrorBody, "description": "history_conflict (a turn id stored with other content: turn_id), "
                                             "conversation_deleting (being erased: refused), config_mismatch"},
    422: {"description": "malformed turns, or user_id missing to create the conversation (loc names the field)"},
    503: {"model": ErrorBody, "description": "conversation_busy: another writer holds it (Retry-After; safe to retry)"},
}
_FORGET_ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorBody, "description": "unknown user, outside the key's scope, a conversation not the user's, "
                                             "an unknown record, or a slot/entity/retention matching no record"},
    409: {"model": ErrorBody, "description": "conversation_building (no commit yet to forget from), "
                                             "conversation_deleting (being erased)"},
    422: {"model": ErrorBody, "description": "invalid_request: not exactly one of record_id, slot, entity, expired; "
                                             "a slot that does not parse; expired with no retention configured"},
}
_LLM_ERRORS: dict[int | str, dict[str, Any]] = {
    502: {"model": ErrorBody, "description": "the LLM answered unusably"},
    503: {"model": ErrorBody, "description": "the LLM endpoint is unavailable (llm_unavailable), or the replica is at "
                                             "capacity (overloaded); Retry-After says when to retry"},
}


class IdConvertor(Convertor[str]):
    """A path id is the rest of the path, any characters (``/`` and newlines too: the id policy,
    not the router, decides what is refused, with FastAPI's 422 naming it)."""

    regex = r"[\s\S]*"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("id", IdConvertor())


@overload
def valid_id(value: str, where: str, name: str) -> str: ...
@overload
def valid_id(value: str | None, where: str, name: str) -> str | None: ...


def valid_id(value: str | None, where: str, name: str) -> str | None:
    """A path or query id held to the id policy (core/ids.py): FastAPI's 422 naming it, else as is."""
    problem = id_problem(value) if value is not None else None
    if problem is not None:
        raise RequestValidationError([{"loc": [where, name], "msg": f"{name} {problem}", "type": "value_error"}])
    return value


@dataclass(frozen=True)
class Mount:
    """Routes a higher layer adds to the app (the inspector's pages under ``/ui``): ``install(app)``
    adds them behind the same guard (bearer keys, body size, admission); ``open_paths`` (exact) and
    ``open_prefixes`` are served without a key — only pages and assets that hold no memory."""

    install: Callable[[FastAPI], None]
    open_paths: frozenset[str] = frozenset()
    open_prefixes: tuple[str, ...] = ()


def create_app(service: MemoryService, mounts: Sequence[Mount] = ()) -> FastAPI:
    """The FastAPI app over ``service`` (the same app runs under TestClient, uvicorn or Ray Serve),
    with the routes of ``mounts`` (:class:`Mount`)."""
    app = FastAPI(
        title="lychee-ray memory service",
        version=__version__,
        description="LycheeMemory V2 long-term memory: scoped search and question answering over a memory store. "
                    "Every endpoint except /healthz and the docs requires `Authorization: Bearer <key>` when a "
                    "key is configured; a tenant's key reaches only its users' conversations (404 for any other) "
                    "and never /v1/admin/* (403).",
        docs_url=None, redoc_url=None, openapi_url=OPENAPI_URL,  # docs pages with local assets: install_docs
    )
    bearer = [Depends(HTTPBearer(auto_error=False))]  # documents the scheme; the guard middleware enforces it
    # (added first, so it runs inside the guard: a request is authenticated before it takes a slot)
    app.add_middleware(AdmissionMiddleware, admission=service.admission)
    install_guard(app, service.keys, max_bytes=service.scfg.max_request_bytes,
                  open_paths=frozenset().union(*(m.open_paths for m in mounts)),
                  open_prefixes=tuple(p for m in mounts for p in m.open_prefixes))
    install_docs(app)
    for m in mounts:
        m.install(app)

    @app.get("/healthz", response_model=Health, tags=["service"], summary="liveness (no auth)")
    async def healthz() -> Health:
        return service.health()

    @app.post("/v1/query", response_model=QueryResponse, tags=["memory"], dependencies=bearer,
              responses={**_ERRORS, **_LLM_ERRORS}, summary="answer a question from scoped memory")
    async def query(req: QueryRequest, request: Request) -> Response:
        return Response(await service.query(req, principal=principal_of(request.scope)), media_type=_JSON)

    @app.post("/v1/search", response_model=SearchResponse, tags=["memory"], dependencies=bearer,
              responses={**_ERRORS, 503: _LLM_ERRORS[503]}, summary="scoped evidence for a question, no answer call")
    async def search(req: QueryRequest, request: Request) -> Response:
        return Response(await service.search(req, principal=principal_of(request.scope)), media_type=_JSON)

    @app.get("/v1/conversations", response_model=ConversationPage, tags=["memory"], dependencies=bearer,
             responses=_ERRORS, summary="a page of conversations (all, or one user's) with their counts")
    async def conversations(
        request: Request,
        user_id: str | None = Query(None, min_length=1, description="only this user's conversations"),
        offset: int = Query(0, ge=0, description="conversations to skip (ordered by id)"),
        limit: int | None = Query(None, ge=1, description="page size (default serve.list_page_size, "
                                                          "at most serve.list_max_page_size)"),
    ) -> ConversationPage:
        return await service.list_conversations(valid_id(user_id, "query", "user_id"), offset, limit,
                                                principal=principal_of(request.scope))

    # ids may hold "/" (core/ids.py): the id is the rest of the path, "a/b" or "a%2Fb" alike
    @app.get("/v1/conversations/{conversation_id:id}", response_model=ConversationInfo, tags=["memory"],
             dependencies=bearer, responses=_ERRORS, summary="one conversation's counts, sessions and date range")
    async def conversation(conversation_id: str, request: Request, user_id: str | None = None) -> ConversationInfo:
        return await service.conversation(valid_id(conversation_id, "path", "conversation_id"),
                                          valid_id(user_id, "query", "user_id"), principal=principal_of(request.scope))

    @app.post("/v1/conversations/{conversation_id:id}/turns", response_model=AppendResult, tags=["memory"],
              dependencies=bearer, responses={**_ERRORS, **_APPEND_ERRORS},
              summary="append turns: stored and searchable at once; closed segments encoded")
    async def append_turns(conversation_id: str, body: AppendBody, request: Request) -> AppendResult:
        return await service.append_turns(valid_id(conversation_id, "path", "conversation_id"),
                                          body, principal=principal_of(request.scope))

    @app.post("/v1/conversations/{conversation_id:id}/flush", response_model=AppendResult, tags=["memory"],
              dependencies=bearer, responses={**_ERRORS, **_APPEND_ERRORS},
              summary="encode the conversation's open tail segment now")
    async def flush(conversation_id: str, request: Request, body: FlushBody | None = None) -> AppendResult:
        return await service.flush(valid_id(conversation_id, "path", "conversation_id"),
                                   body.user_id if body is not None else None, principal=principal_of(request.scope))

    @app.delete("/v1/conversations/{conversation_id:id}", response_model=EraseReport, tags=["memory"],
                dependencies=bearer, responses=_ERRORS,
                summary="erase a conversation everywhere: store rows and files, indexes, this replica's cache")
    async def delete_conversation(
        conversation_id: str, request: Request,
        user_id: str | None = Query(None, min_length=1, description="erase it only if it is this user's (else 404)"),
    ) -> EraseReport:
        return await service.delete_conversation(valid_id(conversation_id, "path", "conversation_id"),
                                                 valid_id(user_id, "query", "user_id"),
                                                 principal=principal_of(request.scope))

    @app.delete("/v1/users/{user_id:id}", response_model=EraseReport, tags=["memory"], dependencies=bearer,
                responses=_ERRORS, summary="erase every conversation of a user")
    async def delete_user(user_id: str, request: Request) -> EraseReport:
        return await service.delete_user(valid_id(user_id, "path", "user_id"),
                                         principal=principal_of(request.scope))

    @app.post("/v1/users/{user_id:id}/forget", response_model=ForgetReport, tags=["memory"], dependencies=bearer,
              responses={**_ERRORS, **_FORGET_ERRORS},
              summary="forget a user's records (one, a slot's, an entity's, expired) everywhere in the store")
    async def forget(user_id: str, body: ForgetBody, request: Request) -> ForgetReport:
        return await forget_records(service, valid_id(user_id, "path", "user_id"), body,
                                    principal=principal_of(request.scope))

    @app.get("/v1/history", response_model=HistoryResult, tags=["memory"], dependencies=bearer, responses=_ERRORS,
             summary="a slot's values in time order: when each held and what replaced it")
    async def history(
        request: Request,
        conversation_id: str | None = Query(None, min_length=1, description="one conversation (or user_id)"),
        user_id: str | None = Query(None, min_length=1, description="all of a user's conversations"),
        slot: str | None = Query(None, min_length=1, description="'subject · attribute', e.g. 'user · shipping address'"),
        subject: str | None = Query(None, min_length=1, description="every slot of a subject, e.g. 'reservation M05KNL'"),
        record_id: str | None = Query(None, min_length=1, description="the slot of this record"),
    ) -> HistoryResult:
        return await slot_history(service, valid_id(conversation_id, "query", "conversation_id"),
                                      valid_id(user_id, "query", "user_id"), slot=slot, subject=subject,
                                      record_id=record_id, principal=principal_of(request.scope))

    @app.post("/v1/admin/reload", response_model=ReloadResult, tags=["admin"], dependencies=bearer,
              responses=_ADMIN_ERRORS, summary="pick up conversations a build added or rebuilt (this replica)")
    async def reload() -> ReloadResult:
        return await service.reload_async()

    @app.get("/v1/admin/stats", tags=["admin"], dependencies=bearer, responses=_ADMIN_ERRORS,
             summary="cache, memory, batching and LLM state of the replica that answers")
    async def stats() -> dict[str, Any]:
        return service.stats()

    return app


__all__ = ["Mount", "create_app"]
