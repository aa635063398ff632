"""Locks of a memory store: one writer per conversation, and the "being erased" flag.

Three files under ``ROOT/_locks/`` (paths from :class:`~lychee_ray.io.store.layout.StoreLayout`,
named by a hash of the conversation key so that no lock file spells an id):

* ``<hash>.lock`` — an ``flock(2)`` lock every writer of one conversation holds while it changes
  that conversation (an append's commit, erasure, erasure re-pointing its rows in a shared
  compacted file). Take it with :func:`conversation_write_lock`, or with a bounded wait
  :func:`write_lock` / :func:`async_write_lock` (appends; ``which="encode"``: the conversation's
  encode lock, ``<hash>.encode.lock``, one background encoding at a time).
* ``<hash>.deleting`` — present from the moment an erasure of the conversation starts until it
  has finished (and after a crashed erasure, until ``delete`` is run again). It holds the erasure's
  journal: the commit marker being erased, so a re-run finds the rows of a half-erased conversation.
  While it exists, :func:`conversation_write_lock` raises :class:`ConversationDeleting`.
* ``store.lock`` — an ``flock(2)`` lock serialising store-wide rewrites (erasures rewrite shared
  ``compact-*.parquet`` files; two at once could write back each other's erased rows).

How an append uses this (the check happens twice: before waiting, so a doomed append is refused at
once, and after the lock is held, because an erasure may have started while it waited)::

    with conversation_write_lock(root, conversation_id):   # ConversationDeleting: refuse, kind data
        ... read the stored state, build the new generation, commit it ...

An erasure sets the flag, then takes the write lock (waiting for an append already committing),
so an append either lands before the erasure (and is erased with the rest) or is refused with
``ConversationDeleting``; it is never lost silently nor written back after the erasure. An append
that only gets the lock after the erasure finished starts a new conversation.

``flock`` works between processes and threads of one machine (and on shared file systems that
implement it, such as NFSv4 or Lustre); it is released when its holder dies, so a crashed writer
never leaves a stale write lock. A lock file is removed only by its holder, and a waiter checks,
once it holds the lock, that the file is still the one at the path (else it locks the new one).
On an object store (a remote root, :mod:`.fs`) the same lock paths hold renewed lease objects
instead (:mod:`.lease`, which states their limits).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import json
import os
import time
from contextlib import contextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, overload
from collections.abc import Callable, Iterator

from lychee_ray.io.store.fs import AnyPath, sorted_entries
from lychee_ray.io.store.remote_path import StorePath
from lychee_ray.io.store.layout import StoreLayout, as_layout, conversation_key
from lychee_ray.io.store.lease import Lease, acquire_lease

# what flock_path returns: a file descriptor (local flock) or a lease (object store)
LockHandle = int | Lease

LockErrorKind = Literal["conversation_deleting", "conversation_busy"]
# which of a conversation's locks: its one-writer lock, or its encode lock (one background encoding at a time)
LockKind = Literal["write", "encode"]


class ConversationDeleting(RuntimeError):
    """A write to a conversation that is being erased (or whose erasure crashed and must be re-run).

    ``kind`` is ``"conversation_deleting"``; ``conversation_id`` names the conversation. An HTTP
    append reports it as a 409 with this kind.
    """

    kind: LockErrorKind = "conversation_deleting"

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} is being deleted; the write was refused")
        self.conversation_id = conversation_id


class LockBusy(TimeoutError):
    """Another holder kept a conversation's lock longer than the caller would wait (``kind``
    ``"conversation_busy"``; ``waited_s`` says how long it waited)."""

    kind: LockErrorKind = "conversation_busy"

    def __init__(self, conversation_id: str, waited_s: float) -> None:
        super().__init__(f"conversation {conversation_id!r} is being written by another writer "
                         f"(waited {waited_s:.1f} s)")
        self.conversation_id = conversation_id
        self.waited_s = waited_s


# makes the error a lock that was not free in time raises: (conversation id, seconds waited) -> error
BusyError = Callable[[str, float], Exception]


def _layout(root: str | Path | StorePath | StoreLayout) -> StoreLayout:
    return as_layout(root)


# a blocking call never returns None (the checker needs no assert at each caller)
@overload
def flock_path(path: AnyPath, *, blocking: Literal[True] = ...) -> LockHandle: ...
@overload
def flock_path(path: AnyPath, *, blocking: bool) -> LockHandle | None: ...
def flock_path(path: AnyPath, *, blocking: bool = True) -> LockHandle | None:
    """Hold an exclusive ``flock`` on ``path`` (created when missing); returns its descriptor (a
    lease on an object store), or None when ``blocking`` is False and another holder has it.
    Release with :func:`release`."""
    if isinstance(path, StorePath):
        return acquire_lease(path, blocking=blocking)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            os.close(fd)
            return None
        try:
            st, now = os.fstat(fd), os.stat(path)
            if (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino):
                return fd
        except FileNotFoundError:
            pass
        os.close(fd)  # the holder removed the file while we waited: lock the one at the path now


def release(fd: LockHandle, path: AnyPath | None = None) -> None:
    """Release a lock from :func:`flock_path`; with ``path``, remove the lock file first (while still
    holding it, so a waiter sees that its file is gone and locks a fresh one)."""
    if isinstance(fd, Lease):
        fd.release()  # removes the lease object
        return
    try:
        if path is not None:
            path.unlink(missing_ok=True)
    finally:
        os.close(fd)


def is_deleting(root: str | Path | StoreLayout, conversation_id: str) -> bool:
    """True while an erasure of ``conversation_id`` runs (or crashed half-way): writes must refuse."""
    return _layout(root).deleting_path(conversation_key(conversation_id)).exists()


@contextmanager
def write_lock(root: str | Path | StoreLayout, conversation_id: str, timeout_s: float | None = None,
               poll_s: float = 0.0, which: LockKind = "write", busy: BusyError = LockBusy) -> Iterator[None]:
    """Hold one of ``conversation_id``'s locks for the ``with`` block: its one-writer lock, or with
    ``which="encode"`` its encode lock (one background encoding at a time).

    ``timeout_s`` None waits as long as it takes; else ``busy(conversation_id, waited_s)`` is raised
    after that long (:class:`LockBusy` unless the caller names its own error), trying every
    ``poll_s`` seconds. Raises :class:`ConversationDeleting` (before waiting, and again once the
    lock is held) when an erasure of the conversation is running or was left unfinished.
    """
    layout = _layout(root)
    if is_deleting(layout, conversation_id):
        raise ConversationDeleting(conversation_id)
    key = conversation_key(conversation_id)
    path = layout.write_lock_path(key) if which == "write" else layout.encode_lock_path(key)
    t0 = time.monotonic()
    fd: LockHandle | None
    if timeout_s is None:
        fd = flock_path(path)
    else:
        while (fd := flock_path(path, blocking=False)) is None:
            if time.monotonic() - t0 >= timeout_s:
                raise busy(conversation_id, time.monotonic() - t0)
            time.sleep(poll_s)
    assert fd is not None
    try:
        if is_deleting(layout, conversation_id):  # an erasure started while we waited
            raise ConversationDeleting(conversation_id)
        yield
    finally:
        release(fd)


def conversation_write_lock(root: str | Path | StoreLayout, conversation_id: str) -> contextlib.AbstractContextManager[None]:
    """Hold the one-writer lock of ``conversation_id`` for the ``with`` block, waiting as long as
    another writer of the same conversation holds it (:func:`write_lock` without a timeout)."""
    return write_lock(root, conversation_id)


class AsyncWriteLock:
    """:func:`write_lock` for coroutines: the (possibly blocking) wait runs in a worker thread."""

    def __init__(self, root: str | Path | StoreLayout, conversation_id: str, timeout_s: float | None = None,
                 poll_s: float = 0.0, which: LockKind = "write", busy: BusyError = LockBusy) -> None:
        self._cm = write_lock(root, conversation_id, timeout_s, poll_s, which, busy)

    async def __aenter__(self) -> None:
        await asyncio.to_thread(self._cm.__enter__)

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        self._cm.__exit__(exc_type, exc, tb)


def async_write_lock(root: str | Path | StoreLayout, conversation_id: str, timeout_s: float | None = None,
                     poll_s: float = 0.0, which: LockKind = "write", busy: BusyError = LockBusy) -> AsyncWriteLock:
    """``async with async_write_lock(...)``: :func:`write_lock` without blocking the event loop."""
    return AsyncWriteLock(root, conversation_id, timeout_s, poll_s, which, busy)


@contextmanager
def store_lock(root: str | Path | StoreLayout) -> Iterator[None]:
    """Hold the store-wide rewrite lock (erasure; compaction should take it too) for the block."""
    fd = flock_path(_layout(root).store_lock_path)
    try:
        yield
    finally:
        release(fd)


def read_journal(path: AnyPath) -> dict[str, Any] | None:
    """An erasure's journal (the commit marker being erased), or None when unreadable/absent."""
    try:
        d = json.loads(path.read_text(encoding="utf-8"))
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return d if isinstance(d, dict) and isinstance(d.get("conversation_id"), str) else None


def pending_erasures(root: str | Path | StoreLayout) -> list[dict[str, Any]]:
    """Journals of erasures that are running or crashed (``*.deleting`` flags), in file order."""
    layout = _layout(root)
    if not layout.locks_dir.is_dir():
        return []
    found = (read_journal(p) for p in sorted_entries(layout.locks_dir) if p.name.endswith(".deleting"))
    return [j for j in found if j is not None]


__all__ = ["AsyncWriteLock", "BusyError", "ConversationDeleting", "LockBusy", "LockErrorKind", "LockKind",
           "async_write_lock", "conversation_write_lock", "flock_path", "is_deleting", "pending_erasures",
           "read_journal", "release", "store_lock", "write_lock"]
