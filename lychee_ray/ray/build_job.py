"""The construction job on Ray Data: read → ConversationBuilder actors → commit, with one
cluster-wide rate limiter actor. Ray is only the runner here: every step calls the same library
code as the in-process runner (:class:`~lychee_ray.build.runner.ConversationProcessor`).
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

from lychee_ray.io.adapters import AdapterItem, input_files, read_input
from lychee_ray.io.adapters.base import is_uri
from lychee_ray.io.adapters.detect import count_conversations
from lychee_ray.config import LycheeConfig
from lychee_ray.llm.backend import resolve_backend
from lychee_ray.progress import EtaPolicy, ProgressDisplay
from lychee_ray.ray.ratelimit import RateLimiterActor, RayRateLimiter
from lychee_ray.ray.runtime import init_ray
from lychee_ray.build.runner import (
    BuildSummary,
    ConversationProcessor,
    Outcome,
    finish_run,
    item_to_row,
    make_context,
    manifest_info,
    row_to_item,
)
from lychee_ray.io.store import MemoryStoreWriter
from lychee_ray.io.store.migrate import migrate_if_needed
from lychee_ray.io.store.fs import root_string

log = logging.getLogger(__name__)


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


# Column the builder actors add to each outcome row: the Ray node id that processed it.
NODE_COLUMN = "ray_node_id"


class Placement:
    """Which Ray node processed each conversation of one run (``manifest.json`` → ``ray_placement``).

    Per node: outcomes by status; per built conversation: its node id, up to ``max_conversations``
    (``ray.placement_report_max_conversations``; the manifest stays small on huge runs).
    """

    def __init__(self, run_id: str, max_conversations: int) -> None:
        self.run_id = run_id
        self.max_conversations = max_conversations
        self.nodes: dict[str, dict[str, int]] = {}
        self.built_on: dict[str, str] = {}
        self.truncated = False

    def add(self, node: str | None, o: Outcome) -> None:
        node = node or "?"
        per = self.nodes.setdefault(node, {"built": 0, "skipped": 0, "failed": 0})
        per[o.status] = per.get(o.status, 0) + 1
        if o.status == "built" and o.conversation_id is not None:
            if len(self.built_on) < self.max_conversations:
                self.built_on[o.conversation_id] = node
            else:
                self.truncated = True

    def to_dict(self) -> dict[str, Any]:
        return {"run_id": self.run_id, "nodes": self.nodes, "built_on": self.built_on,
                "built_on_truncated": self.truncated}


class ConversationBuilder:
    """Ray Data actor: loads the embedder once, keeps many conversations in flight (asyncio)."""

    def __init__(self, cfg_json: str, backend: str, out: str, run_id: str, retry_failed: bool, limiter: Any,
                 on_conflict: str | None = None) -> None:
        from lychee_ray.logs import configure_logging

        configure_logging()
        cfg = LycheeConfig.model_validate_json(cfg_json)
        ctx = make_context(cfg, backend, limiter=RayRateLimiter(limiter) if limiter is not None else None)
        self.processor = ConversationProcessor(ctx, MemoryStoreWriter(out, cfg.store), run_id, retry_failed, on_conflict)
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

        rows = list(await asyncio.gather(*(one(r) for r in _rows(batch))))
        # which node built each conversation: the run's placement report (manifest "ray_placement")
        node = ray.get_runtime_context().get_node_id()
        for r in rows:
            r[NODE_COLUMN] = node
        return _columns(rows) if rows else {**_columns(rows), NODE_COLUMN: []}


def estimate_total(fmt: str, files: list[str]) -> int:
    """Conversation count of the input files (JSONL lines, Parquet rows, JSON samples): the progress total."""
    return count_conversations(fmt, files)


class Progress:
    """Progress of the job: one bar (terminal) or periodic line with done/total, segments, LLM calls,
    tokens, calls/min vs the limit, and an ETA once enough is done (``ray.progress_eta_*``)."""

    def __init__(self, total: int | None, cfg: LycheeConfig, limiter: Any, stream=None) -> None:
        rc = cfg.ray
        self.display = ProgressDisplay(
            "build", total, "conversations", interval_s=rc.progress_interval_s, stream=stream or sys.stderr,
            eta=EtaPolicy(rc.progress_eta_min_done_fraction, rc.progress_eta_min_elapsed_s))
        self.limiter = limiter
        self.segments = 0

    def _detail(self, summary: BuildSummary) -> str:
        cpm = ""
        if self.limiter is not None:
            try:
                st = ray.get(self.limiter.stats.remote(), timeout=10)
                lim = st["limit_calls_per_min"] or "∞"
                cpm = f" calls/min {st['calls_last_min']}/{lim}"
            except (ray.exceptions.RayError, TimeoutError):  # the limiter died: its calls fail, the report must not
                cpm = " calls/min ? (rate limiter unavailable)"
        return (f"(built {summary.built}, skipped {summary.skipped}, failed {summary.failed}) segments {self.segments} "
                f"LLM calls {summary.llm_calls} tokens {summary.prompt_tokens + summary.completion_tokens}{cpm}")

    def update(self, summary: BuildSummary, o: Outcome) -> None:
        self.segments += o.counts.get("segments", 0) if o.status == "built" else 0
        self.display.update(summary.inputs, lambda: self._detail(summary))  # detail only when shown

    def close(self, summary: BuildSummary) -> None:
        self.display.close(self._detail(summary))


def run_ray_build(
    cfg: LycheeConfig,
    fmt: str,
    input_path: str | Path,
    out: str | Path,
    backend: str | None = None,
    retry_failed: bool = False,
    progress: bool = True,
    items: list[AdapterItem] | None = None,
    on_conflict: str | None = None,
) -> BuildSummary:
    """Build (or resume) a store with Ray Data; every input conversation is accounted for.

    Input: the files of ``fmt`` at ``input_path`` (read by Ray tasks, so they may live on object
    storage), or ``items`` (conversations already in the driver, e.g. Python objects; ``fmt`` and
    ``input_path`` are then ignored and the items travel as Ray Data rows). Stored conversations gain
    their new turns; ``on_conflict`` (default ``build.on_conflict``) decides about rewritten histories.
    """
    t0 = time.perf_counter()
    backend = resolve_backend(cfg.llm, backend)
    init_ray(cfg)
    out = root_string(out)  # an absolute path or a URI: workers may run on other nodes
    writer = MemoryStoreWriter(out, cfg.store)
    migrate_if_needed(writer.layout)  # a store written by an older version: to the current layout first
    run_id = f"ray-{uuid.uuid4().hex[:8]}"
    files = input_files(fmt, input_path) if items is None else []
    limiter = None
    if backend == "openai":
        limiter = RateLimiterActor.options(name=f"lychee-limiter-{run_id}").remote(cfg.llm.rate_limit.model_dump())
    rc = cfg.ray
    paths = [f if is_uri(f) else str(Path(f).resolve()) for f in files]  # workers may run elsewhere
    # Small blocks of conversations: each actor task takes one, and an actor overlaps a few tasks
    # (its semaphore caps conversations in flight), so actors stay busy and outcomes stream back.
    rows_per_block = max(1, cfg.build.conversations_in_flight // 2)
    if items is None:
        ds = ray.data.from_items([{"path": p} for p in paths], override_num_blocks=max(1, len(files)))
        ds = ds.map_batches(read_file_batches, batch_size=1, fn_kwargs={"fmt": fmt, "rows_per_batch": rows_per_block},
                            num_cpus=rc.reader_num_cpus)
    else:
        ds = ray.data.from_items([item_to_row(i) for i in items])
    ds = ds.repartition(target_num_rows_per_block=rows_per_block)
    ds = ds.map_batches(
        ConversationBuilder,
        batch_size=rows_per_block,
        fn_constructor_kwargs={"cfg_json": cfg.model_dump_json(), "backend": backend, "out": out, "run_id": run_id,
                               "retry_failed": retry_failed, "limiter": limiter, "on_conflict": on_conflict},
        compute=ray.data.ActorPoolStrategy(min_size=rc.min_actors, max_size=max(rc.min_actors, rc.max_actors)),
        num_cpus=rc.actor_num_cpus,
    )
    summary = BuildSummary()
    placement = Placement(run_id, rc.placement_report_max_conversations)
    try:
        total = estimate_total(fmt, files) if items is None else len(items)
        prog = Progress(total, cfg, limiter) if progress else None
        for row in ds.iter_rows():
            row = dict(row)
            node = row.pop(NODE_COLUMN, None)
            o = Outcome.from_row(row)
            summary.add(o)
            placement.add(node, o)
            if prog:
                prog.update(summary, o)
        if prog:
            prog.close(summary)
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
    info = {**manifest_info(cfg, backend, summary, "ray"), "ray_placement": placement.to_dict()}
    finish_run(writer, summary, run_id, info, cfg.build.compact_conversations_per_file)
    return summary

