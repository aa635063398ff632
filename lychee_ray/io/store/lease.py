"""Write locks on object stores, which have no ``flock``: a lease object its holder keeps renewing.

A lease is a small JSON object ``{"owner", "expires_at"}`` at the lock's path. A writer takes a
free (absent or expired) lease by writing its own, waits ``store.lock_settle_s`` (or
``store.lock_settle_rtt_factor`` times its own read+write time, when longer: waits must stretch
with the load) and reads it back ``store.lock_confirm_reads`` times: on an object store the last
write wins, so of writers racing for a free lease the one that keeps reading back its own owner
holds it and the others wait. A background thread renews the lease every
third of ``store.lock_lease_s``; a writer that dies stops renewing, and its lease may be taken over
once expired (so a crashed writer never blocks a conversation for longer than one lease).

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

from lychee_ray.io.store.fs import StorePath


class Lease:
    """A held lease (renewed in the background until :meth:`release`)."""

    def __init__(self, path: StorePath, owner: str) -> None:
        self.path = path
        self.owner = owner
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._renew, name="lychee-lease", daemon=True)
        self._thread.start()

    def _renew(self) -> None:
        lease_s = self.path.settings.lock_lease_s
        while not self._stop.wait(lease_s / 3):
            held = read_lease(self.path)
            if held is None or held.get("owner") != self.owner:
                return  # lost it (expired and taken over): nothing to renew
            _write(self.path, self.owner, lease_s)

    def release(self) -> None:
        """Stop renewing and remove the lease object if it is still this holder's."""
        self._stop.set()
        held = read_lease(self.path)
        if held is not None and held.get("owner") == self.owner:
            self.path.unlink(missing_ok=True)


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


def _confirmed(path: StorePath, owner: str, settle_s: float, reads: int) -> bool:
    """Whether ``reads`` read-backs, each after ``settle_s``, all show ``owner``'s lease."""
    for _ in range(reads):
        time.sleep(settle_s)
        back = read_lease(path)
        if back is None or back.get("owner") != owner:
            return False
    return True


def acquire_lease(path: StorePath, *, blocking: bool = True) -> Lease | None:
    """Take the lease at ``path``; None when ``blocking`` is False and another writer holds it."""
    s = path.settings  # the store settings of the root this lock belongs to
    owner = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:12]}"
    while True:
        t0 = time.monotonic()
        held = read_lease(path)
        if held is None or float(held.get("expires_at", 0)) < time.time():
            _write(path, owner, s.lock_lease_s)
            # a rival that read the lease as free writes within about one read+write of its own: wait
            # several of ours (measured now, under the current load) and look more than once
            settle = max(s.lock_settle_s, s.lock_settle_rtt_factor * (time.monotonic() - t0))
            if _confirmed(path, owner, settle, s.lock_confirm_reads):
                return Lease(path, owner)
        if not blocking:
            return None
        time.sleep(s.lock_poll_s)


__all__ = ["Lease", "acquire_lease", "read_lease"]
