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
    create: bool = Field(default=True, description="an append to an unknown conversation creates it (user_id required)")
    # An append waits at most this long for another writer of the same conversation (then
    # conversation_busy), checking every lock_poll_s seconds; builds wait as long as it takes.
    lock_timeout_s: float = Field(default=30.0, gt=0,
        description="an append waits this long for another writer of the same conversation, then conversation_busy")
    lock_poll_s: float = Field(default=0.02, gt=0, description="... trying the conversation's write lock this often")
    # Conversations whose stored turns (and loaded tables) an appending process keeps, so the next
    # append reads only the deltas committed since (ingest/increment/cache.py).
    cache_conversations: int = Field(default=64, ge=1,
        description=(
            "conversations whose stored turns an appending process keeps (the next append reads only the deltas "
            "since)"))
    # A background encoding starts over when another commit changed the conversation's segmentation
    # while it encoded (it holds no write lock meanwhile); after this many rounds it gives up
    # (conversation_busy: the turns stay queued and the next append or flush encodes them).
    catch_up_attempts: int = Field(default=3, ge=1,
        description=(
            "a background encoding (no write lock while it encodes) starts over this often when another commit "
            "changed the segmentation meanwhile"))
    # Service: background = an append stores its turns (searchable at once as raw turns) and
    # returns; the replica's encode queue segments and encodes them right after
    # (serve/encode_queue.py). inline = the append segments and encodes before it returns.
    encode: Scheduling = Field(default="background",
        description=(
            "service: background = an append stores its turns (searchable at once) and returns, the replica's "
            "queue segments and encodes them next | inline = before it returns"))
    # Conversations waiting in a replica's encode queue at most; beyond, an append encodes inline.
    queue_max: int = Field(default=1024, ge=1,
        description="conversations waiting in a replica's encode queue at most; beyond, an append encodes inline")
    # A background encoding that found the conversation busy (another writer) is retried after this long.
    queue_retry_s: float = Field(default=1.0, gt=0,
        description="a background encoding that found the conversation busy is tried again after this long")
    # Nice increment of the encode queue's thread (Linux: per thread): background encoding yields
    # the CPU to searches and appends (0 = same priority).
    queue_nice: int = Field(default=10, ge=0, le=19,
        description=(
            "the encode queue's thread runs this much nicer (Linux, per thread): encoding yields the CPU to "
            "searches and appends"))
    # Service: a conversation this replica appended to whose open tail segment has seen no commit
    # for this long is flushed (encoded) by the replica (0 = never: only the segmenter or
    # POST .../flush close the tail).
    idle_flush_s: float = Field(default=300.0, ge=0,
        description=(
            "service: a conversation a replica appended to is flushed (open tail segment encoded) after this long"
            " without a commit; 0 = never (only the segmenter or POST .../flush)"))
    # Retry-After (seconds) of a 503 conversation_busy (another writer held the conversation's lock
    # for lock_timeout_s); appends are idempotent by turn id, so a retry is safe.
    retry_after_s: int = Field(default=1, ge=1,
        description=(
            "Retry-After of a 503 conversation_busy (another writer held the conversation longer than "
            "lock_timeout_s); appends are idempotent, retrying is safe"))
    # Delta generations (io/store/deltas.py): an append writes only its new rows; the deltas are
    # folded into a new base generation when there are this many of them (each is a few small
    # files a cold reader opens) ...
    delta_max_count: int = Field(default=128, ge=1,
        description=(
            "an append commits a delta generation (its new rows only); this many deltas are folded into a new "
            "base"))
    # ... or when they hold more rows than this fraction of the base's (and more than
    # delta_fold_min_rows): a geometric bound, so each row is rewritten a bounded number of times
    # on average however long the conversation grows.
    delta_fold_ratio: float = Field(default=0.5, gt=0,
        description=(
            "... or sooner once the deltas hold more rows than this fraction of the base (geometric: rewrites "
            "stay bounded per row)"))
    delta_fold_min_rows: int = Field(default=1000, ge=0,
        description="... and more rows than this (a small conversation is cheap to read with its deltas)")
    # A cached conversation whose new commit changed records, nodes or segments (an encoding, a
    # flush) is rebuilt: "inline" on the request that sees the commit; "background" in the query
    # cache's thread, answering meanwhile from the previous view with the new turns added (records
    # lag by the rebuild, turns never) — for conversations of at least
    # view_rebuild_background_min_rows rows (turns + records); smaller ones rebuild inline (a few ms).
    view_rebuild: Scheduling = Field(default="background",
        description=(
            "a cached conversation whose records/nodes changed: rebuilt off the request path (the previous view "
            "plus the new turns answers meanwhile) | inline"))
    view_rebuild_background_min_rows: int = Field(default=2000, ge=0,
        description="... when it has at least this many turns + records (smaller ones rebuild inline in a few ms)")
    # A background rebuild waits at each of its pause points (every few hundred rows) while
    # searches are in flight, at most this long per point (so it still finishes under constant load).
    view_rebuild_max_pause_ms: float = Field(default=50, ge=0,
        description=(
            "a background rebuild waits for searches in flight every few hundred rows, at most this long each "
            "time"))


__all__ = ["LEGACY_KEYS", "AppendsConfig", "RenamedConfigKey", "move_legacy_keys"]
