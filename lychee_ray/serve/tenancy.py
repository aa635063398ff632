"""Who a request is, and which users' conversations it may touch (docs/serving.md
"Tenancy").

A request's bearer key resolves to a :class:`Principal`: a tenant scoped to user ids and user-id
prefixes (``serve.keys``), or the admin (an admin key, the single ``serve.token`` kept for backward
compatibility, or a service with no auth configured at all). A conversation belongs to its owner
(its user id, else its own id: ``CommitMarker.owner``), and a tenant may touch it only when the
owner is in its scope. Keys are compared as SHA-256 digests in constant time, and never logged: a
principal is named by its key's ``name``.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, field
from collections.abc import Iterable

from lychee_ray.config.serve import ApiKeyConfig


@dataclass(frozen=True)
class Principal:
    """The holder of one key: ``admin`` may touch everything (and ``/v1/admin/*``); a tenant the
    users in ``users`` and those whose id starts with one of ``prefixes``."""

    name: str
    admin: bool = False
    users: frozenset[str] = field(default_factory=frozenset)
    prefixes: tuple[str, ...] = ()

    def allows(self, user_id: str | None) -> bool:
        """Whether this principal may touch conversations owned by ``user_id``."""
        if self.admin:
            return True
        return user_id is not None and (user_id in self.users or user_id.startswith(self.prefixes))

    def visible(self, user_ids: Iterable[str]) -> list[str]:
        """The users of ``user_ids`` in scope."""
        return [u for u in user_ids if self.allows(u)]

    @classmethod
    def of_key(cls, key: ApiKeyConfig) -> Principal:
        return cls(name=key.name, admin=key.admin, users=frozenset(key.users), prefixes=tuple(key.user_prefixes))


# The principal of the legacy single token, and of a service without any auth configured.
ADMIN = Principal(name="admin", admin=True)


class KeyRing:
    """The configured keys: ``token`` (the legacy single bearer token: admin) and ``keys`` (hashed)."""

    def __init__(self, token: str | None, keys: list[ApiKeyConfig]) -> None:
        self._token = token.encode("utf-8") if token else None
        self._keys = [(bytes.fromhex(k.sha256), Principal.of_key(k)) for k in keys]

    @property
    def enabled(self) -> bool:
        """False when neither a token nor a key is configured: every request is the admin."""
        return self._token is not None or bool(self._keys)

    def resolve(self, given: bytes) -> Principal | None:
        """The principal of a presented key (None: no such key). Every configured key is compared,
        each in constant time, so the answer's timing says nothing about which one matched."""
        digest = hashlib.sha256(given).digest()
        found: Principal | None = None
        for want, principal in self._keys:
            if hmac.compare_digest(digest, want) and found is None:
                found = principal
        if self._token is not None and hmac.compare_digest(given, self._token) and found is None:
            found = ADMIN
        return found

    def names(self) -> list[str]:
        """The keys' names (for stats; never the keys)."""
        return [p.name for _, p in self._keys] + (["token"] if self._token is not None else [])


__all__ = ["ADMIN", "KeyRing", "Principal"]
