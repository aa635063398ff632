"""Locks of a memory store: one writer per conversation, and the "being erased" flag.

Three files under ``ROOT/_locks/`` (paths from :class:`~lychee_ray.io.store.layout.StoreLayout`,
named by a hash of the conversation key so that no lock file spells an id):

* ``<hash>.lock`` — an ``flock(2)`` lock every writer of one conversation holds while it changes
  that conversation (an append's commit, erasure, erasure re-pointing its rows in a shared
  compacted file). Take it with :func:`conversation_write_lock`.
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

import fcntl
import json
import os
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal
from collections.abc import Iterator

from lychee_ray.io.store.fs import AnyPath, StorePath
from lychee_ray.io.store.layout import StoreLayout, as_layout, conversation_key
from lychee_ray.io.store.lease import Lease, acquire_lease

# what flock_path returns: a file descriptor (local flock) or a lease (object store)
LockHandle = int | Lease

LockErrorKind = Literal["conversation_deleting"]


class ConversationDeleting(RuntimeError):
    """A write to a conversation that is being erased (or whose erasure crashed and must be re-run).

    ``kind`` is ``"conversation_deleting"``; ``conversation_id`` names the conversation. An HTTP
    append reports it as a 409 with this kind.
    """

    kind: LockErrorKind = "conversation_deleting"

    def __init__(self, conversation_id: str) -> None:
        super().__init__(f"conversation {conversation_id!r} is being deleted; the write was refused")
        self.conversation_id = conversation_id


def _layout(root: str | Path | StorePath | StoreLayout) -> StoreLayout:
    return as_layout(root)


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
def conversation_write_lock(root: str | Path | StoreLayout, conversation_id: str) -> Iterator[None]:
    """Hold the one-writer lock of ``conversation_id`` for the ``with`` block.

    Raises :class:`ConversationDeleting` (before waiting, and again once the lock is held) when an
    erasure of the conversation is running or was left unfinished. Blocks while another writer of
    the same conversation holds the lock.
    """
    layout = _layout(root)
    if is_deleting(layout, conversation_id):
        raise ConversationDeleting(conversation_id)
    fd = flock_path(layout.write_lock_path(conversation_key(conversation_id)))
    try:
        if is_deleting(layout, conversation_id):
            raise ConversationDeleting(conversation_id)
        yield
    finally:
        release(fd)


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
    found = (read_journal(p) for p in sorted(layout.locks_dir.iterdir()) if p.name.endswith(".deleting"))
    return [j for j in found if j is not None]


__all__ = ["ConversationDeleting", "LockErrorKind", "conversation_write_lock", "flock_path", "is_deleting",
           "pending_erasures", "read_journal", "release", "store_lock"]
