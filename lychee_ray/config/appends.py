"""Section ``appends``: every setting of appends to a stored conversation, in one place.

Appends run in the library (``MemoryStore.append``), the service (``POST .../turns``, a replica's
encode queue and idle flusher) and a build's increments (delta generations and their fold). Until
one release after they moved here, the keys' old places (``build.append_*``, ``serve.append_*``,
``store.delta_*``, ``query.view_rebuild*``) are still read: :data:`LEGACY_KEYS` maps each to its
new key, and :func:`move_legacy_keys` moves them with one warning per key.
"""

from __future__ import annotations

import warnings
from typing import Any

from pydantic import Field

from lychee_ray.config.base import Section
from lychee_ray.names import Scheduling

# (old section, old key) -> key in ``appends``
LEGACY_KEYS: dict[tuple[str, str], str] = {
    ("build", "append_create"): "create",
    ("build", "append_lock_timeout_s"): "lock_timeout_s",
    ("build", "append_lock_poll_s"): "lock_poll_s",
    ("build", "append_cache_conversations"): "cache_conversations",
    ("build", "catch_up_attempts"): "catch_up_attempts",
    ("serve", "append_encode"): "encode",
    ("serve", "append_queue_max"): "queue_max",
    ("serve", "append_queue_retry_s"): "queue_retry_s",
    ("serve", "append_queue_nice"): "queue_nice",
    ("serve", "append_idle_flush_s"): "idle_flush_s",
    ("serve", "append_retry_after_s"): "retry_after_s",
    ("store", "delta_max_count"): "delta_max_count",
    ("store", "delta_fold_ratio"): "delta_fold_ratio",
    ("store", "delta_fold_min_rows"): "delta_fold_min_rows",
    ("query", "view_rebuild"): "view_rebuild",
    ("query", "view_rebuild_background_min_rows"): "view_rebuild_background_min_rows",
    ("query", "view_rebuild_max_pause_ms"): "view_rebuild_max_pause_ms",
}


class RenamedConfigKey(FutureWarning):
    """A configuration names a key by its old place (still read for one release)."""


def move_legacy_keys(data: dict[str, Any]) -> dict[str, Any]:
    """``data`` (one layer of configuration: a file, a ``--set``, a whole mapping) with each old
    key moved to its ``appends`` key, warning once per key (:class:`RenamedConfigKey`, naming old
    -> new). Within one layer the old key wins (a whole mapping may hold the defaults at the new
    places and a change at an old one). ``data`` is not changed."""
    out = dict(data)
    for (sec, old), new in LEGACY_KEYS.items():
        section = out.get(sec)
        if not isinstance(section, dict) or old not in section:
            continue
        section = out[sec] = dict(section)
        value = section.pop(old)
        appends = out["appends"] = dict(out.get("appends") or {})
        appends[new] = value
        warnings.warn(f"config key {sec}.{old} is now appends.{new}; the old key is read for one more release",
                      RenamedConfigKey, stacklevel=3)
    return out


class AppendsConfig(Section):
    # Appending to a conversation that is not stored creates it (the append must name its user_id).
    create: bool
    # An append waits at most this long for another writer of the same conversation (then
    # conversation_busy), checking every lock_poll_s seconds; builds wait as long as it takes.
    lock_timeout_s: float = Field(gt=0)
    lock_poll_s: float = Field(gt=0)
    # Conversations whose stored turns (and loaded tables) an appending process keeps, so the next
    # append reads only the deltas committed since (ingest/increment/cache.py).
    cache_conversations: int = Field(ge=1)
    # A background encoding starts over when another commit changed the conversation's segmentation
    # while it encoded (it holds no write lock meanwhile); after this many rounds it gives up
    # (conversation_busy: the turns stay queued and the next append or flush encodes them).
    catch_up_attempts: int = Field(ge=1)
    # Service: background = an append stores its turns (searchable at once as raw turns) and
    # returns; the replica's encode queue segments and encodes them right after
    # (serve/encode_queue.py). inline = the append segments and encodes before it returns.
    encode: Scheduling
    # Conversations waiting in a replica's encode queue at most; beyond, an append encodes inline.
    queue_max: int = Field(ge=1)
    # A background encoding that found the conversation busy (another writer) is retried after this long.
    queue_retry_s: float = Field(gt=0)
    # Nice increment of the encode queue's thread (Linux: per thread): background encoding yields
    # the CPU to searches and appends (0 = same priority).
    queue_nice: int = Field(ge=0, le=19)
    # Service: a conversation this replica appended to whose open tail segment has seen no commit
    # for this long is flushed (encoded) by the replica (0 = never: only the segmenter or
    # POST .../flush close the tail).
    idle_flush_s: float = Field(ge=0)
    # Retry-After (seconds) of a 503 conversation_busy (another writer held the conversation's lock
    # for lock_timeout_s); appends are idempotent by turn id, so a retry is safe.
    retry_after_s: int = Field(ge=1)
    # Delta generations (io/store/deltas.py): an append writes only its new rows; the deltas are
    # folded into a new base generation when there are this many of them (each is a few small
    # files a cold reader opens) ...
    delta_max_count: int = Field(ge=1)
    # ... or when they hold more rows than this fraction of the base's (and more than
    # delta_fold_min_rows): a geometric bound, so each row is rewritten a bounded number of times
    # on average however long the conversation grows.
    delta_fold_ratio: float = Field(gt=0)
    delta_fold_min_rows: int = Field(ge=0)
    # A cached conversation whose new commit changed records, nodes or segments (an encoding, a
    # flush) is rebuilt: "inline" on the request that sees the commit; "background" in the query
    # cache's thread, answering meanwhile from the previous view with the new turns added (records
    # lag by the rebuild, turns never) — for conversations of at least
    # view_rebuild_background_min_rows rows (turns + records); smaller ones rebuild inline (a few ms).
    view_rebuild: Scheduling
    view_rebuild_background_min_rows: int = Field(ge=0)
    # A background rebuild waits at each of its pause points (every few hundred rows) while
    # searches are in flight, at most this long per point (so it still finishes under constant load).
    view_rebuild_max_pause_ms: float = Field(ge=0)


__all__ = ["LEGACY_KEYS", "AppendsConfig", "RenamedConfigKey", "move_legacy_keys"]
