"""Ray runtime (``ray``): the build job's stages, the object store, progress and placement reports."""

from __future__ import annotations

from pydantic import Field

from lychee_ray.config.base import Section


class StageConfig(Section):
    """Resources of one stage of the build job (``ray.stages.<stage>``; docs/cluster.md).

    The stage functions are the same in-process (``--local`` uses ``batch_size`` only)."""

    # Logical CPUs per actor (per task for ``read``). Fractions: the stages of one node must fit its
    # CPUs together, or Ray Data waits for resources that never free up (2 cores: sum <= 2).
    num_cpus: float = Field(gt=0, description="logical CPUs per task/actor (fractions: stages share a node)")
    # GPUs per actor: the embedding stages run the torch model on CUDA when > 0 (falling back to the
    # CPU model, with a warning, where no CUDA device is visible); other stages ignore it.
    num_gpus: float = Field(ge=0, description="GPUs per actor (embedding stages only: the torch model on CUDA)")
    # Actors of the stage (tasks in flight for ``read``); the pool grows to ``max_concurrency``
    # while its input queues up (0 = fixed at ``concurrency``).
    concurrency: int = Field(ge=1, description="actors (tasks in flight for read)")
    max_concurrency: int = Field(ge=0, description="the pool grows to this while input queues up; 0 = fixed")
    # Conversations per batch handed to one call of the stage (embedding stages embed the texts of
    # the whole batch in one model call: batches across conversations).
    batch_size: int = Field(ge=1, description="conversations per block")

    def pool(self) -> tuple[int, int]:
        """(min, max) actors."""
        return self.concurrency, max(self.concurrency, self.max_concurrency)


class BuildStagesConfig(Section):
    """The build job's stages, in order (lychee_ray/ingest/stages/)."""

    read: StageConfig = Field(default_factory=lambda: StageConfig(num_cpus=0.1, num_gpus=0, concurrency=2, max_concurrency=0, batch_size=4),
        description="input files -> conversations (Ray tasks)")
    decide: StageConfig = Field(
        default_factory=lambda: StageConfig(num_cpus=0.1, num_gpus=0, concurrency=1, max_concurrency=0, batch_size=4),
        description="skip / increment / build, from the commit marker, before any embedding")
    embed_turns: StageConfig = Field(
        default_factory=lambda: StageConfig(num_cpus=0.25, num_gpus=0, concurrency=1, max_concurrency=0, batch_size=1),
        description="turn vectors: the texts of a batch of conversations, embedding.progress_texts per model call")
    build: StageConfig = Field(
        default_factory=lambda: StageConfig(num_cpus=0.5, num_gpus=0, concurrency=1, max_concurrency=2, batch_size=1),
        description="segment, encode (one cluster-wide LLM limiter), nodes; build.conversations_in_flight per actor")
    embed_memory: StageConfig = Field(
        default_factory=lambda: StageConfig(num_cpus=0.25, num_gpus=0, concurrency=1, max_concurrency=0, batch_size=1),
        description="record and node vectors of a batch of conversations, embedding.progress_texts per model call")
    commit: StageConfig = Field(
        default_factory=lambda: StageConfig(num_cpus=0.1, num_gpus=0, concurrency=1, max_concurrency=0, batch_size=1),
        description="one generation per conversation under its write lock (re-checked against the decision)")


class RayConfig(Section):
    """Ray runtime for the build job (local Ray unless RAY_ADDRESS points at a cluster)."""

    stages: BuildStagesConfig = Field(default_factory=BuildStagesConfig,
        description=(
            "the build job, stage by stage (docs/cluster.md); the logical CPUs of one node's stages must fit its "
            "CPUs (2 cores: <= 2); a stage waits for batch_size conversations from the one before: the stages from "
            "embed turns on take one at a time, so a long conversation holds up no short one"))
    # Object store size for a local Ray started by the job (MiB); 0 = Ray's default.
    object_store_memory_mb: int = Field(default=512, ge=0, description="object store of a local Ray started by the job; 0 = Ray default")
    # Seconds between progress lines.
    progress_interval_s: float = Field(default=5.0, gt=0,
        description=(
            "seconds between progress lines off a terminal (the first line is shown at once, and a build's phase "
            "change; a terminal bar redraws every 0.5 s)"))
    # Honest ETAs (build and eval progress): none until this share of the total is done and this
    # many seconds have passed (a build's: per stage, since its first worked turn, from which its rate is measured).
    progress_eta_min_done_fraction: float = Field(default=0.1, ge=0, le=1,
        description="build/eval progress: no ETA before this share of the items (a build: of the turns, past a stage) is done")
    progress_eta_min_elapsed_s: float = Field(default=5.0, ge=0,
        description=(
            "... nor before this many seconds (a build: of a stage's work since its first worked turn, the rate's "
            "origin)"))
    # The run's placement report (manifest "ray_placement") names the node of at most this many
    # built conversations (per-node counts are always complete); keeps the manifest small.
    placement_report_max_conversations: int = Field(default=10000, ge=0,
        description="manifest \"ray_placement\": node id of at most this many built conversations per run")
