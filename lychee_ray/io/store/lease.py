"""Write locks on object stores, which have no ``flock``: a lease object its holder keeps renewing.

A lease is a small JSON object ``{"owner", "expires_at"}`` at the lock's path. A writer takes a
free (absent or expired) lease by writing its own, waits ``store.lock_settle_s`` (or
``store.lock_settle_rtt_factor`` times its own read+write time, when longer: waits must stretch
with the load) and reads it back ``store.lock_confirm_reads`` times: on an object store the last
write wins, so of writers racing for a free lease the one that keeps reading back its own owner
holds it and the others wait. A background thread renews the lease every
third of ``store.lock_lease_s``; a writer that dies stops renewing, and its lease may be taken over
once expired (so a crashed writer never blocks a conversation for longer than one lease).

A lease must never be trusted past its expiry, however starved its holder is: the settle wait is
capped at a third of the lease, and a lease confirmed slowly is renewed while it is confirmed, so
a slow store cannot make every writer's lease expire before it is confirmed. And every commit
checks the lease right before it writes the commit marker (:meth:`Lease.check`, called by
``StoreLayout.write_marker`` through :func:`check_held`): a holder whose renewals fell behind — its
process starved of CPU, its renewer thread late — or whose lease another writer took over refuses
to commit with :class:`LeaseLost` (``kind="lease_lost"``) instead of writing over a rival.

Limits, stated plainly: without conditional writes (which ``pyarrow.fs`` does not expose) two
writers whose write-then-read-back windows interleave exactly can both believe they hold the
lease, and expiry compares wall clocks of different machines. The commit protocol does not depend
on the lock for consistency (every commit writes a new generation and its marker last, so readers
never see a mix); the lock only keeps two appends to one conversation from both building on the
same stored state — on object storage, route a conversation's appends to one writer (Serve does:
one replica owns a conversation's append buffer) and rely on the lease for crash safety.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from typing import Any

from lychee_ray.io.store.remote_path import StorePath

# the holder renews every this fraction of the lease; it trusts its lease for commits only while
# its last renewal is at most twice that old, so at least this fraction of the lease is left
_RENEW_FRACTION = 1 / 3


class LeaseLost(RuntimeError):
    """A writer's lease may have expired, or another writer took it over: the commit is refused
    (nothing published). ``kind`` is ``"lease_lost"``; retrying (a fresh lock) is safe."""

    kind = "lease_lost"

    def __init__(self, path: StorePath, why: str) -> None:
        super().__init__(f"write lock {path} lost ({why}); nothing was committed")
        self.path = path


# leases this process holds, by lock path: what write_marker checks before it publishes
_HELD: dict[str, Lease] = {}
_HELD_LOCK = threading.Lock()


class Lease:
    """A held lease (renewed in the background until :meth:`release`). ``renewed`` is the
    monotonic time of the last write of it known to have landed."""

    def __init__(self, path: StorePath, owner: str, renewed: float) -> None:
        self.path = path
        self.owner = owner
        self.renewed = renewed
        self.lost: str | None = None  # why it is known lost (taken over)
        self._stop = threading.Event()
        with _HELD_LOCK:
            _HELD[str(path)] = self
        self._thread = threading.Thread(target=self._renew, name="lychee-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        lease_s = self.path.settings.lock_lease_s
        while not self._stop.wait(lease_s * _RENEW_FRACTION):
            if time.monotonic() - self.renewed > lease_s:
                self.lost = "not renewed within the lease (the process was starved)"
                return  # may have expired: reviving it could overlap a rival that took it over
            held = read_lease(self.path)
            if held is None or held.get("owner") != self.owner:
                self.lost = "another writer took it over"
                return  # nothing to renew
            t = time.monotonic()
            _write(self.path, self.owner, lease_s)
            self.renewed = t

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless the lease is surely still this holder's: renewed recently
        enough that at least a third of it is left, and the object still names this holder."""
        if self.lost:
            raise LeaseLost(self.path, self.lost)
        lease_s = self.path.settings.lock_lease_s
        age = time.monotonic() - self.renewed
        if age > lease_s * (1 - _RENEW_FRACTION):
            raise LeaseLost(self.path, f"last renewed {age:.1f} s ago, lease {lease_s:g} s: it may expire any moment")
        held = read_lease(self.path)
        if held is None or held.get("owner") != self.owner:
            raise LeaseLost(self.path, "another writer holds it")

    def release(self) -> None:
        """Stop renewing and remove the lease object if it is still this holder's."""
        self._stop.set()
        with _HELD_LOCK:
            if _HELD.get(str(self.path)) is self:
                del _HELD[str(self.path)]
        held = read_lease(self.path)
        if held is not None and held.get("owner") == self.owner:
            self.path.unlink(missing_ok=True)


def check_held(path: StorePath) -> None:
    """Before a commit publishes under the lock at ``path``: :meth:`Lease.check` of this process's
    lease there (nothing to check when it holds none: a caller that holds no lock)."""
    with _HELD_LOCK:
        lease = _HELD.get(str(path))
    if lease is not None:
        lease.check()


# a read that races the holder's rewrite or removal of the lease can fail transiently on some
# S3-compatible servers; it is read again this many times before the error is raised
_READ_TRIES = 5


def read_lease(path: StorePath) -> dict[str, Any] | None:
    """The lease at ``path`` (None when absent or not a lease)."""
    for attempt in range(_READ_TRIES):
        try:
            d = json.loads(path.read_text(encoding="utf-8"))
            break
        except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
            return None
        except OSError:
            if attempt == _READ_TRIES - 1:
                raise
            time.sleep(path.settings.lock_poll_s)
    return d if isinstance(d, dict) else None


def _write(path: StorePath, owner: str, lease_s: float) -> None:
    path.write_text(json.dumps({"owner": owner, "expires_at": time.time() + lease_s}), encoding="utf-8")


def _confirmed(path: StorePath, owner: str, settle_s: float, reads: int, written: float) -> float | None:
    """Whether ``reads`` read-backs, each after ``settle_s``, all show ``owner``'s lease; the time of
    its last write when they do (None: a rival's). A confirmation slow enough to use up a renewal
    period renews the lease (it is unexpired and ours), so it cannot expire while it is confirmed."""
    lease_s = path.settings.lock_lease_s
    for _ in range(reads):
        time.sleep(settle_s)
        back = read_lease(path)
        if back is None or back.get("owner") != owner:
            return None
        if time.monotonic() - written > lease_s * _RENEW_FRACTION:
            t = time.monotonic()
            _write(path, owner, lease_s)
            written = t
    return written


def acquire_lease(path: StorePath, *, blocking: bool = True) -> Lease | None:
    """Take the lease at ``path``; None when ``blocking`` is False and another writer holds it."""
    s = path.settings  # the store settings of the root this lock belongs to
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    while True:
        t0 = time.monotonic()
        held = read_lease(path)
        if held is None or float(held.get("expires_at", 0)) < time.time():
            t_write = time.monotonic()
            _write(path, owner, s.lock_lease_s)
            # a rival that read the lease as free writes within about one read+write of its own: wait
            # several of ours (measured now, under the current load) and look more than once; never
            # longer than a renewal period, or a slow store would let every lease expire unconfirmed
            settle = min(max(s.lock_settle_s, s.lock_settle_rtt_factor * (time.monotonic() - t0)),
                         s.lock_lease_s * _RENEW_FRACTION)
            written = _confirmed(path, owner, settle, s.lock_confirm_reads, t_write)
            if written is not None:
                return Lease(path, owner, written)
        if not blocking:
            return None
        time.sleep(s.lock_poll_s)


__all__ = ["Lease", "LeaseLost", "acquire_lease", "check_held", "read_lease"]
