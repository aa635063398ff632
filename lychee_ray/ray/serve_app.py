"""The query service as a Ray Serve *application builder*: deploy it from a Serve config file.

::

    serve run configs/serve.yaml                 # local Ray, foreground (Ctrl-C stops it)
    serve deploy configs/serve.yaml              # onto a running cluster (RAY_DASHBOARD_ADDRESS)
    serve run lychee_ray.ray.serve_app:build_app memory=/abs/store set=llm.backend=rules

A Serve config names ``import_path: lychee_ray.ray.serve_app:build_app`` and passes ``args``
(validated as :class:`ServeAppArgs`). The builder loads the lychee configuration (defaults < the
``config`` files < ``set`` overrides < environment, exactly as ``lychee-ray serve --config --set``),
checks the store, and binds the same :class:`~lychee_ray.ray.serve.MemoryDeployment` that
``lychee-ray serve`` runs. The ``serve`` config section supplies the deployment's defaults
(replicas or autoscaling, ``max_ongoing_requests``, ``max_queued_requests``, ``num_cpus``, the
replicas' ``serve.ray_env``); the Serve file's ``deployments:`` entry named ``LycheeMemory``
overrides any of them. Host and port are Serve's ``http_options``, not application arguments.

Serve runs the builder in a task on the cluster (with the application's ``runtime_env``), so
``memory`` and ``config`` must name places that node can read: a store URI, or absolute paths.
"""

# No ``from __future__ import annotations``: Serve reads the builder's parameter annotation as a
# class to validate the args with (a string annotation would hand the builder a plain dict).

import logging
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator

from lychee_ray.config import LycheeConfig, load_config
from lychee_ray.ray.serve import build_application, replica_env

log = logging.getLogger(__name__)


class ServeAppArgs(BaseModel):
    """``args`` of the application in a Serve config (or ``key=value`` after ``serve run IMPORT_PATH``)."""

    model_config = ConfigDict(extra="forbid")

    # The store: a local directory (absolute: the builder and replicas run in Ray workers) or a
    # pyarrow.fs URI such as s3://bucket/prefix. Kept a string so URIs pass through untouched.
    memory: str
    # lychee YAML config files merged over the defaults, in order (like --config; one string or a list).
    config: list[str] = Field(default_factory=list)
    # key=value overrides (like --set; one string or a list), applied after the files.
    set: list[str] = Field(default_factory=list)
    # Like `lychee-ray serve --replicas` (sets serve.replicas); a `deployments:` entry's num_replicas
    # or autoscaling_config still wins.
    replicas: int | None = Field(default=None, ge=1)

    @field_validator("config", "set", mode="before")
    @classmethod
    def _one_or_many(cls, v: Any) -> Any:
        """``serve run ... set=a.b=1`` passes one string; a config file may give a list."""
        if v is None:
            return []
        return [v] if isinstance(v, str) else v


def app_config(args: ServeAppArgs) -> LycheeConfig:
    """The effective lychee configuration for ``args`` (the environment of the builder task applies)."""
    sets = list(args.set)
    if args.replicas is not None:
        sets.append(f"serve.replicas={args.replicas}")
    return load_config(files=list(args.config), sets=sets)


def build_app(args: ServeAppArgs) -> Any:
    """Serve application builder: the bound memory service for ``args``. Raises
    :class:`~lychee_ray.io.store.NotAStoreError` (the deploy fails with it) when ``memory`` is no store."""
    if not isinstance(args, ServeAppArgs):  # called directly with a mapping
        args = ServeAppArgs.model_validate(args)
    cfg = app_config(args)
    log.info("building the memory service for %s", args.memory)
    return build_application(args.memory, cfg, env_vars=replica_env(cfg))


__all__ = ["ServeAppArgs", "app_config", "build_app"]
