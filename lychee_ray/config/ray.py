"""Ray runtime (``ray``): the build job's stages, the object store, progress and placement reports."""

from __future__ import annotations

from pydantic import Field

from lychee_ray.config.base import Section


class StageConfig(Section):
    """Resources of one stage of the build job (``ray.stages.<stage>``; docs/cluster.md).

    The stage functions are the same in-process (``--local`` uses ``batch_size`` only)."""

    # Logical CPUs per actor (per task for ``read``). Fractions: the stages of one node must fit its
    # CPUs together, or Ray Data waits for resources that never free up (2 cores: sum <= 2).
    num_cpus: float = Field(gt=0)
    # GPUs per actor: the embedding stages run the torch model on CUDA when > 0 (falling back to the
    # CPU model, with a warning, where no CUDA device is visible); other stages ignore it.
    num_gpus: float = Field(ge=0)
    # Actors of the stage (tasks in flight for ``read``); the pool grows to ``max_concurrency``
    # while its input queues up (0 = fixed at ``concurrency``).
    concurrency: int = Field(ge=1)
    max_concurrency: int = Field(ge=0)
    # Conversations per batch handed to one call of the stage (embedding stages embed the texts of
    # the whole batch in one model call: batches across conversations).
    batch_size: int = Field(ge=1)

    def pool(self) -> tuple[int, int]:
        """(min, max) actors."""
        return self.concurrency, max(self.concurrency, self.max_concurrency)


class BuildStagesConfig(Section):
    """The build job's stages, in order (lychee_ray/ingest/stages/)."""

    read: StageConfig  # input files → conversations (tasks)
    decide: StageConfig  # skip / increment / build, before any embedding
    embed_turns: StageConfig  # turn vectors
    build: StageConfig  # segment, encode (cluster-wide LLM limiter), nodes
    embed_memory: StageConfig  # record and node vectors
    commit: StageConfig  # one generation per conversation, under its write lock


class RayConfig(Section):
    """Ray runtime for the build job (local Ray unless RAY_ADDRESS points at a cluster)."""

    stages: BuildStagesConfig
    # Object store size for a local Ray started by the job (MiB); 0 = Ray's default.
    object_store_memory_mb: int = Field(ge=0)
    # Seconds between progress lines.
    progress_interval_s: float = Field(gt=0)
    # Honest ETAs (build and eval progress): none until this share of the total is done and this
    # many seconds have passed (the build's: since its first built conversation, from which its rate is measured).
    progress_eta_min_done_fraction: float = Field(ge=0, le=1)
    progress_eta_min_elapsed_s: float = Field(ge=0)
    # The run's placement report (manifest "ray_placement") names the node of at most this many
    # built conversations (per-node counts are always complete); keeps the manifest small.
    placement_report_max_conversations: int = Field(ge=0)
