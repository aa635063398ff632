"""The construction job on Ray Data: read → ConversationBuilder actors → commit, with one
cluster-wide rate limiter actor. Ray is only the runner here: every step calls the same library
code as the in-process runner (:class:`~lychee_ray.runner.ConversationProcessor`).
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
import uuid
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import ray

from .adapters import input_files, read_input
from .adapters.base import is_uri, open_input
from .config import LycheeConfig, RateLimitConfig, ray_address
from .llm.backend import resolve_backend
from .llm.ratelimit import RateLimitState, WaitingRateLimiter
from .runner import (
    BuildSummary,
    ConversationProcessor,
    Outcome,
    finish_run,
    item_to_row,
    make_context,
    manifest_info,
    row_to_item,
)
from .store import MemoryStoreWriter

log = logging.getLogger(__name__)


def init_ray(cfg: LycheeConfig) -> None:
    """Connect to ``RAY_ADDRESS`` or start a small local Ray (no dashboard, bounded object store)."""
    if ray.is_initialized():
        return
    addr = ray_address()
    kw: dict[str, Any] = {"ignore_reinit_error": True, "log_to_driver": True}
    if addr:
        ray.init(address=addr, **kw)
        return
    if cfg.ray.object_store_memory_mb:
        kw["object_store_memory"] = cfg.ray.object_store_memory_mb * 1024 * 1024
    ray.init(include_dashboard=False, **kw)


@ray.remote(num_cpus=0)
class RateLimiterActor:
    """Hosts the one :class:`RateLimitState` every LLM call of the job goes through."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.cfg = RateLimitConfig.model_validate(cfg)
        self.state = RateLimitState(self.cfg, now=time.monotonic())
        self.grants: list[float] = []  # grant times, for calls/min reporting
        self.pauses = 0

    def try_acquire(self, tokens: int, key: str) -> float:
        now = time.monotonic()
        wait = self.state.try_acquire(now, tokens, key)
        if wait <= 0:
            self.grants.append(now)
        return wait

    def reconcile(self, key: str, reserved: int, actual: int) -> int:
        return self.state.reconcile(time.monotonic(), key, reserved, actual)

    def pause(self, seconds: float) -> float:
        self.pauses += 1
        return self.state.pause(time.monotonic(), seconds)

    def stats(self) -> dict[str, Any]:
        now = time.monotonic()
        last_min = sum(1 for t in self.grants if now - t <= 60.0)
        return {"granted": len(self.grants), "calls_last_min": last_min, "pauses": self.pauses,
                "limit_calls_per_min": self.cfg.requests_per_min}


class RayRateLimiter(WaitingRateLimiter):
    """The client-side face of :class:`RateLimiterActor` (same protocol as the local limiter)."""

    def __init__(self, actor: Any) -> None:
        super().__init__()
        self.actor = actor
        self._prefix = uuid.uuid4().hex[:8]  # reservation keys must be unique across processes

    async def _try_acquire(self, tokens: int, key: str) -> float:
        return await self.actor.try_acquire.remote(tokens, f"{self._prefix}-{key}")

    async def _reconcile(self, key: str, reserved: int, actual: int) -> int:
        return await self.actor.reconcile.remote(f"{self._prefix}-{key}", reserved, actual)

    async def _pause(self, seconds: float) -> None:
        await self.actor.pause.remote(seconds)


def _rows(batch: dict[str, Any]) -> list[dict[str, Any]]:
    keys = list(batch)
    n = len(batch[keys[0]]) if keys else 0
    return [{k: _py(batch[k][i]) for k in keys} for i in range(n)]


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


def _columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    keys = rows[0].keys() if rows else Outcome("failed").to_row().keys()
    return {k: [r[k] for r in rows] for k in keys}


def read_file_batches(batch: dict[str, Any], fmt: str, rows_per_batch: int) -> Iterator[dict[str, list[Any]]]:
    """Ray Data UDF: input file paths → adapter item rows, streamed in small batches."""
    for row in _rows(batch):
        out: list[dict[str, Any]] = []
        for item in read_input(fmt, row["path"]):
            out.append(item_to_row(item))
            if len(out) >= rows_per_batch:
                yield _columns(out)
                out = []
        if out:
            yield _columns(out)


class ConversationBuilder:
    """Ray Data actor: loads the embedder once, keeps many conversations in flight (asyncio)."""

    def __init__(self, cfg_json: str, backend: str, out: str, run_id: str, retry_failed: bool, limiter: Any) -> None:
        from .cli import configure_logging

        configure_logging()
        cfg = LycheeConfig.model_validate_json(cfg_json)
        ctx = make_context(cfg, backend, limiter=RayRateLimiter(limiter) if limiter is not None else None)
        self.processor = ConversationProcessor(ctx, MemoryStoreWriter(out), run_id, retry_failed)
        self.in_flight = cfg.build.conversations_in_flight
        self._sem: asyncio.Semaphore | None = None

    async def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        if self._sem is None:  # created on Ray's event loop, not in __init__
            self._sem = asyncio.Semaphore(self.in_flight)

        async def one(row: dict[str, Any]) -> dict[str, Any]:
            async with self._sem:
                try:
                    item = row_to_item(row)
                except Exception as e:  # noqa: BLE001 — a row that cannot even be decoded is quarantined
                    return Outcome("failed", None, "input", f"undecodable row: {e}", row.get("file"), row.get("line")).to_row()
                return (await self.processor.process(item)).to_row()

        return _columns(list(await asyncio.gather(*(one(r) for r in _rows(batch)))))


def estimate_total(fmt: str, files: list[str]) -> int | None:
    """Conversation count when it is cheap to know (JSONL lines, Parquet row counts)."""
    if fmt == "jsonl":
        n = 0
        for f in files:
            with open_input(f) as fh:
                n += sum(1 for line in fh if line.strip())
        return n
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return sum(pq.ParquetFile(open_input(f)).metadata.num_rows for f in files)
    return None  # dataset JSON files would have to be parsed in the driver to count them


class Progress:
    """Periodic progress line: done/total, segments, LLM calls, tokens, calls/min vs limit, ETA."""

    def __init__(self, total: int | None, interval_s: float, limiter: Any, stream=sys.stderr) -> None:
        self.total, self.interval_s, self.limiter, self.stream = total, interval_s, limiter, stream
        self.t0 = self.last = time.perf_counter()
        self.segments = 0

    def update(self, summary: BuildSummary, o: Outcome, force: bool = False) -> None:
        self.segments += o.counts.get("segments", 0) if o.status == "built" else 0
        now = time.perf_counter()
        if not force and now - self.last < self.interval_s:
            return
        self.last = now
        done = summary.inputs
        el = now - self.t0
        rate = done / el if el > 0 else 0.0
        eta = f"{(self.total - done) / rate:.0f}s" if self.total and rate > 0 else "?"
        cpm = ""
        if self.limiter is not None:
            try:
                st = ray.get(self.limiter.stats.remote(), timeout=10)
                lim = st["limit_calls_per_min"] or "∞"
                cpm = f" calls/min {st['calls_last_min']}/{lim}"
            except (ray.exceptions.RayError, TimeoutError):  # the limiter died: its calls fail, the report must not
                cpm = " calls/min ? (rate limiter unavailable)"
        print(
            f"[build] {done}/{self.total or '?'} conversations (built {summary.built}, skipped {summary.skipped}, "
            f"failed {summary.failed}) segments {self.segments} LLM calls {summary.llm_calls} tokens "
            f"{summary.prompt_tokens + summary.completion_tokens}{cpm} elapsed {el:.0f}s ETA {eta}",
            file=self.stream, flush=True,
        )


def run_ray_build(
    cfg: LycheeConfig,
    fmt: str,
    input_path: str | Path,
    out: str | Path,
    backend: str | None = None,
    retry_failed: bool = False,
    progress: bool = True,
) -> BuildSummary:
    """Build (or resume) a store with Ray Data; every input conversation is accounted for."""
    t0 = time.perf_counter()
    backend = resolve_backend(cfg.llm, backend)
    init_ray(cfg)
    out = Path(out).resolve()
    writer = MemoryStoreWriter(out)
    run_id = f"ray-{uuid.uuid4().hex[:8]}"
    files = input_files(fmt, input_path)
    limiter = None
    if backend == "openai":
        limiter = RateLimiterActor.options(name=f"lychee-limiter-{run_id}").remote(cfg.llm.rate_limit.model_dump())
    rc = cfg.ray
    paths = [f if is_uri(f) else str(Path(f).resolve()) for f in files]  # workers may run elsewhere
    ds = ray.data.from_items([{"path": p} for p in paths], override_num_blocks=max(1, len(files)))
    # Small blocks of conversations: each actor task takes one, and an actor overlaps a few tasks
    # (its semaphore caps conversations in flight), so actors stay busy and outcomes stream back.
    rows_per_block = max(1, cfg.build.conversations_in_flight // 2)
    ds = ds.map_batches(read_file_batches, batch_size=1, fn_kwargs={"fmt": fmt, "rows_per_batch": rows_per_block},
                        num_cpus=rc.reader_num_cpus)
    ds = ds.repartition(target_num_rows_per_block=rows_per_block)
    ds = ds.map_batches(
        ConversationBuilder,
        batch_size=rows_per_block,
        fn_constructor_kwargs={"cfg_json": cfg.model_dump_json(), "backend": backend, "out": str(out), "run_id": run_id,
                               "retry_failed": retry_failed, "limiter": limiter},
        compute=ray.data.ActorPoolStrategy(min_size=rc.min_actors, max_size=max(rc.min_actors, rc.max_actors)),
        num_cpus=rc.actor_num_cpus,
    )
    summary = BuildSummary()
    try:
        prog = Progress(estimate_total(fmt, files), rc.progress_interval_s, limiter) if progress else None
        for row in ds.iter_rows():
            o = Outcome.from_row(row)
            summary.add(o)
            if prog:
                prog.update(summary, o)
        if prog and summary.inputs:
            prog.update(summary, Outcome("skipped"), force=True)
    except BaseException:
        # e.g. a builder actor killed for good (ray.kill): the job fails. What was committed stays
        # committed; a re-run resumes. The claims of this run are dropped, the limiter released.
        log.error("build run %s failed after %d outcomes; re-run to resume (committed conversations are kept)",
                  run_id, summary.inputs)
        writer.release_claims(run_id)
        raise
    finally:
        if limiter is not None:
            ray.kill(limiter)
    summary.wall_s = round(time.perf_counter() - t0, 3)
    finish_run(writer, summary, run_id, manifest_info(cfg, backend, summary, "ray"), cfg.build.compact_conversations_per_file)
    return summary

