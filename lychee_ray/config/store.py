"""Section for where a store lives when it is not on local disk (lychee_ray.io.store.fs)."""

from __future__ import annotations


from pydantic import Field

from lychee_ray.config.base import Section
from lychee_ray.names import VectorPrecision


class StoreConfig(Section):
    # Local copies of FAISS index files read from a remote store (s3://, gs://, ...); None =
    # $LYCHEE_CACHE_DIR/store or ~/.cache/lychee_ray/store. Generations never change once written,
    # so a cached file is never stale.
    cache_dir: str | None
    # Bound on the cache's bytes; least recently used files are removed beyond it (0 = keep only
    # the file just read: every other load downloads again).
    cache_max_bytes: int = Field(ge=0)
    # Object stores have no flock: a writer's lock there is a lease object it renews; a lease not
    # renewed for this long belongs to a dead writer and may be taken over.
    lock_lease_s: float = Field(gt=0)
    # Files no commit marker names (a crashed writer's) are removed by the sweep at the end of a build
    # once older than this; a writer committing right now is younger (io/store/gc.py).
    garbage_min_age_s: float = Field(ge=0)
    # Object reads in parallel when a reader scans a remote store's commit markers (one GET each).
    io_threads: int = Field(ge=1)
    # How often a waiting writer looks at a held lease again.
    lock_poll_s: float = Field(gt=0)
    # After writing its lease, a writer waits this long and reads it back before trusting it, so two
    # writers racing for a free lock see who won (last write wins on object stores).
    lock_settle_s: float = Field(ge=0)
    # ... or this many times its own read-then-write time, if longer: a rival that saw the lease free
    # writes within about one such round trip, and under load round trips stretch (fixed waits lose).
    lock_settle_rtt_factor: float = Field(ge=0)
    # Read-backs (each after the settle wait) that must all show the writer's own lease before it
    # trusts it; a rival's late write lands in one of them and the writer backs off.
    lock_confirm_reads: int = Field(ge=1)
    # A commit refused because the writer lost its lease (its renewals fell behind under load, or
    # it was taken over; nothing was published) takes the lock again and commits the same work this
    # many more times, when nothing else committed the conversation meanwhile (ingest/commit.py);
    # 0 = quarantine the conversation at the first refusal.
    commit_lease_retries: int = Field(ge=0)
    # Precision of the stored vectors that only search reads (records, nodes, passages): fp32, fp16
    # or int8 (4x fewer bytes than fp32; io/store/index.py). Turn vectors stay fp32 (an incremental
    # build's segmenter resumes from them). Generations of any precision read alike.
    vector_precision: VectorPrecision
