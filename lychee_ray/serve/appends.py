"""Online appends in the query service: ``POST /v1/conversations/{id}/turns`` and ``.../flush``.

* :class:`Appender` runs one append in a worker thread through the library's append service
  (:class:`~lychee_ray.ingest.append.service.AppendService`), which commits one new generation under the
  conversation's ``flock`` write lock (so writers of one conversation are serialised across
  threads, replicas and processes of one machine), then this replica re-reads the conversation's
  commit marker and answers from the new generation at once. Errors become HTTP answers by their
  ``kind`` (:func:`http_error`), never by their text.
* :class:`IdleFlusher`: one daemon thread per replica. A conversation this replica appended to whose
  open tail segment has seen no commit (by any replica) for ``appends.idle_flush_s`` is flushed.
* :class:`MarkerWatch`: every read request stats the commit markers of the conversations in its
  scope (one ``stat`` each, the erasure check's); a marker that changed since this replica read it
  is re-read, so a request that starts after another replica committed an append answers from it.

docs/serving.md ("Appending turns") states the status codes and the visibility bound.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any
from collections.abc import Callable

from fastapi.exceptions import RequestValidationError
from pydantic import ValidationError

from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.increment.errors import IncrementError
from lychee_ray.ingest.increment.models import AppendRequest, AppendResult, AppendTurn
from lychee_ray.ingest.append.service import AppendService
from lychee_ray.ingest.pipeline import BuildContext
from lychee_ray.config import LycheeConfig
from lychee_ray.embed import Embedder, get_embedder
from lychee_ray.io.store import CommitMarker, StoreReader, StoreLayout, conversation_key
from lychee_ray.io.store.fs import AnyPath, store_root
from lychee_ray.io.store.remote_path import StorePath
from lychee_ray.io.store.lease import LeaseLost
from lychee_ray.io.store.locks import ConversationDeleting
from lychee_ray.io.store.marker import ConversationReplaced
from lychee_ray.query.engine import QueryEngine
from lychee_ray.serve.encode_queue import EncodeQueue
from lychee_ray.serve.errors import ErrorCode, ServiceError
from lychee_ray.serve.schemas import AppendBody
from lychee_ray.names import BACKGROUND, OPENAI_BACKEND

log = logging.getLogger(__name__)

# kind -> (status, code) for the kinds that are not 404/422 (those name the request's own fields).
_CONFLICTS: dict[str, tuple[int, ErrorCode]] = {
    "history_conflict": (409, "history_conflict"),
    "conversation_deleting": (409, "conversation_deleting"),
    "conversation_replaced": (409, "conversation_replaced"),
    "config_mismatch": (409, "config_mismatch"),
    "conversation_busy": (503, "conversation_busy"),
    "lease_lost": (503, "conversation_busy"),  # an object store's lock expired under the write: retry
}

# A turn's session fields as the library's Session model names them -> as AppendTurn does.
_SESSION_FIELDS = {"started_at": "session_started_at"}


def http_error(e: IncrementError | ConversationDeleting | ConversationReplaced | LeaseLost, turns: list[AppendTurn], user_id: str | None,
               retry_after_s: int) -> Exception:
    """The HTTP answer to a refused append, chosen by ``e.kind``: a :class:`ServiceError`, or a
    ``RequestValidationError`` (FastAPI's 422 shape, ``loc`` naming the field) for the request's
    own mistakes. Unknown conversations and owner mismatches are 404s with the message a read of a
    conversation that is not the named user's gets (one message: nothing tells them apart)."""
    cid = getattr(e, "conversation_id", "")
    if e.kind == "unknown_conversation":
        return ServiceError(404, "not_found", f"unknown conversation {cid!r}")
    if e.kind == "owner_mismatch":
        return ServiceError(404, "not_found", f"conversation {cid!r} not found for user {user_id!r}")
    if e.kind == "user_id_required":
        return RequestValidationError([{"loc": ["body", "user_id"], "msg": str(e), "type": "missing"}])
    if e.kind == "invalid_turns":  # loc: the turn (by its id) and the field the library names
        parts = [p for p in (getattr(e, "field", None) or "").split(".") if p]
        idx = next((i for i, t in enumerate(turns) if t.turn_id == getattr(e, "turn_id", None)), None)
        loc: list[str | int] = ["body", "turns"]
        if idx is not None:
            loc += [idx] + ([_SESSION_FIELDS.get(parts[-1], parts[-1])] if parts else [])
        return RequestValidationError([{"loc": loc, "msg": str(e), "type": "value_error"}])
    status, code = _CONFLICTS[e.kind]
    headers = {"Retry-After": str(retry_after_s)} if status == 503 else None
    turn = getattr(e, "turn_id", None) if e.kind == "history_conflict" else None
    return ServiceError(status, code, str(e), headers, {"turn_id": turn} if turn else None)


def build_embedder(cfg: LycheeConfig, private: bool = False) -> Embedder:
    """The embedder that writes a store's vectors: the build's (fp32; never the int8 query model).
    :func:`~lychee_ray.embed.get_embedder` takes the local model's cached ONNX export when there is
    one; ``private``: an instance of its own (not the process's shared one)."""
    ecfg = cfg.embedding
    if cfg.serve.torch_threads > 0 and ecfg.num_threads == 0:
        # as the query model: one thread per model in a replica (replicas scale, and an idle
        # multi-threaded runtime's spinning pool would take CPU from searches)
        ecfg = ecfg.model_copy(update={"num_threads": cfg.serve.torch_threads})
    return get_embedder(ecfg, cfg.llm, private=private)


class MarkerWatch:
    """Per-request check that this replica reads the newest committed generation of each
    conversation in a request's scope: one ``stat`` of its commit marker (atomically replaced on
    every commit, so its inode and mtime change)."""

    def __init__(self, layout: StoreLayout) -> None:
        self.layout = layout
        self._seen: dict[str, tuple[Any, ...]] = {}  # conversation id -> marker signature last read

    def check(self, reader: StoreReader, conversation_id: str | None, user_id: str | None) -> tuple[bool, list[str]]:
        """(a marker this replica holds is gone — erased: reload; conversations whose marker changed
        or appeared since this replica read it — re-read them with ``reader.refresh_conversation``)."""
        markers = reader.markers
        cids = [conversation_id] if conversation_id is not None else reader.by_user.get(user_id or "", [])
        gone, changed = False, []
        for cid in cids:
            m = markers.get(cid)
            try:
                sig = self._signature(self.layout.marker_path(m.key if m is not None else conversation_key(cid)))
            except FileNotFoundError:
                gone = gone or m is not None
                self._seen.pop(cid, None)
                continue
            if self._seen.get(cid) != sig:  # stat before the read: a commit in between is re-read next time
                self._seen[cid] = sig
                changed.append(cid)
        return gone, changed

    @staticmethod
    def _signature(path: AnyPath) -> tuple[Any, ...]:
        """What changes when a marker is rewritten: locally (inode, mtime_ns, size) from one ``stat``;
        on an object store the marker itself (one small GET), because object mtimes have one-second
        resolution and two commits within a second write markers of equal size."""
        if isinstance(path, StorePath):
            return (path.read_text(encoding="utf-8"),)
        st = os.stat(path)
        return (st.st_ino, st.st_mtime_ns, st.st_size)


class IdleFlusher:
    """Flushes conversations this replica appended to once their open tail has been idle for
    ``idle_s`` seconds: no commit by any replica (the marker's ``committed_at``) for that long.

    One daemon thread, started by the first :meth:`touch`; it sleeps until the earliest deadline.
    ``flush(cid)`` runs the flush; ``marker(cid)`` reads the conversation's commit marker (None when
    it is gone).
    """

    def __init__(self, idle_s: float, flush: Callable[[str], Any], marker: Callable[[str], CommitMarker | None]) -> None:
        self.idle_s = idle_s
        self._flush, self._marker = flush, marker
        self._due: dict[str, float] = {}  # conversation id -> wall-clock time its flush is due
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None
        self._stopped = False
        self.flushes = 0
        self.errors = 0

    def touch(self, conversation_id: str, open_tail: bool) -> None:
        """After an append by this replica: (re)arm the conversation's deadline, or drop it when
        nothing is left open."""
        if self.idle_s <= 0:
            return
        with self._cond:
            if self._stopped:
                return
            if open_tail:
                self._due[conversation_id] = time.time() + self.idle_s
            else:
                self._due.pop(conversation_id, None)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="lychee-idle-flush", daemon=True)
                self._thread.start()
            self._cond.notify()

    def pending(self) -> list[str]:
        """Conversations waiting for their idle flush."""
        with self._cond:
            return sorted(self._due)

    def forget(self, conversation_id: str) -> None:
        """Drop a conversation's deadline (erased)."""
        with self._cond:
            self._due.pop(conversation_id, None)

    def stop(self) -> None:
        """Stop the thread (a flush already running finishes on its own: its commit is atomic)."""
        with self._cond:
            self._stopped = True
            self._due.clear()
            self._cond.notify()

    def _loop(self) -> None:
        while True:
            with self._cond:
                while not self._stopped:
                    now = time.time()
                    ready = [c for c, t in self._due.items() if t <= now]
                    if ready:
                        break
                    self._cond.wait(timeout=min(self._due.values()) - now if self._due else None)
                if self._stopped:
                    return
                for c in ready:
                    del self._due[c]
            for c in ready:
                self._flush_if_idle(c)

    def _flush_if_idle(self, conversation_id: str) -> None:
        m = self._marker(conversation_id)
        if m is None or m.open_turns == 0:  # erased, or flushed/closed meanwhile (by any replica)
            return
        last = _epoch(m.committed_at)
        if last is not None and time.time() - last < self.idle_s:  # another replica appended since
            with self._cond:
                self._due.setdefault(conversation_id, last + self.idle_s)
            return
        try:
            self._flush(conversation_id)
            self.flushes += 1
        except (IncrementError, ConversationDeleting) as e:
            self.errors += 1
            if e.kind == "conversation_busy":  # another writer is active: not idle, try again later
                with self._cond:
                    self._due.setdefault(conversation_id, time.time() + self.idle_s)
            log.warning("idle flush of %r not done (%s): %s", conversation_id, e.kind, e)
        except Exception:  # noqa: BLE001 — the thread must outlive one bad flush; logged with its traceback
            self.errors += 1
            log.exception("idle flush of %r failed", conversation_id)


def _epoch(iso: object) -> float | None:
    try:
        return datetime.fromisoformat(iso).timestamp() if isinstance(iso, str) else None
    except ValueError:
        return None


class Appender:
    """One replica's appends: its :class:`~lychee_ray.ingest.append.service.AppendService` (build
    contexts made on first use), the encode queue, the idle flusher, counters.

    ``store`` is the replica's :class:`~lychee_ray.query.engine.QueryEngine` (its reader re-reads a
    conversation after this replica committed it); ``embedder`` an injected build-side embedder
    (tests), else :func:`build_embedder` loads the configured one on the first append.
    """

    def __init__(self, root: str | Path | StorePath, config: LycheeConfig, store: QueryEngine, embedder: Embedder | None = None) -> None:
        self.root = store_root(root, config.store)  # a remote root carries the config's store settings
        self.layout = StoreLayout(self.root, config.store)
        self.config = config
        self.store = store
        self._embedder = embedder
        self._ctx: BuildContext | None = None
        self._ctx_lock = threading.Lock()
        appends_cfg = config.appends
        self.retry_after_s = appends_cfg.retry_after_s
        self.flusher = IdleFlusher(appends_cfg.idle_flush_s, self.flush_now, self._read_marker)
        self.service = AppendService(self.root, config, self._context, background_context=self._background_context,
                                     committed=store.reader.refresh_conversation)
        self.queue = EncodeQueue(self.catch_up, appends_cfg.queue_max, appends_cfg.queue_retry_s, appends_cfg.queue_nice,
                                 warm=self._background_context)
        self._bg_ctx: BuildContext | None = None
        self._bg_lock = threading.Lock()  # not _ctx_lock: loading one model must not hold up the other
        self.appends = 0
        self.turns_stored = 0
        # turns an earlier replica stored but did not live to encode: picked up now
        for cid, m in list(store.reader.markers.items()):
            if m.unsegmented_turns:
                self.queue.submit(cid)

    @property
    def inline_encodes(self) -> int:
        """Queued appends encoded inline because the queue was full."""
        return self.service.inline_encodes

    def _context(self) -> BuildContext:
        """The build context of the requests' appends (made on first use)."""
        with self._ctx_lock:
            if self._ctx is None:
                self._ctx = self._make_context(private=False)
                if self.config.appends.encode == BACKGROUND:
                    self.queue.start()  # its own model loads on its thread now, not on the first encoding
            return self._ctx

    def _background_context(self) -> BuildContext:
        """The build context of background encodings: its own embedder instance (made on first use,
        in the encode queue's lower-priority thread), so an append's one-turn embedding never waits
        behind an encoding's records and nodes; an injected embedder (tests) is shared."""
        with self._bg_lock:
            if self._bg_ctx is None:
                self._bg_ctx = self._make_context(private=True)
            return self._bg_ctx

    def _make_context(self, private: bool) -> BuildContext:
        backend = self.store.backend()
        emb = self._embedder if self._embedder is not None else build_embedder(self.config, private=private)
        return make_context(self.config, backend, emb, batched=False,
                            llm_client=self.store.llm_client() if backend == OPENAI_BACKEND else None)

    def _read_marker(self, conversation_id: str) -> CommitMarker | None:
        return self.layout.read_marker(conversation_key(conversation_id))

    # -- blocking: worker threads ----------------------------------------------------------------
    def append_now(self, request: AppendRequest) -> AppendResult:
        """Run one append (blocking; this replica reads its generation at once). With
        ``appends.encode: background`` the turns are stored and their segmentation and encoding
        queued (:class:`~lychee_ray.serve.encode_queue.EncodeQueue`); a full queue, a flush or a new
        conversation encode inline (the service's choice)."""
        cid = request.conversation_id
        result = self.service.append(request, queued=self.config.appends.encode == BACKGROUND,
                                     submit=self.queue.submit)
        self.appends += 1
        self.turns_stored += len(result.stored_turn_ids)
        if result.stored_turn_ids or result.generation is not None:
            self.flusher.touch(cid, bool(result.open_turn_ids))
        return result

    def catch_up(self, conversation_id: str) -> AppendResult:
        """Segment and encode a conversation's queued turns (an append of no turns; the encode
        queue's work), folding its deltas when they passed the bound; this replica reads the result."""
        return self.service.catch_up(conversation_id)

    def flush_now(self, conversation_id: str) -> AppendResult:
        """Encode the open tail segment of a conversation (blocking; the idle flusher's call)."""
        return self.append_now(AppendRequest(conversation_id=conversation_id, turns=[], flush=True))

    # -- the endpoints -----------------------------------------------------------------------------
    async def append(self, conversation_id: str, body: AppendBody) -> AppendResult:
        """``POST /v1/conversations/{id}/turns``."""
        return await self._run(conversation_id, body.turns, body.user_id, body.flush)

    async def flush(self, conversation_id: str, user_id: str | None) -> AppendResult:
        """``POST /v1/conversations/{id}/flush``: 404 for a conversation that is not stored."""
        if not self.layout.marker_path(conversation_key(conversation_id)).exists():
            raise ServiceError(404, "not_found", f"unknown conversation {conversation_id!r}")
        return await self._run(conversation_id, [], user_id, True)

    async def _run(self, conversation_id: str, turns: list[AppendTurn], user_id: str | None, flush: bool) -> AppendResult:
        try:
            request = AppendRequest(conversation_id=conversation_id, turns=turns, user_id=user_id, flush=flush)
        except ValidationError as e:  # only the path's id can be wrong here: the body was validated
            raise RequestValidationError([{"loc": ["path", *err["loc"]], "msg": err["msg"], "type": err["type"]}
                                          for err in e.errors()]) from None
        try:
            # its own thread (not the search workers): an append embeds, segments, encodes and writes
            return await asyncio.to_thread(self.append_now, request)
        except (IncrementError, ConversationDeleting, ConversationReplaced, LeaseLost) as e:
            raise http_error(e, turns, user_id, self.retry_after_s) from None

    def stats(self) -> dict[str, Any]:
        """For ``GET /v1/admin/stats``."""
        return {"appends": self.appends, "turns_stored": self.turns_stored, "idle_flush_s": self.flusher.idle_s,
                "idle_flushes": self.flusher.flushes, "idle_flush_errors": self.flusher.errors,
                "idle_flush_pending": len(self.flusher.pending()), "encode": self.config.appends.encode,
                "encode_queue": self.queue.stats(), "inline_encodes": self.inline_encodes}

    def forget(self, conversation_ids: list[str]) -> None:
        """Erased conversations: their waiting background encodings are cancelled and nothing kept of
        them (stored state, idle-flush deadline) survives to meet a re-created id. An encoding
        already running is fenced at its commit (it read the erased lineage)."""
        for cid in conversation_ids:
            self.queue.cancel(cid)
            self.service.forget(conversation_key(cid))
            self.flusher.forget(cid)

    def close(self) -> None:
        """Stop the idle flusher and the encode queue (queued turns stay stored: the next replica
        or append encodes them)."""
        self.flusher.stop()
        self.queue.stop()


__all__ = ["Appender", "IdleFlusher", "MarkerWatch", "build_embedder", "http_error"]
