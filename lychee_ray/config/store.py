"""Section for where a store lives when it is not on local disk (lychee_ray.io.store.fs)."""

from __future__ import annotations


from pydantic import Field, field_validator

from lychee_ray.config.base import Section
from lychee_ray.names import VectorPrecision


class StoreConfig(Section):
    # Local copies of FAISS index files read from a remote store (s3://, gs://, ...); None =
    # $LYCHEE_CACHE_DIR/store or ~/.cache/lychee_ray/store. Generations never change once written,
    # so a cached file is never stale.
    cache_dir: str | None = Field(default=None,
        description=(
            "local copies of FAISS files read from a remote store; null = $LYCHEE_CACHE_DIR/store or "
            "~/.cache/lychee_ray/store"))
    # Bound on the cache's bytes; least recently used files are removed beyond it (0 = keep only
    # the file just read: every other load downloads again).
    cache_max_bytes: int = Field(default=2147483648, ge=0,
        description=(
            "least recently used cached files are removed beyond this many bytes (0 = keep only the file just "
            "read)"))
    # Object stores have no flock: a writer's lock there is a lease object it renews; a lease not
    # renewed for this long belongs to a dead writer and may be taken over.
    lock_lease_s: float = Field(default=120.0, gt=0,
        description=(
            "object stores have no flock: a writer's lock is a lease object renewed every third of this; older = "
            "dead writer"))
    # Files no commit marker names (a crashed writer's) are removed by the sweep at the end of a build
    # once older than this; a writer committing right now is younger (io/store/gc.py).
    garbage_min_age_s: float = Field(default=3600.0, ge=0,
        description=(
            "unreferenced files (a crashed writer's) older than this are removed by the sweep at the end of each "
            "build"))
    # Object reads in parallel when a reader scans a remote store's commit markers (one GET each).
    io_threads: int = Field(default=16, ge=1,
        description="commit markers of a remote store read in parallel (one GET each; re-read only when changed)")
    # How often a waiting writer looks at a held lease again.
    lock_poll_s: float = Field(default=0.25, gt=0, description="seconds between looks at a held lease while waiting for it")
    # After writing its lease, a writer waits this long and reads it back before trusting it, so two
    # writers racing for a free lock see who won (last write wins on object stores).
    lock_settle_s: float = Field(default=0.2, ge=0,
        description="a writer reads its lease back after this long before trusting it (racing writers: last write wins)")
    # ... or this many times its own read-then-write time, if longer: a rival that saw the lease free
    # writes within about one such round trip, and under load round trips stretch (fixed waits lose).
    lock_settle_rtt_factor: float = Field(default=4.0, ge=0,
        description="... or after this many times its own read+write time when longer (round trips stretch under load)")
    # Read-backs (each after the settle wait) that must all show the writer's own lease before it
    # trusts it; a rival's late write lands in one of them and the writer backs off.
    lock_confirm_reads: int = Field(default=2, ge=1,
        description="read-backs, each after the settle wait, that must all show the writer's own lease")
    # A commit refused because the writer lost its lease (its renewals fell behind under load, or
    # it was taken over; nothing was published) takes the lock again and commits the same work this
    # many more times, when nothing else committed the conversation meanwhile (ingest/commit.py);
    # 0 = quarantine the conversation at the first refusal.
    commit_lease_retries: int = Field(default=2, ge=0,
        description=(
            "a build commit refused for a lost lease (starved writer; nothing published) retakes the lock and "
            "commits the same work this many more times if nothing else committed meanwhile"))
    # Precision of the stored vectors that only search reads (records, nodes, passages): fp32, fp16
    # or int8 (4x fewer bytes than fp32; io/store/index.py). Turn vectors stay fp32 (an incremental
    # build's segmenter resumes from them). Generations of any precision read alike.
    vector_precision: VectorPrecision = Field(default="int8",
        description=(
            "stored record, node and passage vectors (only search reads them): fp32 | fp16 (half the bytes) | "
            "int8 (a quarter; fixed range [-1, 1], scores move ~0.002; docs/build-cost.md); turn vectors stay "
            "fp32 (the segmenter resumes from them)"))
    # Retention per record type, in days (``{event: 365}``): ``lychee-ray forget --expired`` (and
    # ``MemoryStore.forget_records(expired=True)``) forgets records of that type (one of the record
    # types) whose ``created_at`` is older. Empty = keep every record; nothing runs by itself.
    retention_days: dict[str, int] = Field(default_factory=dict,
        description=("per record type, days a record is kept (e.g. {event: 365}); applied only by "
                     "`lychee-ray forget --expired` / forget_records(expired=True); {} = keep all"))

    @field_validator("retention_days")
    @classmethod
    def _positive_days(cls, v: dict[str, int]) -> dict[str, int]:
        bad = {t: d for t, d in v.items() if d < 1}
        if bad:
            raise ValueError(f"retention_days must be at least 1 day per type: {bad}")
        return v

