"""The in-process build runner (``lychee-ray build --local``, ``build_memory(local=True)``) and what
every build run ends with (errors table, compaction, garbage sweep, manifest).

The build runs the write path's steps as stages (decide → embed turns → construct → embed records
and nodes → commit: ingest/decide.py, ingest/stages/embedding.py, ingest/construct.py,
ingest/commit.py), the same functions the Ray job runs as Ray Data operators; here they are one
asyncio pipeline (:class:`~lychee_ray.ingest.local_stages.LocalStages`). Every input conversation
ends as exactly one :class:`~lychee_ray.ingest.outcomes.Outcome`: built, skipped, failed or duplicate.
The decide step needs only the build's fingerprint, which names the models without loading them: the
models are loaded when the first conversation needs building (a re-run of a built input loads none).

``Outcome`` and ``BuildSummary`` are re-exported from where they live; the build context's factory
is :func:`lychee_ray.ingest.context.make_context`.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from pathlib import Path
from typing import IO, Any
from collections.abc import Iterable

from lychee_ray.ingest.outcomes import (
    SUMMARY_MAX_IDS,
    BuildSummary,
    Outcome,
    input_warnings,
    item_to_row,
    row_to_item,
)
from lychee_ray.ingest.commit import Committer
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.decide import Decider
from lychee_ray.ingest.pipeline import BuildContext, planned_fingerprint
from lychee_ray.ingest.run_progress import LOADING_MODEL_NOTE, READING_NOTE, BuildProgress
from lychee_ray.ingest.local_stages import LazyContext, LocalStages
from lychee_ray.ingest.stages.turn_report import TurnSink, settle, stored_turns
from lychee_ray.ingest.stages.work import StageWork
from lychee_ray.config import LycheeConfig
from lychee_ray.io.adapters import AdapterItem, input_units, read_input
from lychee_ray.io.adapters.detect import count_conversations
from lychee_ray.io.store import StoreWriter, compact
from lychee_ray.io.store.gc import collect_garbage
from lychee_ray.io.store.migrate import migrate_if_needed
from lychee_ray.llm.backend import BACKEND_DESCRIPTIONS, resolve_backend
from lychee_ray.names import LLMBackend, Runner

log = logging.getLogger(__name__)


def manifest_info(cfg: LycheeConfig, backend: LLMBackend, summary: BuildSummary, runner: Runner) -> dict[str, Any]:
    """Run-level manifest fields (models, dims and fingerprints come from the commit markers)."""
    return {
        "backend_description": BACKEND_DESCRIPTIONS.get(backend, ""),
        "config": cfg.redacted(),
        "runner": runner,
        "last_run": summary.to_dict(),
    }


def finish_run(
    writer: StoreWriter, summary: BuildSummary, run_id: str, info: dict[str, Any], conversations_per_file: int
) -> None:
    """Errors table, claims released, Parquet parts compacted, crashed writers' garbage swept
    (io/store/gc.py), manifest written."""
    writer.write_errors(summary.errors + summary.warnings, run_id=run_id)
    writer.release_claims(run_id)
    if conversations_per_file > 0:
        compact(writer.layout, conversations_per_file)
    swept = collect_garbage(writer.layout)
    if swept.files_removed:
        log.info("removed %d unreferenced file(s) (%d bytes) left by crashed writers", swept.files_removed, swept.bytes_freed)
    writer.write_manifest(info)


def run_local_build(
    cfg: LycheeConfig,
    fmt: str,
    input_path: str | Path,
    out: str | Path,
    backend: LLMBackend | None = None,
    retry_failed: bool = False,
    ctx: BuildContext | None = None,
    on_conflict: str | None = None,
    progress: bool = False,
    progress_stream: IO[str] | None = None,
) -> BuildSummary:
    """Build (or resume) a store from input files in this process (see :func:`run_local_build_items`);
    ``progress``: show it (conversations in the input counted first, for the total)."""
    total = count_conversations(fmt, input_units(fmt, input_path)) if progress else None
    return run_local_build_items(cfg, read_input(fmt, input_path), out, backend=backend, retry_failed=retry_failed, ctx=ctx,
                                 on_conflict=on_conflict, progress=progress, total=total, progress_stream=progress_stream)


def local_stages(cfg: LycheeConfig, ctx: BuildContext | LazyContext, writer: StoreWriter, run_id: str,
                 retry_failed: bool = False, on_conflict: str | None = None, fingerprint: str | None = None,
                 report: TurnSink | None = None) -> LocalStages:
    """The stages of one in-process run over ``ctx`` (its embedders, encoder and ledger; a
    :class:`LazyContext` is made when first needed, and then ``fingerprint``, the build's, is
    required); ``report``: where the stages report the turns they pass."""
    st = cfg.ray.stages
    if isinstance(ctx, BuildContext):
        fingerprint, ctx = ctx.fingerprint, LazyContext.of(ctx)
    if fingerprint is None:
        raise ValueError("a context made later needs the build's fingerprint now")
    return LocalStages(
        decider=Decider(writer, run_id, fingerprint, cfg.segmenter.max_turn_chars, retry_failed,
                        on_conflict or cfg.build.on_conflict, cfg.passages),
        context=ctx, writer=writer, committer=Committer(writer), max_turn_chars=cfg.segmenter.max_turn_chars,
        turn_batch=st.embed_turns.batch_size, memory_batch=st.embed_memory.batch_size,
        commit_batch=st.commit.batch_size, in_flight=cfg.build.conversations_in_flight,
        rounds=cfg.build.decide_rounds, report=report, embed_chunk=cfg.embedding.progress_texts)


def run_local_build_items(
    cfg: LycheeConfig,
    items: Iterable[AdapterItem],
    out: str | Path,
    backend: LLMBackend | None = None,
    retry_failed: bool = False,
    ctx: BuildContext | None = None,
    on_conflict: str | None = None,
    progress: bool = False,
    total: int | None = None,
    progress_stream: IO[str] | None = None,
) -> BuildSummary:
    """Build (or resume) a store in this process from adapter items (read lazily, a few in flight).

    Every item is accounted for in the returned summary: built, skipped or failed. Conversations
    already stored gain their new turns (``appended``); ``on_conflict`` (default
    ``build.on_conflict``) decides about inputs that rewrite a stored history (docs/incremental.md).
    ``progress``: conversations and turns committed and turns past each stage, from the start
    (``total``: conversations in the input, when known), on ``progress_stream`` (stderr).
    Without ``ctx``, the models are loaded only once a conversation needs building.
    """
    t0 = time.perf_counter()
    backend = resolve_backend(cfg.llm, backend)
    prog = BuildProgress(total, cfg, stream=progress_stream) if progress else None
    if prog is not None:
        prog.start(READING_NOTE)
        prog.ticking()
    summary = BuildSummary()
    try:
        writer = StoreWriter(out, cfg.store)
        migrate_if_needed(writer.layout)  # a store written by an older version: to the current layout first
        run_id = f"local-{uuid.uuid4().hex[:8]}"

        def phase(loading: bool) -> None:
            if prog is not None:
                prog.note = LOADING_MODEL_NOTE if loading else ""
                prog.show(force=True)  # the phase changes now, not at the next interval

        made = ctx if ctx is not None else LazyContext(lambda: make_context(cfg, backend), phase)
        fingerprint = ctx.fingerprint if ctx is not None else planned_fingerprint(cfg, backend)
        stages = local_stages(cfg, made, writer, run_id, retry_failed, on_conflict, fingerprint,
                              report=prog.advanced if prog is not None else None)

        def decided(w: StageWork) -> None:
            if prog is not None:
                prog.decided(w.num_turns, stored_turns(w))

        def finished(w: StageWork, o: Outcome) -> None:
            summary.add(o)
            if prog is not None:
                prog.finished(o.status, w.num_turns, settle(w, o.status))

        asyncio.run(stages.run_rounds(items, finished, decided))
    finally:
        if prog is not None:
            prog.close()
    summary.wall_s = round(time.perf_counter() - t0, 3)
    finish_run(writer, summary, run_id, manifest_info(cfg, backend, summary, "local"), cfg.build.compact_conversations_per_file)
    return summary


__all__ = ["SUMMARY_MAX_IDS", "BuildSummary", "Outcome", "finish_run", "input_warnings", "item_to_row", "local_stages",
           "manifest_info", "row_to_item", "run_local_build", "run_local_build_items"]
