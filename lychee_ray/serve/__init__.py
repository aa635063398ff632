"""The query service (DESIGN §4): a FastAPI app over a memory store, and a client for it.

* :class:`MemoryService` — one replica's service, plain Python (:mod:`.service`);
* :func:`create_app` — its HTTP API (:mod:`.app`; bodies in :mod:`.schemas`, auth and limits in
  :mod:`.middleware`, typed errors in :mod:`.errors`, listing in :mod:`.listing`, offline docs pages
  in :mod:`.docs`);
* :class:`MemoryClient` — calls a running service (:mod:`.client`; ``lychee-ray query --url``).

Ray Serve deploys the same app: :mod:`lychee_ray.ray.serve`.
"""

from lychee_ray.serve.app import Mount, create_app
from lychee_ray.serve.client import MemoryClient, RemoteError
from lychee_ray.serve.errors import EmbedderMismatch, ErrorCode, ServiceError, llm_error_status
from lychee_ray.serve.middleware import OPEN_PATHS, GuardMiddleware
from lychee_ray.serve.schemas import (
    AppendBody,
    AppendResult,
    AppendTurn,
    ConversationInfo,
    ConversationPage,
    ConversationSummary,
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

__all__ = [
    "OPEN_PATHS", "AppendBody", "AppendResult", "AppendTurn", "FlushBody", "ForgetBody", "ForgetReport",
    "ConversationInfo", "ConversationPage", "ConversationSummary", "EmbedderMismatch", "EraseReport", "ErrorBody",
    "ErrorCode", "GuardMiddleware", "Health", "MemoryClient", "MemoryService", "Mount", "QueryRequest", "QueryResponse",
    "ReloadResult", "RemoteError", "SearchResponse", "ServiceError", "create_app", "llm_error_status",
]
