"""Starting or joining Ray: one place for every job and the Serve launcher.

Quiet mode (:func:`lychee_ray.logs.is_quiet`, on in the CLI unless ``--verbose``) keeps Ray off the
console: worker output is not forwarded (``log_to_driver``), Ray's own INFO lines are off
(``logging_level``), Ray Data's progress UI and console lines are off (its log file keeps them),
the notice that token authentication is on (Ray's default for a new local cluster) is not printed
(its logger is raised to ERROR: setting ``RAY_AUTH_MODE`` after ``import ray`` would not reach Ray's
C++ side), the driver's C++ warnings (``core_worker.cc … max_restarts``) are off
(``RAY_BACKEND_LOG_LEVEL``; the one line Ray prints about that variable while it starts is dropped
by pointing this process's stdout and stderr at ``os.devnull`` for the duration of ``ray.init`` — errors still
surface as exceptions, and Ray's own processes log to their session files), and workers load models
without progress bars.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from typing import Any
from collections.abc import Iterator

import ray

from lychee_ray.config import LycheeConfig, ray_address
from lychee_ray.logs import QUIET_WORKER_ENV, is_quiet
from lychee_ray.progress import is_terminal

# Environment of this process in quiet mode, set before Ray starts (already-set variables win).
QUIET_DRIVER_ENV = {
    "RAY_BACKEND_LOG_LEVEL": "fatal",  # C++ core-worker lines such as the actor max_restarts warning
}
# Ray's logger that announces token authentication on every new local cluster.
_TOKEN_AUTH_LOGGER = "ray._private.authentication.authentication_token_setup"


def ray_init_kwargs(quiet: bool) -> dict[str, Any]:
    """``ray.init`` keyword arguments shared by the build/eval jobs and ``lychee-ray serve``."""
    kw: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": not quiet}
    if quiet:
        kw["logging_level"] = logging.WARNING
    return kw


def quiet_environment(quiet: bool) -> None:
    """Console set-up before Ray starts: no colour codes in Ray's prefixes when stdout or stderr is not
    a terminal (``RAY_COLOR_PREFIX=0``, verbose or not); quiet mode also sets :data:`QUIET_DRIVER_ENV`
    and mutes the token-auth notice. Already-set variables win."""
    if not (is_terminal(sys.stdout) and is_terminal(sys.stderr)):
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")
    if quiet:
        for k, v in QUIET_DRIVER_ENV.items():
            os.environ.setdefault(k, v)
        logging.getLogger(_TOKEN_AUTH_LOGGER).setLevel(logging.ERROR)


def quiet_ray_data(quiet: bool) -> None:
    """Quiet mode: Ray Data without its progress bars and console lines."""
    if not quiet:  # Ray's defaults (or what the caller set) stay
        return
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False
    # only the console handler: Ray Data's own log file in the session directory keeps everything
    for h in logging.getLogger("ray.data").handlers:
        if not isinstance(h, logging.FileHandler) and type(h).__name__ != "SessionFileHandler":
            h.setLevel(logging.ERROR)


@contextlib.contextmanager
def console_muted(mute: bool) -> Iterator[None]:
    """File descriptors 1 and 2 pointed at ``os.devnull``, then restored: C++ code writes to them
    directly, and Ray's error reporter thread prints worker and raylet errors to stdout."""
    if not mute:
        yield
        return
    streams = (sys.stdout, sys.stderr)
    for st in streams:
        st.flush()
    saved = [os.dup(1), os.dup(2)]
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, 1)
        os.dup2(devnull, 2)
        yield
    finally:
        for st in streams:  # what Python wrote meanwhile goes to os.devnull too
            st.flush()
        os.dup2(saved[0], 1)
        os.dup2(saved[1], 2)
        for fd in (*saved, devnull):
            os.close(fd)


def init_ray(cfg: LycheeConfig, quiet: bool | None = None) -> None:
    """Connect to ``RAY_ADDRESS`` or start a small local Ray (no dashboard, bounded object store).

    ``quiet`` (default: :func:`lychee_ray.logs.is_quiet`) keeps Ray off the console (module docstring).
    """
    quiet = is_quiet() if quiet is None else quiet
    if ray.is_initialized():
        quiet_ray_data(quiet)
        return
    addr = ray_address()
    kw = ray_init_kwargs(quiet)
    quiet_environment(quiet)
    if addr:
        kw["address"] = addr
    else:
        if quiet:
            kw["runtime_env"] = {"env_vars": dict(QUIET_WORKER_ENV)}
        if cfg.ray.object_store_memory_mb:
            kw["object_store_memory"] = cfg.ray.object_store_memory_mb * 1024 * 1024
        kw["include_dashboard"] = False
    with console_muted(quiet):
        ray.init(**kw)
    quiet_ray_data(quiet)
