"""Ray runtime (``ray``): builder actors, readers, the object store, progress and placement reports."""

from __future__ import annotations

from pydantic import Field

from lychee_ray.config.base import Section


class RayConfig(Section):
    """Ray runtime for the build job (local Ray unless RAY_ADDRESS points at a cluster)."""

    # Fractional CPUs per builder actor: on a 2-core machine whole-CPU actors starve the read tasks.
    actor_num_cpus: float = Field(gt=0)
    # CPUs per input-reading task (parsing is light; keep it small so readers never starve builders).
    reader_num_cpus: float = Field(gt=0)
    min_actors: int = Field(ge=1)
    max_actors: int = Field(ge=1)
    # Object store size for a local Ray started by the job (MiB); 0 = Ray's default.
    object_store_memory_mb: int = Field(ge=0)
    # Seconds between progress lines.
    progress_interval_s: float = Field(gt=0)
    # Honest ETAs (build and eval progress): none until this share of the total is done and this
    # many seconds have passed (the rate is measured from the first finished item).
    progress_eta_min_done_fraction: float = Field(ge=0, le=1)
    progress_eta_min_elapsed_s: float = Field(ge=0)
    # The run's placement report (manifest "ray_placement") names the node of at most this many
    # built conversations (per-node counts are always complete); keeps the manifest small.
    placement_report_max_conversations: int = Field(ge=0)
