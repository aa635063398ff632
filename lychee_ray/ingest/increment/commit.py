"""Committing an increment: as a delta on top of the stored commit, or as a full generation.

The caller holds the conversation's write lock. A commit is fenced: refused with
:class:`~lychee_ray.io.store.marker.ConversationReplaced` when the conversation is no longer the
lineage the increment was built from (erased, and maybe re-created, since: io/store/fence.py).
"""

from __future__ import annotations

from collections.abc import Callable

from lychee_ray.ingest.increment.cache import StoredCache
from lychee_ray.ingest.increment.construct import Increment
from lychee_ray.ingest.increment.stored import StoredConversation
from lychee_ray.config.appends import AppendsConfig
from lychee_ray.io.store import MemoryStoreWriter
from lychee_ray.io.store.artifacts import ConversationDelta
from lychee_ray.io.store.marker import CommitMarker
from lychee_ray.io.store.writer import artifacts_delta


def increment_delta(stored: StoredConversation | None, inc: Increment) -> ConversationDelta | None:
    """The delta that commits ``inc`` (its own, or its artifacts against the stored tables); None:
    it must be committed as a full generation (a new conversation, one re-segmented from scratch,
    or a kept state without the tables to compare with)."""
    if inc.delta is not None:
        return inc.delta
    if stored is None or stored.data is None or inc.rebuilt is not None or inc.artifacts is None:
        return None
    return artifacts_delta(stored.data, inc.artifacts)


def commit_increment(writer: MemoryStoreWriter, stored: StoredConversation | None, inc: Increment,
                     fold: AppendsConfig | None, cache: StoredCache | None = None,
                     adjust: Callable[[ConversationDelta], None] | None = None) -> CommitMarker:
    """Commit an increment — a delta on top of the stored commit (``adjust(delta)`` may amend it
    first), or a full generation; refused with
    :class:`~lychee_ray.io.store.marker.ConversationReplaced` when the conversation is no longer the
    lineage ``stored`` was read from (None: when it exists now) — fold the deltas into a new base
    when they passed ``fold``'s bound (None: never here; the caller folds), and keep the state
    after it in ``cache`` for the next increment (not after a full generation or a fold: then the
    next one reads the conversation)."""
    # fenced: the commit is refused when the conversation is no longer the lineage ``stored`` read
    # (erased, and maybe re-created, since: io/store/writer.py check_fence)
    based_on = stored.marker if stored is not None else None
    delta = increment_delta(stored, inc)
    if delta is None:
        assert inc.artifacts is not None  # a changed increment without a delta has artifacts
        return writer.commit(inc.artifacts, locked=True, based_on=based_on)
    if adjust is not None:
        adjust(delta)
    marker = writer.commit_delta(delta, locked=True, based_on=based_on)
    if fold is not None and writer.needs_fold(marker, fold):
        return writer.fold(marker.conversation_id, locked=True) or marker
    if cache is not None and inc.next_state is not None:
        state = inc.next_state
        state.marker = marker
        state.applied.add(marker.deltas[-1])
        cache.keep_stored(state)
    return marker


__all__ = ["commit_increment", "increment_delta"]
