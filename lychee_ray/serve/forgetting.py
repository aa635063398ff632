"""The service's forgetting on request (docs/erasure.md, "Forgetting"): ``POST /v1/users/{id}/forget``.

Kept out of :mod:`.service` (one module per concern). Scoped as erasure is: a key names only users
in its scope — any other, and a user with no conversation, answers the 404 an unknown user gets
(ids do not leak) — and ``conversation_id``, when given, must be that user's (the store says whose:
its marker, or the journal of an unfinished erasure; one being built has no owner yet: 409
``conversation_building`` for the admin, 404 for a tenant). The work is the library's
(:func:`lychee_ray.ingest.forget.forget_records`, in its own thread: it may wait for a writer's
lock, searches go on); afterwards this replica reads the changed conversations' new commits and
drops every view it kept of their old ones, as :meth:`lychee_ray.MemoryStore.forget_records` does.
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

from lychee_ray.ingest.forget import ForgetError, ForgetReport, ForgetSelector, forget_records
from lychee_ray.io.store import conversation_key
from lychee_ray.io.store.locks import ConversationDeleting
from lychee_ray.serve.errors import ErrorCode, ServiceError
from lychee_ray.serve.schemas import ForgetBody
from lychee_ray.serve.scope import not_found_message, owner_on_disk
from lychee_ray.serve.tenancy import ADMIN, Principal

if TYPE_CHECKING:  # type only: serve/service.py imports this module
    from lychee_ray.serve.service import MemoryService

log = logging.getLogger(__name__)

# ForgetError.kind -> the HTTP answer (the error code of a 404 is not_found, as everywhere)
_STATUS: dict[str, tuple[int, ErrorCode]] = {
    "not_found": (404, "not_found"),
    "no_records": (404, "not_found"),
    "invalid_request": (422, "invalid_request"),
    "conversation_building": (409, "conversation_building"),
}


async def forget(service: MemoryService, user_id: str, body: ForgetBody, *,
                 principal: Principal = ADMIN) -> ForgetReport:
    """``POST /v1/users/{user_id}/forget``: forget the records ``body`` names among ``user_id``'s
    conversations (module doc); the report says what was removed."""
    return await asyncio.to_thread(_forget, service, user_id, body, principal)


def _forget(service: MemoryService, user_id: str, body: ForgetBody, principal: Principal) -> ForgetReport:
    unknown_user = ServiceError(404, "not_found", f"unknown user {user_id!r}")
    if not principal.allows(user_id):
        raise unknown_user
    cid = body.conversation_id
    if cid is not None:
        owner = owner_on_disk(service.layout, cid)
        if owner is None and principal.admin and any(
                p.exists() for p in service.layout.conversation_paths(conversation_key(cid))):
            # files but no commit yet: the library answers conversation_building (a tenant gets the
            # 404: with no commit nothing says whose it is)
            owner = user_id
        if owner != user_id:
            raise ServiceError(404, "not_found", not_found_message(cid, user_id))
    elif not any(m.owner == user_id for m in service.layout.iter_markers()):
        raise unknown_user
    selector = ForgetSelector(record_id=body.record_id, slot=body.slot, entity=body.entity,
                              retention_days=service.config.store.retention_days if body.expired else None)
    try:
        report = forget_records(service.layout, user_id, selector, conversation_id=cid,
                                redact_turns=body.redact_turns)
    except ForgetError as e:
        status, code = _STATUS[e.kind]
        raise ServiceError(status, code, f"{e}: nothing forgotten") from None
    except ConversationDeleting as e:
        raise ServiceError(409, "conversation_deleting", f"{e}: nothing forgotten") from None
    changed = report.conversation_ids
    service.store.reread(changed)  # new commits read, the old ones' views dropped (as MemoryStore does)
    service.lister.forget(changed)
    for c in changed:  # an append's kept state of the old commit (its turns' text too) is not reused
        service.appends.service.forget(conversation_key(c))
    log.info("forgot %d record(s) (%s) in %d conversation(s) for key %r", report.records_removed, report.selector,
             len(changed), principal.name)
    return report


__all__ = ["forget"]
