"""In-process build runner: input → conversations → store, with resume and quarantine.

This is the ``--local`` path and the reference the Ray job must agree with. It keeps up to
``build.conversations_in_flight`` conversations in flight on one event loop.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from .adapters import AdapterItem, read_input
from .build import BuildContext, build_conversation
from .config import LycheeConfig
from .embed import Embedder, get_embedder
from .encode import SegmentEncoder
from .llm.backend import make_llm_client, resolve_backend
from .store import MemoryStoreReader, MemoryStoreWriter

log = logging.getLogger(__name__)


def make_encoder(cfg: LycheeConfig, backend: str, client: Any = None) -> SegmentEncoder:
    """The segment encoder for ``backend`` (``openai`` needs an LLM client)."""
    if backend == "openai":
        from .encode_openai import OpenAIEncoder

        return OpenAIEncoder(client or make_llm_client(cfg), cfg.encoder, cfg.tokenizer)
    from .encode_rules import RulesEncoder

    e = cfg.encoder
    return RulesEncoder(min_words=e.rules_min_words, max_entities=e.rules_max_entities, max_topics=e.rules_max_topics)


def make_context(cfg: LycheeConfig, backend: str, embedder: Embedder | None = None, client: Any = None) -> BuildContext:
    """Embedder + encoder + ledger for one process."""
    embedder = embedder or get_embedder(cfg.embedding, cfg.llm)
    encoder = make_encoder(cfg, backend, client)
    ledger = getattr(getattr(encoder, "client", None), "ledger", None)

    async def embed(texts):
        return await asyncio.to_thread(embedder.encode, list(texts))

    ctx = BuildContext(cfg=cfg, embed=embed, embed_dim=embedder.dim, embedder_name=embedder.name, encoder=encoder)
    if ledger is not None:
        ctx.ledger = ledger
    return ctx


@dataclass
class BuildSummary:
    """Accounting of every input conversation: built + skipped + failed = inputs."""

    inputs: int = 0
    built: int = 0
    skipped: int = 0
    failed: int = 0
    failed_segments: int = 0
    records: int = 0
    wall_s: float = 0.0
    errors: list[dict[str, Any]] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["errors"] = len(self.errors)
        return d


def input_error_rows(item: AdapterItem) -> list[dict[str, Any]]:
    """Error-level adapter issues as ``errors/`` rows (stage ``input``)."""
    return [
        {"conversation_id": i.conversation_id, "stage": "input", "message": i.message + (f" (field {i.field})" if i.field else ""),
         "file": i.file, "line": i.line}
        for i in item.issues
        if i.level == "error"
    ]


def manifest_info(cfg: LycheeConfig, ctx: BuildContext, summary: BuildSummary) -> dict[str, Any]:
    return {
        "backend": ctx.encoder.backend,
        "models": {"llm": ctx.encoder.model, "embedding": ctx.embedder_name},
        "embedding_dim": ctx.embed_dim,
        "fingerprint": ctx.fingerprint,
        "config": cfg.redacted(),
        "last_run": summary.to_dict(),
    }


async def _build_all(
    items: Iterable[AdapterItem], ctx: BuildContext, writer: MemoryStoreWriter, retry_failed: bool, summary: BuildSummary
) -> None:
    sem = asyncio.Semaphore(ctx.cfg.build.conversations_in_flight)
    reader = MemoryStoreReader(writer.root)
    fp = ctx.fingerprint

    async def one(conv) -> None:
        async with sem:
            marker = writer.commit_marker(conv.conversation_id)
            previous = None
            if marker is not None and marker.get("fingerprint") == fp:
                if not (retry_failed and marker.get("counts", {}).get("failed_segments", 0) > 0):
                    summary.skipped += 1
                    return
                reader.refresh()
                previous = reader.load(conv.conversation_id)
            try:
                art = await build_conversation(conv, ctx, previous=previous)
                if previous is not None:
                    art.usage = _concat_usage(reader, conv.conversation_id, art.usage)
                marker = await asyncio.to_thread(writer.commit, art)
            except Exception as e:  # noqa: BLE001 — quarantine: record and go on
                log.exception("conversation %s failed", conv.conversation_id)
                summary.failed += 1
                summary.errors.append({"conversation_id": conv.conversation_id, "stage": "build", "message": f"{type(e).__name__}: {e}"})
                return
            summary.built += 1
            summary.records += marker["counts"]["records"]
            summary.failed_segments += marker["counts"]["failed_segments"]

    tasks = []
    for item in items:
        summary.inputs += 1
        if item.conversation is None:
            summary.failed += 1
            summary.errors.extend(input_error_rows(item) or [{"stage": "input", "message": "unreadable input", "file": item.file, "line": item.line}])
            continue
        tasks.append(asyncio.create_task(one(item.conversation)))
        if len(tasks) >= 4 * ctx.cfg.build.conversations_in_flight:
            # bounded lookahead: do not hold thousands of parsed conversations in memory
            done, pending = await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
            tasks = list(pending)
    if tasks:
        await asyncio.gather(*tasks)


def _concat_usage(reader: MemoryStoreReader, conversation_id: str, new):
    import pyarrow as pa
    import pyarrow.parquet as pq

    old = pq.read_table(reader.root / "usage" / f"{reader.markers[conversation_id]['key']}.parquet")
    return pa.concat_tables([old, new.cast(old.schema)]) if old.num_rows else new


def run_local_build(
    cfg: LycheeConfig,
    fmt: str,
    input_path: str | Path,
    out: str | Path,
    backend: str | None = None,
    retry_failed: bool = False,
    ctx: BuildContext | None = None,
) -> BuildSummary:
    """Build (or resume) a store in this process. Every input conversation is accounted for."""
    t0 = time.perf_counter()
    backend = resolve_backend(cfg.llm, backend)
    ctx = ctx or make_context(cfg, backend)
    writer = MemoryStoreWriter(out)
    summary = BuildSummary()
    asyncio.run(_build_all(read_input(fmt, input_path), ctx, writer, retry_failed, summary))
    writer.write_errors(summary.errors, run_id=f"build-{uuid.uuid4().hex[:6]}")
    summary.wall_s = round(time.perf_counter() - t0, 3)
    writer.write_manifest(manifest_info(cfg, ctx, summary))
    return summary

