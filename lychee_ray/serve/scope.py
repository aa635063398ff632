"""What a request may touch of the store: the scope checks of the service's
endpoints, each answering 404 — with the message a missing conversation gets — for anything the
request's :class:`~lychee_ray.serve.tenancy.Principal` may not see, so ids do not leak."""

from __future__ import annotations

from typing import Any

from lychee_ray.io.store import StoreLayout, conversation_key
from lychee_ray.io.store.locks import read_journal
from lychee_ray.serve.errors import ServiceError
from lychee_ray.serve.tenancy import ADMIN, Principal


def not_found_message(conversation_id: str, user_id: str | None) -> str:
    """The one 404 message of a conversation a request may not see (missing, another user's,
    outside the key's scope: nothing tells them apart)."""
    if user_id is not None:
        return f"conversation {conversation_id!r} not found for user {user_id!r}"
    return f"unknown conversation {conversation_id!r}"


def check_scope(reader: Any, conversation_id: str | None, user_id: str | None, principal: Principal = ADMIN) -> None:
    """404 before any work (from the replica's markers, without rescanning the store) for ids it
    does not know, and for conversations and users outside ``principal``'s scope (the same answer)."""
    if conversation_id is not None:
        m = reader.markers.get(conversation_id)
        if m is None or not principal.allows(m.owner) or (user_id is not None and m.owner != user_id):
            raise ServiceError(404, "not_found", not_found_message(conversation_id, user_id))
    elif not principal.allows(user_id) or not reader.by_user.get(user_id or ""):
        raise ServiceError(404, "not_found", f"unknown user {user_id!r}")


def append_user(layout: StoreLayout, conversation_id: str, user_id: str | None, principal: Principal,
                create: bool) -> str | None:
    """The ``user_id`` an append (``create``) or flush of ``principal`` runs with. A tenant's is
    pinned to the owner it was checked against (the append re-checks it under the write lock, so a
    conversation erased and re-created for another owner meanwhile is refused); 404 outside its scope."""
    if principal.admin:
        return user_id
    m = layout.read_marker(conversation_key(conversation_id))
    if m is not None:
        if principal.allows(m.owner) and (user_id is None or user_id == m.owner):
            return m.owner
    elif create and user_id is not None and principal.allows(user_id):
        return user_id  # a new conversation for a user in scope
    # (a tenant creating without user_id gets this 404 too, not the admin's 422: else the answer
    # would tell a missing id from another tenant's)
    raise ServiceError(404, "not_found", not_found_message(conversation_id, user_id))


def owner_on_disk(layout: StoreLayout, conversation_id: str) -> str | None:
    """The owner of a conversation as the store says now: its marker's, or the journal's of an
    unfinished erasure (None: neither)."""
    key = conversation_key(conversation_id)
    m = layout.read_marker(key)
    if m is not None:
        return m.owner
    j = read_journal(layout.deleting_path(key))
    return (j.get("user_id") or j["conversation_id"]) if j is not None else None


def erase_owner(layout: StoreLayout, conversation_id: str, user_id: str | None, principal: Principal) -> str | None:
    """The owner a ``DELETE /v1/conversations/{id}`` may erase (the erasure checks it again under
    its store lock); None: any (the admin without ``user_id``). 404 when the conversation is not
    ``user_id``'s or outside ``principal``'s scope."""
    if principal.admin and user_id is None:
        return None
    owner = owner_on_disk(layout, conversation_id)
    if owner is None or not principal.allows(owner) or (user_id is not None and owner != user_id):
        raise ServiceError(404, "not_found", not_found_message(conversation_id, user_id))
    return owner


__all__ = ["append_user", "check_scope", "erase_owner", "not_found_message", "owner_on_disk"]
