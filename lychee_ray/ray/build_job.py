"""The construction job on Ray Data, as stages: read → decide → embed turns → construct (the
``build`` stage) → embed records and nodes → commit (``ray.stages.*`` sizes each: CPUs, GPUs,
actors, batch), with one cluster-wide rate limiter actor for the LLM and one progress actor (each
stage reports the turns it passes; the driver polls it and shows them). Ray is
only the runner here: every stage calls the same library functions as the in-process runner (the
write path's steps, ``lychee_ray.ingest``); the actor shells are in
:mod:`lychee_ray.ray.build_stages`. Conversations another writer committed after their decision
come back from the commit stage and go through the stages again (``build.decide_rounds``).
"""

from __future__ import annotations

import json
import logging
import math
import sys
import time
import uuid
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterator

import ray

from lychee_ray.ingest.commit import contended_outcome
from lychee_ray.ingest.outcomes import BuildSummary, Outcome, item_to_row, row_to_item
from lychee_ray.ingest.run_progress import BuildProgress, ProgressCounts
from lychee_ray.ingest.pipeline import planned_fingerprint
from lychee_ray.ingest.runner import finish_run, manifest_info
from lychee_ray.config import LycheeConfig, StageConfig
from lychee_ray.io.adapters import AdapterItem, input_units, read_unit
from lychee_ray.io.adapters.base import is_uri
from lychee_ray.io.adapters.detect import count_conversations
from lychee_ray.io.store import StoreWriter
from lychee_ray.io.store.fs import root_string
from lychee_ray.io.store.migrate import migrate_if_needed
from lychee_ray.llm.backend import resolve_backend
from lychee_ray.ray.build_stages import (
    AGAIN_COLUMN,
    NODE_COLUMN,
    BuildStage,
    CommitStage,
    DecideStage,
    EmbedMemoryStage,
    EmbedTurnsStage,
    ProgressActor,
    batch_rows,
)
from lychee_ray.ray.ratelimit import RateLimiterActor
from lychee_ray.ray.runtime import init_ray
from lychee_ray.names import LLMBackend, OPENAI_BACKEND

log = logging.getLogger(__name__)

# Ray Data's block size target while the job's dataset runs: any row exceeds it, so every block is one row.
ONE_ROW_BLOCK_BYTES = 1


def read_unit_batches(batch: dict[str, Any], fmt: str, rows_per_batch: int) -> Iterator[dict[str, list[Any]]]:
    """Ray Data UDF: input units (a file, or a folder for a folder format: read whole by one task)
    → adapter item rows, streamed in small batches."""
    for row in batch_rows(batch):
        out: list[dict[str, Any]] = []
        for item in read_unit(fmt, row["path"]):
            out.append(item_to_row(item))
            if len(out) >= rows_per_batch:
                yield _item_columns(out)
                out = []
        if out:
            yield _item_columns(out)


def _item_columns(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {k: [r[k] for r in rows] for k in rows[0]}


class Placement:
    """Which Ray node processed each conversation of one run (``manifest.json`` → ``ray_placement``).

    Per node: outcomes by status; per built conversation: its node id, up to ``max_conversations``
    (``ray.placement_report_max_conversations``; the manifest stays small on huge runs); per stage:
    how many of its actors started on each node (where work went depends on which actor was free).
    """

    def __init__(self, run_id: str, max_conversations: int) -> None:
        self.run_id = run_id
        self.max_conversations = max_conversations
        self.nodes: dict[str, dict[str, int]] = {}
        self.built_on: dict[str, str] = {}
        self.truncated = False
        self.actors: dict[str, dict[str, int]] = {}

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
                "built_on_truncated": self.truncated, "actors": self.actors}


def estimate_total(fmt: str, units: list[str]) -> int:
    """Conversation count of the input units (JSONL lines, Parquet rows, JSON samples, folders): the progress total."""
    return count_conversations(fmt, units)


def limiter_detail(limiter: Any) -> Callable[[], str]:
    """The progress line's LLM part: calls in the last minute against the limit."""

    def detail() -> str:
        if limiter is None:
            return ""
        try:
            st = ray.get(limiter.stats.remote(), timeout=10)
        except (ray.exceptions.RayError, TimeoutError):  # the limiter died: its calls fail, the report must not
            return "calls/min ? (rate limiter unavailable)"
        return f"calls/min {st['calls_last_min']}/{st['limit_calls_per_min'] or '∞'}"

    return detail


# The stages' actor pools, in pipeline order, as the start-up line names them (ProgressActor.stage_ready).
STAGE_NAMES = {"decide": "decide", "embed_turns": "embed turns", "build": "build", "embed_memory": "embed memory",
               "commit": "commit"}


def startup_note(ready: list[str], counts: ProgressCounts) -> str:
    """What the job does while its stages start: which are still starting (the embedding stages load
    the model), then, until turns pass a stage, the conversations in the pipeline; then nothing (the
    stage counts say it)."""
    waiting = [name for stage, name in STAGE_NAMES.items() if stage not in ready]
    if waiting:
        return (f"starting the stages: {len(STAGE_NAMES) - len(waiting)}/{len(STAGE_NAMES)} ready, waiting for "
                f"{', '.join(waiting)}" + (" (loading the embedding model)" if any("embed" in w for w in waiting) else ""))
    if counts.moving or counts.done_total:
        return ""
    if not counts.seen:
        return "stages ready, reading the input"
    return f"stages ready, {counts.seen} conversation(s) in the pipeline"


def _map(ds: Any, cls: type, sc: StageConfig, kwargs: dict[str, Any], *, num_gpus: float = 0.0,
         tasks_in_flight: int | None = None) -> Any:
    """One stage as an actor-pool operator of ``sc``'s size."""
    lo, hi = sc.pool()
    pool = ray.data.ActorPoolStrategy(min_size=lo, max_size=hi, max_tasks_in_flight_per_actor=tasks_in_flight,
                                      max_concurrent_calls_per_actor=tasks_in_flight)
    return ds.map_batches(cls, batch_size=sc.batch_size, fn_constructor_kwargs=kwargs, compute=pool,
                          num_cpus=sc.num_cpus, num_gpus=num_gpus or None)


def _stages(ds: Any, cfg: LycheeConfig, cfg_json: str, out: str, run_id: str, fingerprint: str, backend: LLMBackend,
            retry_failed: bool, on_conflict: str | None, limiter: Any, counter: Any, first: bool) -> Any:
    """The write path's steps over ``ds`` (input rows) as stages: decide → embed turns → construct →
    embed records and nodes → commit, reporting to the progress actor ``counter`` (decisions and
    embedding devices in the ``first`` round only: a conversation decided again counts once)."""
    st = cfg.ray.stages
    once = counter if first else None
    ds = _map(ds, DecideStage, st.decide, {"cfg_json": cfg_json, "out": out, "run_id": run_id, "fingerprint": fingerprint,
                                           "retry_failed": retry_failed, "on_conflict": on_conflict, "progress": once})
    ds = _map(ds, EmbedTurnsStage, st.embed_turns,
              {"cfg_json": cfg_json, "num_gpus": st.embed_turns.num_gpus, "progress": once}, num_gpus=st.embed_turns.num_gpus)
    # an async actor keeps build.conversations_in_flight conversations going over a few batches
    build_tasks = math.ceil(cfg.build.conversations_in_flight / st.build.batch_size) + 1
    ds = _map(ds, BuildStage, st.build, {"cfg_json": cfg_json, "backend": backend, "out": out, "limiter": limiter,
                                         "progress": once}, tasks_in_flight=build_tasks)
    ds = _map(ds, EmbedMemoryStage, st.embed_memory,
              {"cfg_json": cfg_json, "num_gpus": st.embed_memory.num_gpus, "progress": once},
              num_gpus=st.embed_memory.num_gpus)
    return _map(ds, CommitStage, st.commit, {"cfg_json": cfg_json, "out": out, "progress": counter})


def run_ray_build(
    cfg: LycheeConfig,
    fmt: str,
    input_path: str | Path,
    out: str | Path,
    backend: LLMBackend | None = None,
    retry_failed: bool = False,
    progress: bool = True,
    items: list[AdapterItem] | None = None,
    on_conflict: str | None = None,
) -> BuildSummary:
    """Build (or resume) a store with Ray Data; every input conversation is accounted for.

    Input: the units of ``fmt`` at ``input_path`` — files, or folders for a folder format, one
    dataset row each (read by Ray tasks, so they may live on object storage) — or ``items``
    (conversations already in the driver, e.g. Python objects; ``fmt`` and ``input_path`` are then
    ignored and the items travel as Ray Data rows). Stored conversations gain
    their new turns; ``on_conflict`` (default ``build.on_conflict``) decides about rewritten histories.
    """
    t0 = time.perf_counter()
    backend = resolve_backend(cfg.llm, backend)
    files = input_units(fmt, input_path) if items is None else []
    total = estimate_total(fmt, files) if items is None else len(items)
    prog = BuildProgress(total, cfg, stream=sys.stderr) if progress else None
    if prog is not None:
        prog.start("starting Ray")
    try:
        summary = _run(cfg, fmt, files, out, backend, retry_failed, items, on_conflict, prog, t0)
    finally:
        if prog is not None:
            prog.close()
    return summary


def _run(cfg: LycheeConfig, fmt: str, files: list[str], out: str | Path, backend: LLMBackend, retry_failed: bool,
         items: list[AdapterItem] | None, on_conflict: str | None, prog: BuildProgress | None, t0: float) -> BuildSummary:
    init_ray(cfg)
    out = root_string(out)  # an absolute path or a URI: workers may run on other nodes
    writer = StoreWriter(out, cfg.store)
    migrate_if_needed(writer.layout)  # a store written by an older version: to the current layout first
    run_id = f"ray-{uuid.uuid4().hex[:8]}"
    limiter = None
    if backend == OPENAI_BACKEND:
        limiter = RateLimiterActor.options(  # type: ignore[attr-defined]  # @ray.remote: an ActorClass
            name=f"lychee-limiter-{run_id}").remote(cfg.llm.rate_limit.model_dump())
    counter = ProgressActor.options(name=f"lychee-progress-{run_id}").remote()  # type: ignore[attr-defined]  # @ray.remote: an ActorClass
    if prog is not None:
        prog.note = startup_note([], ProgressCounts())
        prog.detail = limiter_detail(limiter)

        starting = [True]  # until every stage is ready (then the note depends on the counts only)

        def poll() -> None:
            counts = ProgressCounts.from_dict(ray.get(counter.snapshot.remote(), timeout=10))
            ready = list(STAGE_NAMES)
            if starting[0]:
                ready = ray.get(counter.ready_stages.remote(), timeout=10)
                starting[0] = len(set(ready) & set(STAGE_NAMES)) < len(STAGE_NAMES)
            prog.note = startup_note(ready, counts)
            prog.replace(counts)

        prog.ticking(poll)
    rc, st = cfg.ray, cfg.ray.stages
    # One conversation per block: Ray Data merges a task's outputs into blocks of up to
    # target_max_block_size bytes, and a stage then waits for whole blocks, so a batch of four
    # committed together would wait for the slowest; with one-row blocks each stage's batch_size
    # alone groups conversations (and outcomes stream back as they commit). Restored after the run.
    data_ctx = ray.data.DataContext.get_current()
    block_bytes, data_ctx.target_max_block_size = data_ctx.target_max_block_size, ONE_ROW_BLOCK_BYTES
    fingerprint = planned_fingerprint(cfg, backend)
    paths = [f if is_uri(f) else str(Path(f).resolve()) for f in files]  # workers may run elsewhere
    if items is None:
        ds: ray.data.Dataset = ray.data.from_items([{"path": p} for p in paths], override_num_blocks=max(1, len(files)))
        ds = ds.map_batches(read_unit_batches, batch_size=1,  # type: ignore[arg-type]  # fn_kwargs supply the other arguments
                            fn_kwargs={"fmt": fmt, "rows_per_batch": st.read.batch_size}, num_cpus=st.read.num_cpus,
                            compute=ray.data.TaskPoolStrategy(size=max(1, min(st.read.concurrency, len(files)))))
    else:  # blocks of read.batch_size rows, as the reader yields them
        ds = ray.data.from_items([item_to_row(i) for i in items],
                                 override_num_blocks=max(1, math.ceil(len(items) / st.read.batch_size)))
    # (no repartition: its tasks ask a whole CPU, which the stages' actors leave no room for on small nodes)
    cfg_json = cfg.model_dump_json()
    summary = BuildSummary()
    placement = Placement(run_id, rc.placement_report_max_conversations)
    try:
        for decision in range(1, cfg.build.decide_rounds + 1):
            again: list[dict[str, Any]] = []
            stages = _stages(ds, cfg, cfg_json, out, run_id, fingerprint, backend, retry_failed, on_conflict, limiter,
                             counter, first=decision == 1)
            for row in stages.iter_rows():
                row = dict(row)
                node = row.pop(NODE_COLUMN, None)
                item_row = row.pop(AGAIN_COLUMN, "")
                if item_row:  # committed by another writer after its decision: decided again
                    again.append(json.loads(item_row))
                    continue
                o = Outcome.from_row(row)
                summary.add(o)
                placement.add(node, o)
            if not again:
                break
            log.info("%d conversation(s) were committed by another writer after their decision; deciding them again",
                     len(again))
            ds = ray.data.from_items(again, override_num_blocks=max(1, math.ceil(len(again) / st.read.batch_size)))
        for r in again:  # committed by another writer after each of their decisions
            item = row_to_item(r)
            o = contended_outcome(item, cfg.build.decide_rounds)
            summary.add(o)
            placement.add(None, o)
            counter.finished.remote([(o.status, item.conversation.num_turns if item.conversation else 0, None)])
        if prog is not None:
            prog.stop_ticking()
            poll()
        devices = ray.get(counter.embedding_devices.remote(), timeout=30)
        placement.actors = ray.get(counter.actor_nodes.remote(), timeout=30)
    except BaseException:
        # e.g. a stage actor killed for good (ray.kill): the job fails. What was committed stays
        # committed; a re-run resumes. The claims of this run are dropped, the limiter released.
        log.error("build run %s failed after %d outcomes; re-run to resume (committed conversations are kept)",
                  run_id, summary.inputs)
        writer.release_claims(run_id)
        raise
    finally:
        data_ctx.target_max_block_size = block_bytes
        if prog is not None:
            prog.stop_ticking()
        for actor in (limiter, counter):
            if actor is not None:
                ray.kill(actor)
    summary.wall_s = round(time.perf_counter() - t0, 3)
    info = {**manifest_info(cfg, backend, summary, "ray"), "ray_placement": placement.to_dict(),
            "embedding_devices": devices}
    finish_run(writer, summary, run_id, info, cfg.build.compact_conversations_per_file)
    return summary
