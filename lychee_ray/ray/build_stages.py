"""The build job's stages as Ray Data operators: one actor class per stage, each a thin shell
around the write path's steps (``lychee_ray.ingest.decide``, ``.construct``, ``.commit`` and the
embedding stages of ``lychee_ray.ingest.stages``: the same ones ``--local`` runs), plus the job's
progress counter actor, to which every stage reports the turns it passes as it passes them (the
construct stage segment by segment: ingest/stages/turn_report.py) with fire-and-forget calls. Work
travels between them as one pickled column per conversation
(:class:`~lychee_ray.ingest.stages.work.StageWork`).
"""

from __future__ import annotations

import asyncio
import json
from typing import Any
from collections.abc import Sequence

import numpy as np
import ray

from lychee_ray.ingest.commit import Committer
from lychee_ray.ingest.construct import Constructor
from lychee_ray.ingest.decide import Decider
from lychee_ray.ingest.encode.factory import make_encoder
from lychee_ray.ingest.outcomes import OUTCOME_COLUMNS, Outcome, item_to_row, row_to_item
from lychee_ray.ingest.pipeline import BuildContext
from lychee_ray.ingest.run_progress import ProgressCounts
from lychee_ray.ingest.stages.embedding import embed_memory, embed_turns
from lychee_ray.ingest.stages.turn_report import StageTurns, TurnSink, chunk_reporter, complete, settle, stored_turns
from lychee_ray.ingest.stages.work import WORK_COLUMN, StageWork, from_row, works_to_columns
from lychee_ray.config import LycheeConfig
from lychee_ray.embed import get_embedder
from lychee_ray.embed.base import embedder_name
from lychee_ray.embed.device import stage_embedding_config
from lychee_ray.embed.memo import with_memo
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store import StoreWriter
from lychee_ray.logs import configure_logging
from lychee_ray.ray.ratelimit import RayRateLimiter
from lychee_ray.names import EMBED_MEMORY_STAGE, EMBED_TURNS_STAGE, BuildStageName, LLMBackend

# Columns the commit stage adds to each outcome row: the Ray node that constructed the conversation,
# and, for a conversation another writer committed after its decision, its input row as JSON (to be
# decided again; its outcome columns are then a placeholder), else "".
NODE_COLUMN = "ray_node_id"
AGAIN_COLUMN = "decide_again"


def batch_rows(batch: dict[str, Any]) -> list[dict[str, Any]]:
    """A Ray Data batch (columns) as rows of plain Python values."""
    keys = list(batch)
    n = len(batch[keys[0]]) if keys else 0
    return [{k: _py(batch[k][i]) for k in keys} for i in range(n)]


def _py(v: Any) -> Any:
    if isinstance(v, np.generic):
        return v.item()
    return v


def works_of(batch: dict[str, Any]) -> list[StageWork]:
    return [from_row(r) for r in batch_rows(batch)] if WORK_COLUMN in batch else []


def turn_sink(progress: Any) -> TurnSink | None:
    """Reports of turns past a stage, sent to the progress actor (None: no actor to tell)."""
    if progress is None:
        return None

    def send(reports: list[StageTurns]) -> None:
        progress.advanced.remote(reports)

    return send


def _cfg(cfg_json: str) -> LycheeConfig:
    configure_logging()
    return LycheeConfig.model_validate_json(cfg_json)


@ray.remote(num_cpus=0)
class ProgressActor:
    """The run's counters: conversations and turns decided, turns past each stage, conversations
    finished by status (the driver polls :meth:`snapshot` to show progress; stages report with
    fire-and-forget calls)."""

    def __init__(self) -> None:
        self.counts = ProgressCounts()
        self.devices: dict[str, list[dict[str, Any]]] = {}
        self.ready: dict[str, int] = {}  # stage -> actors that finished starting (the start-up line says which)
        self.actors: dict[str, dict[str, int]] = {}  # stage -> node id -> actors started there

    def stage_ready(self, stage: str, node: str | None = None) -> None:
        """An actor of ``stage`` finished its start-up (models loaded, store opened) on ``node``."""
        self.ready[stage] = self.ready.get(stage, 0) + 1
        per = self.actors.setdefault(stage, {})
        per[node or "?"] = per.get(node or "?", 0) + 1

    def actor_nodes(self) -> dict[str, dict[str, int]]:
        """Per stage, how many of its actors started on each node (the manifest's placement reports it)."""
        return self.actors

    def ready_stages(self) -> list[str]:
        return list(self.ready)

    def stage_device(self, stage: str, info: dict[str, Any]) -> None:
        """Where an embedding stage's actor runs its model (the run's manifest reports it)."""
        self.devices.setdefault(stage, []).append(info)

    def embedding_devices(self) -> dict[str, list[dict[str, Any]]]:
        return self.devices

    def decided(self, decided: list[tuple[int, list[StageTurns]]]) -> None:
        """Conversations decided: (turns, an increment's stored turns past every stage)."""
        for turns, stored in decided:
            self.counts.decided(turns, stored)

    def advanced(self, reports: list[StageTurns]) -> None:
        self.counts.advanced(reports)

    def finished(self, done: list[tuple[str, int, list[StageTurns] | None]]) -> None:
        """Outcomes: (status, turns, what the conversation's stages had left)."""
        for status, turns, settled in done:
            self.counts.finished(status, turns, settled)

    def snapshot(self) -> dict[str, Any]:
        return self.counts.to_dict()


class DecideStage:
    """Input rows → works: an outcome (skipped, failed, duplicate) or a route (build / increment)
    from the commit marker, before any embedding."""

    def __init__(self, cfg_json: str, out: str, run_id: str, fingerprint: str, retry_failed: bool,
                 on_conflict: str | None, progress: Any) -> None:
        cfg = _cfg(cfg_json)
        self.decider = Decider(StoreWriter(out, cfg.store), run_id, fingerprint, cfg.segmenter.max_turn_chars,
                               retry_failed, on_conflict or cfg.build.on_conflict, cfg.passages)
        self.progress = progress
        if progress is not None:
            progress.stage_ready.remote("decide", ray.get_runtime_context().get_node_id())

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        works = []
        for row in batch_rows(batch):
            try:
                item = row_to_item(row)
            except Exception as e:  # noqa: BLE001 — a row that cannot even be decoded is quarantined
                line = row.get("line")
                w = StageWork(AdapterItem(file=str(row.get("file") or "?"), line=line if isinstance(line, int) else None,
                                          conversation=None, issues=[]))
                w.fail("input", f"undecodable row: {e}")
                works.append(w)
                continue
            works.append(self.decider.decide(item))
        if self.progress is not None:
            self.progress.decided.remote([(w.num_turns, stored_turns(w)) for w in works])
        return works_to_columns(works)


class _EmbedStage:
    """An embedding stage: the configured model (on CUDA when given GPUs and one is visible)."""

    memory = False
    stage: BuildStageName = EMBED_TURNS_STAGE

    def __init__(self, cfg_json: str, num_gpus: float, progress: Any = None) -> None:
        cfg = _cfg(cfg_json)
        self.report = turn_sink(progress)
        self.on_chunk = chunk_reporter(self.stage, self.report)
        self.chunk = cfg.embedding.progress_texts  # texts per model call, so progress moves during a long batch
        ecfg, self.device = stage_embedding_config(cfg.embedding.for_build(), num_gpus)
        model = get_embedder(ecfg, cfg.llm, memory=self.memory)
        self.model = with_memo(model, cfg.embedding.memo_texts)
        self.max_turn_chars = cfg.segmenter.max_turn_chars
        if progress is not None:
            ctx = ray.get_runtime_context()
            progress.stage_device.remote(self.stage, {
                "node": ctx.get_node_id(), "device": self.device, "gpu_ids": [str(g) for g in ray.get_gpu_ids()],
                "runtime": str(getattr(model, "runtime", ecfg.backend))})
            progress.stage_ready.remote(self.stage, ctx.get_node_id())

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        return self.model.encode(list(texts))  # one batch at a time per actor: no need to leave the loop

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        works = works_of(batch)
        asyncio.run(self.run(works))
        if self.report is not None:
            reports = [r for w in works if self.passed(w) for r in complete(w, self.stage)]
            if reports:
                self.report(reports)
        return works_to_columns(works)

    def passed(self, work: StageWork) -> bool:
        """The stage did its work on ``work`` (its turns are credited to it)."""
        return not work.done and not work.again

    async def run(self, works: list[StageWork]) -> None:
        raise NotImplementedError


class EmbedTurnsStage(_EmbedStage):
    """Turn vectors for a batch of conversations (one model call)."""

    stage = EMBED_TURNS_STAGE

    async def run(self, works: list[StageWork]) -> None:
        await embed_turns(works, self.embed, self.model.dim, self.max_turn_chars, self.chunk, self.on_chunk)


class EmbedMemoryStage(_EmbedStage):
    """Record and node vectors for a batch of conversations (one model call)."""

    memory = True
    stage = EMBED_MEMORY_STAGE

    def passed(self, work: StageWork) -> bool:
        return work.embedded and not work.done and not work.again

    async def run(self, works: list[StageWork]) -> None:
        await embed_memory(works, self.embed, self.model.dim, self.chunk, self.on_chunk)


class BuildStage:
    """The construct step: segment, encode (through the cluster-wide limiter) and nodes, a stored
    conversation read for an increment. Keeps ``build.conversations_in_flight`` conversations in
    flight (asyncio)."""

    def __init__(self, cfg_json: str, backend: LLMBackend, out: str, limiter: Any, progress: Any = None) -> None:
        cfg = _cfg(cfg_json)
        lim = RayRateLimiter(limiter) if limiter is not None else None
        encoder = make_encoder(cfg, backend, lim)

        async def no_embedding(texts: Sequence[str]) -> np.ndarray:  # the embedding stages embed
            raise RuntimeError("the construct stage does not embed")

        subjects: list[Any] = []  # the record model, loaded when a conversation first states a value

        async def embed_subjects(texts: Sequence[str]) -> np.ndarray:
            if not subjects:
                subjects.append(get_embedder(cfg.embedding.for_build(), cfg.llm, memory=True))
            return np.asarray(await asyncio.to_thread(subjects[0].encode, list(texts)), dtype=np.float32)

        ctx = BuildContext(cfg=cfg, embed=no_embedding, embed_dim=0, embedder_name=embedder_name(cfg.embedding),
                           encoder=encoder, embed_subjects=embed_subjects)
        client = getattr(encoder, "client", None)
        if client is not None:
            ctx.ledger = client.ledger
        self.constructor = Constructor(ctx, StoreWriter(out, cfg.store), cfg.build.conversations_in_flight,
                                       turn_sink(progress))
        self.node = ray.get_runtime_context().get_node_id()
        if progress is not None:
            progress.stage_ready.remote("build", self.node)

    async def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        works = works_of(batch)
        await self.constructor.run(works)
        for w in works:
            w.placement = self.node
        return works_to_columns(works)


class CommitStage:
    """Commits (write lock held, marker checked again); outcome rows out, with the constructing node,
    and the conversations to decide again (:data:`AGAIN_COLUMN`)."""

    def __init__(self, cfg_json: str, out: str, progress: Any) -> None:
        cfg = _cfg(cfg_json)
        self.committer = Committer(StoreWriter(out, cfg.store))
        self.progress = progress
        self.node = ray.get_runtime_context().get_node_id()
        if progress is not None:
            progress.stage_ready.remote("commit", self.node)

    async def __call__(self, batch: dict[str, Any]) -> dict[str, list[Any]]:
        works = works_of(batch)
        outcomes = await self.committer.run(works)
        done = [(o.status, w.num_turns, settle(w, o.status)) for w, o in zip(works, outcomes, strict=False)
                if o is not None]
        if self.progress is not None and done:
            self.progress.finished.remote(done)
        rows = []
        for w, o in zip(works, outcomes, strict=False):
            r = (o or Outcome.failed(w.item, w.conversation_id, "commit", "decided again")).to_row()
            r[NODE_COLUMN] = w.placement or self.node
            r[AGAIN_COLUMN] = "" if o is not None else json.dumps(item_to_row(w.item))
            rows.append(r)
        keys = (*OUTCOME_COLUMNS, NODE_COLUMN, AGAIN_COLUMN)
        return {k: [r[k] for r in rows] for k in keys}


__all__ = ["AGAIN_COLUMN", "BuildStage", "CommitStage", "DecideStage", "EmbedMemoryStage", "EmbedTurnsStage", "NODE_COLUMN",
           "ProgressActor", "batch_rows", "turn_sink"]
