"""Ray Serve wiring of the query service (the HTTP API itself lives in :mod:`lychee_ray.serve`).

::

    ray.init(...)
    url = start_service("out/locomo", cfg)      # Serve on cfg.serve.host:port (127.0.0.1 by default)
    ...
    stop_service()

    serve_until_stopped("out/locomo", cfg, ...)  # `lychee-ray serve`: own Ray, blocks until Ctrl-C/SIGTERM

On a cluster, Serve runs it from a config file instead (``serve run|deploy configs/serve.yaml``):
:mod:`lychee_ray.ray.serve_app` is the application builder, binding the same deployment.

Each replica opens the store from its directory (manifest + commit markers), loads the embedding
model once, and serves :func:`lychee_ray.serve.create_app` as its FastAPI ingress. Query
embeddings of concurrent requests in a replica go through one ``@serve.batch`` method.
Replicas / autoscaling and the request bounds come from the ``serve`` config section: a replica
sheds load itself (``serve/admission.py``: JSON 503 ``overloaded`` with Retry-After), and Serve is
told to hand it more than that (:func:`serve_ongoing_requests`), so Serve's own plain-text 503 is
only a backstop.
"""

from __future__ import annotations

import logging
import os
import signal
import time
from pathlib import Path
from typing import Any
from collections.abc import Callable

import numpy as np
import ray
from ray import serve

from lychee_ray.config import LycheeConfig, ray_address
from lychee_ray.io.store import NotAStoreError, StoreLayout
from lychee_ray.io.store.fs import root_string
from lychee_ray.ray.runtime import quiet_environment, ray_init_kwargs, console_muted
from lychee_ray.inspector.routes import service_mounts
from lychee_ray.serve import MemoryService, create_app
from lychee_ray.names import LOCAL_EMBEDDING

log = logging.getLogger(__name__)

APP_NAME = "lychee-memory"
DEPLOYMENT_NAME = "LycheeMemory"
# A replica loads the embedding model before it is ready (~10-20 s on a small machine).
HEALTH_CHECK_TIMEOUT_S = 60
# Time a replica gets to finish its requests when it is stopped.
GRACEFUL_SHUTDOWN_TIMEOUT_S = 10
# How often the foreground server wakes up (only to notice Ctrl-C promptly).
_WAIT_TICK_S = 1.0


def apply_thread_limits(cfg: LycheeConfig) -> None:
    """One torch thread per replica by default: on a small machine, intra-op threads of concurrent
    requests fight for the cores, and a search waits for them."""
    n = cfg.serve.torch_threads or cfg.embedding.num_threads
    if n and cfg.embedding.backend == LOCAL_EMBEDDING:
        import torch

        torch.set_num_threads(n)


def apply_ray_env(cfg: LycheeConfig) -> dict[str, str]:
    """Put ``serve.ray_env`` into this process's environment (variables already set win) so that a
    local Ray started afterwards passes it to the Serve proxy and replicas; returns what applies."""
    for k, v in cfg.serve.ray_env.items():
        os.environ.setdefault(k, str(v))
    return {k: os.environ[k] for k in cfg.serve.ray_env}


@serve.deployment(name=DEPLOYMENT_NAME)
@serve.ingress()
class MemoryDeployment:
    """One replica: a :class:`MemoryService` over the store and its FastAPI app."""

    def __init__(self, memory: str, config: dict[str, Any]) -> None:
        cfg = LycheeConfig.model_validate(config)
        self.cfg = cfg
        apply_thread_limits(cfg)
        t0 = time.perf_counter()
        self.service = MemoryService(memory, cfg)
        self.service.warm()
        # two batches may be open at once (the second forms while the first embeds; the service's
        # coalescer merges them), so each holds at most half the replica's ongoing requests
        batcher: Any = self.embed_batch  # serve.batch's wrapper: its setters are missing from Ray's type of it
        batcher.set_max_batch_size(max(1, min(cfg.serve.batch_max_size, cfg.serve.max_ongoing_requests // 2)))
        batcher.set_batch_wait_timeout_s(cfg.serve.batch_wait_ms / 1000.0)
        self.service.use_batcher(self.embed_batch)
        log.info("replica ready in %.1f s: %s (%d conversations)", time.perf_counter() - t0, memory,
                 len(self.service.store.reader.markers))

    @serve.batch(max_batch_size=4, batch_wait_timeout_s=0.005, max_concurrent_batches=2)
    async def embed_batch(self, batch: list[list[str]]) -> list[np.ndarray]:
        """Query texts of concurrent requests → one embedding call (sizes set from config in __init__)."""
        return await self.service.embed_many(batch)

    def __serve_build_asgi_app__(self) -> Any:
        # the inspector's pages under /ui: the same keys and scopes as the API
        return create_app(self.service, service_mounts(self.service, self.cfg.inspect))


def replica_env(cfg: LycheeConfig) -> dict[str, str]:
    """``serve.ray_env`` for the replicas' ``runtime_env`` when Serve runs from a config file (no
    local Ray of ours to inherit it); variables set where the application is built win."""
    return {k: os.environ.get(k, v) for k, v in cfg.serve.ray_env.items()}


def serve_ongoing_requests(s: Any) -> int:
    """Serve's ``max_ongoing_requests`` for the ``serve`` section ``s``: more than the replica admits
    itself (``serve/admission.py``: ``max_ongoing_requests`` working + ``max_queued_requests``
    waiting) plus ``proxy_headroom``, so the replica, not Serve's proxy, answers overload (its JSON
    503 with Retry-After). An unbounded service queue leaves Serve the headroom beyond its slots."""
    return s.max_ongoing_requests + max(0, s.max_queued_requests) + s.proxy_headroom


def deployment_options(cfg: LycheeConfig, *, env_vars: dict[str, str] | None = None) -> dict[str, Any]:
    """``.options(...)`` of the deployment from the ``serve`` config section (``env_vars``: the
    replicas' ``runtime_env`` variables). A Serve config file's ``deployments:`` entry overrides
    each of these (its ``ray_actor_options`` replaces this one whole)."""
    s = cfg.serve
    actor: dict[str, Any] = {"num_cpus": s.replica_num_cpus}
    if env_vars:
        actor["runtime_env"] = {"env_vars": dict(env_vars)}
    opts: dict[str, Any] = {
        "max_ongoing_requests": serve_ongoing_requests(s),
        "max_queued_requests": s.proxy_max_queued_requests,
        "ray_actor_options": actor,
        "health_check_timeout_s": HEALTH_CHECK_TIMEOUT_S,
        "graceful_shutdown_timeout_s": GRACEFUL_SHUTDOWN_TIMEOUT_S,
        "logging_config": {"enable_access_log": s.access_log},
    }
    a = s.autoscaling
    if a.enabled:
        opts["autoscaling_config"] = {
            "min_replicas": a.min_replicas, "max_replicas": max(a.max_replicas, a.min_replicas),
            "initial_replicas": max(a.min_replicas, 1),
            "target_ongoing_requests": a.target_ongoing_requests,
            "upscale_delay_s": a.upscale_delay_s, "downscale_delay_s": a.downscale_delay_s,
        }
    else:
        opts["num_replicas"] = s.replicas
    return opts


def store_location(memory: str | Path) -> str:
    """The store location the replicas get, as a string: a remote URI (``s3://bucket/prefix``) as
    given, a local path (or ``file://`` URI) made absolute (replicas do not share our working directory)."""
    return root_string(memory)


def build_application(memory: str | Path, cfg: LycheeConfig, *, env_vars: dict[str, str] | None = None) -> Any:
    """The bound Serve application for ``memory`` (a local path or a store URI; not yet running);
    raises :class:`NotAStoreError` when nothing there is a store."""
    root = store_location(memory)
    if not StoreLayout(root, cfg.store).is_store():
        raise NotAStoreError(root)
    deployment: Any = MemoryDeployment  # @serve.deployment made it a Deployment (mypy ignores class decorators)
    return deployment.options(**deployment_options(cfg, env_vars=env_vars)).bind(root, cfg.model_dump(mode="json"))


def service_url(cfg: LycheeConfig) -> str:
    """The service's base URL for ``serve.host:serve.port`` (IPv6 hosts in brackets)."""
    host = cfg.serve.host
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{cfg.serve.port}"


def start_service(memory: str | Path, cfg: LycheeConfig, *, name: str = APP_NAME) -> str:
    """Start Serve's HTTP proxy on ``serve.host:serve.port`` and deploy the service; returns its URL
    once every replica is ready. Ray must be initialised (``ray.init``) by the caller."""
    s = cfg.serve
    serve.start(http_options={"host": s.host, "port": s.port, "request_timeout_s": s.request_timeout_s},
                logging_config={"enable_access_log": s.access_log})
    t0 = time.perf_counter()
    serve.run(build_application(memory, cfg), name=name, route_prefix="/", blocking=False)
    url = service_url(cfg)
    log.info("memory service %s ready at %s in %.1f s (docs: %s/docs)", name, url, time.perf_counter() - t0, url)
    return url


def stop_service(name: str = APP_NAME, *, shutdown_serve: bool = True) -> None:
    """Delete the application and (by default) shut Serve down (proxy and controller)."""
    try:
        serve.delete(name)
    except Exception as e:  # noqa: BLE001 — best effort on the way out
        log.debug("serve.delete(%s): %s", name, e)
    if shutdown_serve:
        serve.shutdown()


def serve_until_stopped(memory: str | Path, cfg: LycheeConfig, *, log_to_driver: bool,
                        on_ready: Callable[[str], None], on_stopping: Callable[[], None]) -> None:
    """Serve ``memory`` until Ctrl-C or SIGTERM (``lychee-ray serve``): join the cluster at
    ``RAY_ADDRESS`` or start a local Ray (with ``serve.ray_env``), deploy, call ``on_ready(url)``
    and wait. On the way out ``on_stopping()``, then the application is deleted; Serve and Ray are
    shut down only when this call started them. Without ``log_to_driver`` Ray and Serve stay off the
    console (:mod:`lychee_ray.ray.runtime`): the callbacks print what the user needs."""

    def on_term(signum: int, frame: Any) -> None:  # `kill` stops it as cleanly as Ctrl-C
        raise KeyboardInterrupt

    external = ray_address() is not None
    quiet = not log_to_driver
    # Ctrl-C even where SIGINT was inherited as ignored (e.g. started with `&` from a script)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    started_ray = False
    try:
        if not ray.is_initialized():
            kw = ray_init_kwargs(quiet)
            quiet_environment(quiet)
            if external:
                with console_muted(quiet):
                    ray.init(address=ray_address(), **kw)
            else:
                if cfg.ray.object_store_memory_mb:
                    kw["object_store_memory"] = cfg.ray.object_store_memory_mb * 1024 * 1024
                apply_ray_env(cfg)
                with console_muted(quiet):
                    ray.init(include_dashboard=False, **kw)
                started_ray = True
        if quiet:  # Serve's INFO lines ("Connecting to existing Serve app", ...) and our own ready line: on_ready says it
            logging.getLogger("ray.serve").setLevel(logging.WARNING)
            log.setLevel(logging.WARNING)
        signal.signal(signal.SIGTERM, on_term)  # after ray.init, which installs its own
        on_ready(start_service(memory, cfg))
        while True:
            time.sleep(_WAIT_TICK_S)
    except KeyboardInterrupt:
        on_stopping()
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a second Ctrl-C must not cut the shutdown short
        # quiet: Ray reports the controller it kills on the way out ("ServeController.graceful_shutdown
        # failed ... retried") on stdout; a clean stop has nothing to say (errors still raise)
        with console_muted(quiet):
            try:
                if ray.is_initialized():
                    stop_service(shutdown_serve=not external)
            finally:
                if started_ray:
                    ray.shutdown()
                signal.signal(signal.SIGINT, signal.default_int_handler)


__all__ = ["APP_NAME", "DEPLOYMENT_NAME", "MemoryDeployment", "apply_ray_env", "apply_thread_limits", "build_application",
           "deployment_options", "serve_ongoing_requests", "replica_env", "serve_until_stopped", "service_url", "start_service",
           "stop_service", "store_location"]
