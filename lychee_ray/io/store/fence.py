"""The commit fence: a write commits only onto the conversation history it read.

Some writers read a conversation and commit much later without holding its write lock in between
(a replica's background encoding). If the conversation was erased meanwhile — and maybe re-created
under the same id — what they built holds the erased conversation's data. Every write passes the
commit it read (``based_on``) to :meth:`~lychee_ray.io.store.writer.StoreWriter.commit` /
``commit_delta``, which call :func:`check_fence` under the write lock right before the marker is
written; the lineage (:attr:`~lychee_ray.io.store.marker.CommitMarker.lineage`) tells the two apart.
"""

from __future__ import annotations

from enum import Enum

from lychee_ray.io.store.marker import CommitMarker, ConversationReplaced


class _Unfenced(Enum):
    UNFENCED = "unfenced"


# ``based_on`` of a commit that does not say what it read (direct callers, tests): it replaces or
# extends whatever is committed, as before lineages. Every write path of the package names its base.
UNFENCED = _Unfenced.UNFENCED
# What a write read before it built its commit: the marker (its lineage is checked at the commit),
# None (no committed conversation: the commit must find none either), or UNFENCED.
BasedOn = CommitMarker | None | _Unfenced


def check_fence(conversation_id: str, current: CommitMarker | None, based_on: BasedOn) -> None:
    """Refuse (:class:`ConversationReplaced`) a commit whose base is no longer the conversation's
    history: it read a commit of another lineage (the id was erased, and maybe re-created, since),
    or it read none and one exists now. Called under the conversation's write lock, right before
    the marker is written: the one point every write path passes."""
    if based_on is UNFENCED:
        return
    if based_on is None:
        if current is not None:
            raise ConversationReplaced(conversation_id, "it was created by another writer meanwhile")
        return
    if current is None:
        raise ConversationReplaced(conversation_id, "it has no commit any more")
    if not current.same_lineage(based_on):
        raise ConversationReplaced(conversation_id, "it has another lineage now")


__all__ = ["UNFENCED", "BasedOn", "check_fence"]
