"""A built conversation whose commit was refused because its writer lost the write lock's lease.

On an object store the write lock is a lease (io/store/lease.py); a writer whose renewals fell
behind (its process starved of CPU) or whose lease was taken over refuses to publish
(:class:`~lychee_ray.io.store.lease.LeaseLost`, nothing committed). The work it built is still
good if nothing else committed the conversation meanwhile, so rather than quarantine it, the
writer takes the lock again — a fresh lease — and commits the same artifacts when the
conversation's marker is still the one the work was built on; when another writer committed in
between, the caller decides again (its own path for a moved marker). ``store.commit_lease_retries``
bounds the tries; the last ``LeaseLost`` is raised after them.
"""

from __future__ import annotations

import asyncio
import logging

from lychee_ray.io.store import MemoryStoreWriter
from lychee_ray.io.store.artifacts import ConversationArtifacts
from lychee_ray.io.store.lease import LeaseLost
from lychee_ray.io.store.locks import async_write_lock
from lychee_ray.io.store.marker import CommitMarker

log = logging.getLogger(__name__)


def lost_lease_warning(lost: LeaseLost) -> str:
    """The outcome's warning line for a commit that needed a fresh lease."""
    return f"commit: {lost}; committed again under a fresh write lock (nothing else had committed it)"


async def recommit_after_lost_lease(writer: MemoryStoreWriter, conversation_id: str, art: ConversationArtifacts,
                                    base: CommitMarker | None, lost: LeaseLost) -> CommitMarker | None:
    """Commit ``art`` (built on ``base``, the marker read under the lost lock) under a fresh write
    lock: its new marker; None when the conversation's marker moved meanwhile (decide again).
    Called outside the lost lock. Raises the last :class:`LeaseLost` once
    ``store.commit_lease_retries`` tries were refused as well."""
    retries = writer.layout.settings.commit_lease_retries
    for attempt in range(1, retries + 1):
        log.warning("conversation %s: %s; taking its write lock again to commit the same work (try %d of %d)",
                    conversation_id, lost, attempt, retries)
        try:
            async with async_write_lock(writer.layout, conversation_id):
                current = writer.current_marker(conversation_id)
                if not (current is None if base is None else base.same_commit(current)):
                    return None
                return await asyncio.to_thread(writer.commit, art, locked=True, based_on=current)
        except LeaseLost as e:
            lost = e
    raise lost


__all__ = ["lost_lease_warning", "recommit_after_lost_lease"]
