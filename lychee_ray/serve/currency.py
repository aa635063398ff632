"""The service's endpoints of memory that stays current (docs/current-memory.md): a slot's history.

Kept out of :mod:`.service` (one module per concern); each handler scopes its request exactly as
search does (:func:`~.scope.check_scope`: 404 for a conversation or user outside the key's scope,
the message a missing one gets) and runs the store's work in a search worker.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from lychee_ray.query.errors import ScopeError, UnknownConversation
from lychee_ray.query.history import HistoryQueryError, HistoryResult
from lychee_ray.serve.errors import ServiceError, invalid_field
from lychee_ray.serve.scope import check_scope
from lychee_ray.serve.tenancy import ADMIN, Principal

if TYPE_CHECKING:  # type only: serve/service.py imports this module
    from lychee_ray.serve.service import MemoryService


async def history(service: MemoryService, conversation_id: str | None, user_id: str | None, *, slot: str | None,
                  subject: str | None, record_id: str | None, principal: Principal = ADMIN) -> HistoryResult:
    """``GET /v1/history``: the values of a slot (or of a subject's slots, or of a record's slot) in
    one conversation or all of a user's, oldest first."""
    if conversation_id is None and user_id is None:
        raise invalid_field("conversation_id", "give conversation_id or user_id", where="query")
    await service._maybe_reload()
    await service._drop_erased(conversation_id, user_id)
    check_scope(service.store.reader, conversation_id, user_id, principal)
    try:
        res: HistoryResult = await service._in_worker(service.store.history, conversation_id, user_id=user_id,
                                                      slot=slot, subject=subject, record_id=record_id)
    except (UnknownConversation, ScopeError) as e:
        raise ServiceError(404, "not_found", f"not found: {e}") from None
    except HistoryQueryError as e:
        if e.kind == "unknown_record":
            raise ServiceError(404, "not_found", str(e)) from None
        raise invalid_field("slot", str(e), where="query") from None
    if any(cid not in res.conversation_ids for cid in {x.conversation_id for x in res.entries}):
        raise ServiceError(500, "scope_violation", "internal error: result outside the request's scope")
    return res


__all__ = ["history"]
