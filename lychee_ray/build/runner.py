"""Build orchestration shared by the in-process runner and the Ray job.

:class:`ConversationProcessor` takes one adapter item (a conversation or the issues that stopped
it) to exactly one :class:`Outcome` — built, skipped (already committed with the same
fingerprint) or failed (quarantined with its stage and message). :func:`run_local_build` drives it
on one event loop; ``lychee_ray.ray.build_job`` drives the same class inside Ray Data actors.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
import uuid
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator, Iterable

import pyarrow as pa

from lychee_ray.io.adapters import AdapterItem, InputIssue, read_input
from lychee_ray.io.adapters.base import DUPLICATE_CONVERSATION
from lychee_ray.build.pipeline import BuildContext, build_conversation
from lychee_ray.config import LycheeConfig
from lychee_ray.embed import AsyncBatchEmbedder, Embedder, get_embedder
from lychee_ray.build.encode.base import SegmentEncoder
from lychee_ray.build.encode.system_prompt import SystemPromptOnce
from lychee_ray.llm.backend import BACKEND_DESCRIPTIONS, make_llm_client, resolve_backend
from lychee_ray.llm.ratelimit import RateLimiter
from lychee_ray.build.append_types import IncrementError
from lychee_ray.build.incremental import async_write_lock, extend_conversation
from lychee_ray.build.stored import check_history, load_stored
from lychee_ray.core.conversation import TURN_SCHEMA, Conversation
from lychee_ray.io.store.locks import ConversationDeleting
from lychee_ray.io.store.gc import collect_garbage
from lychee_ray.io.store.marker import CommitMarker
from lychee_ray.io.store.migrate import migrate_if_needed
from lychee_ray.io.store.writer import turns_digest
from lychee_ray.core.quality import QualityCounts
from lychee_ray.io.store import MemoryStoreReader, MemoryStoreWriter, compact, read_part

log = logging.getLogger(__name__)

# Failed conversation ids named in the summary table (the rest: `lychee-ray list` / `errors`).
SUMMARY_MAX_IDS = 10


def make_encoder(cfg: LycheeConfig, backend: str, limiter: RateLimiter | None = None) -> SegmentEncoder:
    """The segment encoder for ``backend`` (``openai`` gets an LLM client using ``limiter``), encoding
    each distinct system prompt once per process (:class:`SystemPromptOnce`)."""
    return SystemPromptOnce(_backend_encoder(cfg, backend, limiter), cfg.build.system_prompt_cache)


def _backend_encoder(cfg: LycheeConfig, backend: str, limiter: RateLimiter | None) -> SegmentEncoder:
    if backend == "openai":
        from lychee_ray.build.encode.openai import OpenAIEncoder

        return OpenAIEncoder(make_llm_client(cfg, limiter=limiter), cfg.encoder, cfg.tokenizer)
    from lychee_ray.build.encode.rules import RulesEncoder

    e = cfg.encoder
    return RulesEncoder(
        min_words=e.rules_min_words, max_entities=e.rules_max_entities, max_topics=e.rules_max_topics,
        question_min_content_words=e.rules_question_min_content_words, keep_questions=e.rules_keep_questions,
        we_mode=e.rules_we_mode, image_records=e.rules_image_records, topic_bigrams=e.rules_topic_bigrams,
        max_records_per_turn=e.rules_max_records_per_turn, day_first=e.day_first, summary=e.mode == "summary",
        pair_answers=e.rules_pair_answers, pair_max_answer_words=e.rules_pair_max_answer_words, tools=e.tools,
    )


def make_context(
    cfg: LycheeConfig, backend: str, embedder: Embedder | None = None, limiter: RateLimiter | None = None
) -> BuildContext:
    """Embedder (batched across conversations in flight) + encoder + usage ledger for one process."""
    embedder = embedder or get_embedder(cfg.embedding, cfg.llm)
    batcher = AsyncBatchEmbedder(embedder, cfg.embedding.batch_wait_ms, cfg.embedding.max_batch_texts)
    encoder = make_encoder(cfg, backend, limiter)
    ctx = BuildContext(cfg=cfg, embed=batcher.embed, embed_dim=embedder.dim, embedder_name=embedder.name, encoder=encoder)
    client = getattr(encoder, "client", None)
    if client is not None:
        ctx.ledger = client.ledger
    return ctx


@dataclass
class Outcome:
    """What happened to one input conversation."""

    status: str  # built | skipped | failed | duplicate (a later input line repeating an id: skipped, a warning)
    conversation_id: str | None = None
    stage: str | None = None
    message: str | None = None
    file: str | None = None
    line: int | None = None
    counts: dict[str, int] = field(default_factory=dict)
    tokens: dict[str, dict[str, int]] = field(default_factory=dict)
    # The conversation's memory-quality report (commit marker "quality"; lychee_ray.core.quality).
    quality: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0
    # Input repairs reported for this conversation (adapter warnings, bounded long turns).
    warnings: list[str] = field(default_factory=list)
    # A stored conversation that gained turns (an incremental build: tokens are the increment's).
    appended: bool = False

    def to_row(self) -> dict[str, Any]:
        """Flat row (JSON strings for nested fields) for transport through Ray Data."""
        d = asdict(self)
        d["counts"] = json.dumps(self.counts)
        d["tokens"] = json.dumps(self.tokens)
        d["quality"] = json.dumps(self.quality)
        d["warnings"] = json.dumps(self.warnings)
        return d

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> "Outcome":
        d = {k: _null(v) for k, v in row.items()}
        d["counts"] = json.loads(d.get("counts") or "{}")
        d["tokens"] = json.loads(d.get("tokens") or "{}")
        d["quality"] = json.loads(d.get("quality") or "{}")
        d["warnings"] = json.loads(d.get("warnings") or "[]")
        d["line"] = None if d.get("line") is None else int(d["line"])
        return cls(**d)

    def error_row(self) -> dict[str, Any]:
        return {"conversation_id": self.conversation_id, "stage": self.stage or "build", "message": self.message or "",
                "file": self.file, "line": self.line}


# -- adapter items as plain rows (what travels through Ray Data) ----------------------------------


def item_to_row(item: AdapterItem) -> dict[str, Any]:
    return {
        "conversation": item.conversation.model_dump_json() if item.conversation is not None else None,
        "file": item.file,
        "line": item.line,
        "issues": json.dumps([i.to_dict() for i in item.issues]),
    }


def _null(v: Any) -> Any:
    """Ray Data's numpy batches turn a missing int into NaN; read it back as None."""
    return None if isinstance(v, float) and math.isnan(v) else v


def row_to_item(row: dict[str, Any]) -> AdapterItem:
    conv = _null(row.get("conversation"))
    line = _null(row.get("line"))
    return AdapterItem(
        file=str(row.get("file") or "?"),
        line=None if line is None else int(line),
        conversation=Conversation.model_validate_json(conv) if conv else None,
        issues=[InputIssue(**i) for i in json.loads(row.get("issues") or "[]")],
    )


def input_warnings(item: AdapterItem, max_turn_chars: int) -> list[str]:
    """The item's warning-level issues plus one line for turns over ``segmenter.max_turn_chars``."""
    out = [f"{i.field}: {i.message}" if i.field else i.message for i in item.issues if i.level == "warning"]
    conv = item.conversation
    if conv is not None and max_turn_chars:
        long = [t for *_, t in conv.iter_turns() if len(t.text) > max_turn_chars]
        if long:
            named = ", ".join(f"{t.turn_id} ({len(t.text)} chars)" for t in long[:5]) + (" …" if len(long) > 5 else "")
            out.append(f"{len(long)} turn(s) longer than segmenter.max_turn_chars={max_turn_chars}: {named}; only their first "
                       f"{max_turn_chars} characters are embedded, segmented and encoded, the turns are stored in full")
    return out


def _unchanged(conv: Conversation, marker: CommitMarker) -> bool:
    """The stored conversation has exactly these turns and no open tail (``turns_digest`` of the marker)."""
    digest = marker.turns_digest
    if digest is None or marker.open_turns:
        return False
    return digest == turns_digest(pa.Table.from_pylist(conv.turn_rows(), schema=TURN_SCHEMA))


class ConversationProcessor:
    """Item → outcome: claim the id, then under the conversation's write lock skip it (unchanged),
    append its new turns (stored before), build it, or quarantine it; commit; never raises."""

    def __init__(self, ctx: BuildContext, writer: MemoryStoreWriter, run_id: str, retry_failed: bool = False,
                 on_conflict: str | None = None) -> None:
        self.ctx = ctx
        self.writer = writer
        self.reader = MemoryStoreReader(writer.layout)
        self.run_id = run_id
        self.retry_failed = retry_failed
        # a stored conversation whose input rewrote its history: "error" (quarantine) or "rebuild"
        self.on_conflict = on_conflict or ctx.cfg.build.on_conflict
        self.fingerprint = ctx.fingerprint

    async def process(self, item: AdapterItem) -> Outcome:
        t0 = time.perf_counter()
        conv = item.conversation
        dup_issue = next((i for i in item.issues if i.kind == DUPLICATE_CONVERSATION), None)
        if conv is None and dup_issue is not None and not any(i.level == "error" for i in item.issues):
            return Outcome("duplicate", dup_issue.conversation_id, "input", dup_issue.message, item.file, item.line,
                           warnings=[f"{dup_issue.field}: {dup_issue.message}"])
        if conv is None:
            errs = [i for i in item.issues if i.level == "error"] or item.issues
            first = errs[0] if errs else None
            msg = "; ".join(f"{i.field}: {i.message}" if i.field else i.message for i in errs) or "unreadable input"
            return Outcome("failed", first.conversation_id if first else None, "input", msg, item.file, item.line)
        cid = conv.conversation_id
        dup = self.writer.claim(cid, self.run_id, item.where)
        if dup is not None:  # (a Ray run: another block of the input held the id first)
            msg = (f"duplicate conversation id: this line ({item.where}) skipped; the conversation is built from its "
                   f"first occurrence ({dup})")
            return Outcome("duplicate", cid, "input", msg, item.file, item.line, warnings=[f"conversation_id: {msg}"])
        warnings = input_warnings(item, self.ctx.cfg.segmenter.max_turn_chars)
        try:
            # one writer per conversation (an append may be committing it right now), from reading
            # its stored state to committing the next generation
            async with async_write_lock(self.writer.layout, cid):
                return await self._process_locked(item, conv, warnings, t0)
        except ConversationDeleting as e:
            return Outcome("failed", cid, "deleting", str(e), item.file, item.line, wall_s=time.perf_counter() - t0,
                           warnings=warnings)

    async def _process_locked(self, item: AdapterItem, conv: Conversation, warnings: list[str], t0: float) -> Outcome:
        cid = conv.conversation_id
        marker = self.writer.current_marker(cid)  # we hold its write lock (a version-1 marker is migrated)
        previous = None
        if marker is not None and marker.fingerprint == self.fingerprint:
            if not (self.retry_failed and marker.counts.failed_segments > 0):
                if _unchanged(conv, marker):
                    return Outcome("skipped", cid, counts=marker.counts.as_dict(), file=item.file, line=item.line)
                return await self._increment(item, conv, marker, warnings, t0)
            self.reader.refresh()
            previous = self.reader.load(cid)
        return await self._build(item, conv, warnings, t0, marker, previous)

    async def _build(self, item: AdapterItem, conv: Conversation, warnings: list[str], t0: float,
                     marker: CommitMarker | None, previous: Any = None) -> Outcome:
        """Build the conversation whole (new, other configuration, retry, or rebuilt after a conflict);
        ``marker``: its commit read under the write lock (None: not stored), the commit's fence."""
        cid = conv.conversation_id
        stage = "build"
        try:
            art = await build_conversation(conv, self.ctx, previous=previous)
            if previous is not None:
                art.usage = self._with_previous_usage(cid, art.usage)
            stage = "commit"
            marker = await asyncio.to_thread(self.writer.commit, art, locked=True, based_on=marker)
        except Exception as e:  # noqa: BLE001 — quarantine: one bad conversation never stops the job
            log.exception("conversation %s failed at %s", cid, stage)
            return Outcome("failed", cid, stage, f"{type(e).__name__}: {e}", item.file, item.line,
                           wall_s=time.perf_counter() - t0, warnings=warnings)
        return Outcome("built", cid, counts=marker.counts.as_dict(), tokens=marker.tokens,
                       quality=marker.quality or {}, file=item.file,
                       line=item.line, wall_s=time.perf_counter() - t0, warnings=warnings)

    async def _increment(self, item: AdapterItem, conv: Conversation, marker: CommitMarker, warnings: list[str],
                         t0: float) -> Outcome:
        """A stored conversation met again: append its new turns (docs/incremental.md), skip it when
        nothing is new, or stop at a rewritten history (stage ``conflict``) unless ``on_conflict`` rebuilds."""
        cid = conv.conversation_id
        stage = "increment"
        try:
            stored = await asyncio.to_thread(load_stored, self.writer.layout, marker)
            try:
                check_history(stored, conv)
            except IncrementError as e:
                if self.on_conflict == "rebuild":
                    log.warning("%s; rebuilding it from scratch (on_conflict=rebuild)", e)
                    return await self._build(item, conv, warnings, t0, marker)
                return Outcome("failed", cid, "conflict", str(e), item.file, item.line,
                               wall_s=time.perf_counter() - t0, warnings=warnings)
            if conv.num_turns == stored.num_turns and not marker.open_turns:
                return Outcome("skipped", cid, counts=marker.counts.as_dict(), file=item.file, line=item.line)
            inc = await extend_conversation(stored, conv, self.ctx, finish=True, ledger_start=len(self.ctx.ledger))
            if inc.artifacts is None:
                return Outcome("skipped", cid, counts=marker.counts.as_dict(), file=item.file, line=item.line)
            stage = "commit"
            marker = await asyncio.to_thread(self.writer.commit, inc.artifacts, locked=True, based_on=marker)
        except Exception as e:  # noqa: BLE001 — quarantine, as for a whole build
            log.exception("conversation %s failed at %s", cid, stage)
            return Outcome("failed", cid, stage, f"{type(e).__name__}: {e}", item.file, item.line,
                           wall_s=time.perf_counter() - t0, warnings=warnings)
        return Outcome("built", cid, counts=marker.counts.as_dict(), tokens=inc.tokens, quality=inc.quality, file=item.file,
                       line=item.line, wall_s=time.perf_counter() - t0, warnings=warnings, appended=bool(inc.new_turn_ids))

    def _with_previous_usage(self, cid: str, new):
        import pyarrow as pa

        old = read_part(self.writer.layout, "usage", self.reader.markers[cid])
        return pa.concat_tables([old, new.cast(old.schema)]) if old.num_rows else new


@dataclass
class BuildSummary:
    """Accounting of every input conversation: built + skipped + failed + duplicate = inputs."""

    inputs: int = 0
    built: int = 0
    appended: int = 0  # of the built: stored conversations that gained turns (incremental builds)
    skipped: int = 0
    failed: int = 0
    # input lines that repeated a conversation id read before: skipped (a warning row each, naming the line)
    duplicate: int = 0
    failed_segments: int = 0
    records: int = 0
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    wall_s: float = 0.0
    # Memory checks over the conversations built in this run (issue 16).
    quality: QualityCounts = field(default_factory=QualityCounts)
    errors: list[dict[str, Any]] = field(default_factory=list)
    # Input repairs (one row per conversation and kind; stored in errors/ with stage "warning").
    warnings: list[dict[str, Any]] = field(default_factory=list)
    # the skipped duplicate lines, "file:line [id]"
    duplicates: list[str] = field(default_factory=list)

    def add(self, o: Outcome) -> None:
        self.inputs += 1
        setattr(self, o.status, getattr(self, o.status) + 1)
        if o.status == "failed":
            self.errors.append(o.error_row())
        if o.status == "duplicate":
            self.duplicates.append(f"{o.file or '-'}" + (f":{o.line}" if o.line is not None else "")
                                   + f" [{o.conversation_id}]")
        for w in o.warnings:
            self.warnings.append({"conversation_id": o.conversation_id, "stage": "warning", "message": w,
                                  "file": o.file, "line": o.line})
        if o.status == "built":
            self.appended += o.appended
            self.records += o.counts.get("records", 0)
            self.failed_segments += o.counts.get("failed_segments", 0)
            self.quality.add(QualityCounts.from_report(o.quality))
            for t in o.tokens.values():
                self.llm_calls += t.get("calls", 0)
                self.prompt_tokens += t.get("prompt_tokens", 0)
                self.completion_tokens += t.get("completion_tokens", 0)

    def to_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["errors"] = len(self.errors)
        d["warnings"] = len(self.warnings)
        d["duplicates"] = list(self.duplicates)
        d["quality"] = self.quality.report()
        return d

    def quality_rows(self) -> list[tuple[str, Any]]:
        """Summary-table lines of the memory checks: what the model drafted and what became of it."""
        q = self.quality.report()
        rej = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in q["rejected"].items() if v) or "none"
        rep = ", ".join(f"{k.replace('_', ' ')} {v}" for k, v in q["repaired"].items() if v) or "none"
        return [("records per segment", q["records_per_segment"]),
                ("drafted records rejected", f"{q['rejected_total']} of {q['drafts']} ({rej})"),
                ("records repaired by code", rep),
                ("segments repaired / degenerate", f"{q['segments_repaired']} / {q['segments_degenerate']}")]

    def error_lines(self) -> list[str]:
        """One console line per failed conversation: ``file:line [id] stage: message``."""
        out = []
        for e in self.errors:
            where = (e.get("file") or "-") + (f":{e['line']}" if e.get("line") is not None else "")
            out.append(f"error: {where} [{e.get('conversation_id') or '-'}] {e['stage']}: {e['message']}")
        return out

    def failed_ids(self) -> list[str]:
        """Ids of the conversations that failed (those an id could be read for), in input order."""
        return list(dict.fromkeys(e["conversation_id"] for e in self.errors if e.get("conversation_id")))

    def table(self, store: str | None = None) -> str:
        """Final human-readable summary; with ``store``, where to look next (``list``, ``errors``)."""
        rows = [("input conversations", self.inputs), ("built", self.built), ("of which appended (gained turns)", self.appended),
                ("skipped (already built)", self.skipped),
                ("failed (see errors/)", self.failed), ("duplicate ids skipped (warnings)", self.duplicate), ("input warnings (errors/, stage warning)", len(self.warnings)),
                ("failed segments (--retry-failed)", self.failed_segments),
                ("records", self.records), *self.quality_rows(), ("LLM calls", self.llm_calls),
                ("prompt / completion tokens", f"{self.prompt_tokens} / {self.completion_tokens}"), ("wall time (s)", self.wall_s)]
        w = max(len(k) for k, _ in rows)
        lines = [f"{k:<{w}}  {v}" for k, v in rows]
        if self.duplicates:
            shown = ", ".join(self.duplicates[:SUMMARY_MAX_IDS]) + (
                f" (+{len(self.duplicates) - SUMMARY_MAX_IDS} more)" if len(self.duplicates) > SUMMARY_MAX_IDS else "")
            lines.append(f"{'duplicate lines skipped':<{w}}  {shown}")
        failed = self.failed_ids()
        if failed:
            shown = ", ".join(failed[:SUMMARY_MAX_IDS]) + (f" (+{len(failed) - SUMMARY_MAX_IDS} more)" if len(failed) > SUMMARY_MAX_IDS else "")
            lines.append(f"{'failed conversations':<{w}}  {shown}")
        if store is not None:
            lines.append(f"conversation ids: lychee-ray list --memory {store}")
            if self.errors or self.warnings:
                lines.append(f"errors and warnings: lychee-ray errors --memory {store} --warnings")
        return "\n".join(lines)


def manifest_info(cfg: LycheeConfig, backend: str, summary: BuildSummary, runner: str) -> dict[str, Any]:
    """Run-level manifest fields (models, dims and fingerprints come from the commit markers)."""
    return {
        "backend_description": BACKEND_DESCRIPTIONS.get(backend, ""),
        "config": cfg.redacted(),
        "runner": runner,
        "last_run": summary.to_dict(),
    }


async def process_stream(
    items: Iterable[AdapterItem], processor: ConversationProcessor, in_flight: int
) -> AsyncIterator[Outcome]:
    """Process items with at most ``in_flight`` conversations at once; yields outcomes as they finish."""
    pending: set[asyncio.Task[Outcome]] = set()
    for item in items:
        pending.add(asyncio.create_task(processor.process(item)))
        if len(pending) >= in_flight:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for t in done:
                yield t.result()
    while pending:
        done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        for t in done:
            yield t.result()


def finish_run(
    writer: MemoryStoreWriter, summary: BuildSummary, run_id: str, info: dict[str, Any], conversations_per_file: int
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
    backend: str | None = None,
    retry_failed: bool = False,
    ctx: BuildContext | None = None,
    on_conflict: str | None = None,
) -> BuildSummary:
    """Build (or resume) a store from input files in this process (see :func:`run_local_build_items`)."""
    return run_local_build_items(cfg, read_input(fmt, input_path), out, backend=backend, retry_failed=retry_failed, ctx=ctx,
                                 on_conflict=on_conflict)


def run_local_build_items(
    cfg: LycheeConfig,
    items: Iterable[AdapterItem],
    out: str | Path,
    backend: str | None = None,
    retry_failed: bool = False,
    ctx: BuildContext | None = None,
    on_conflict: str | None = None,
) -> BuildSummary:
    """Build (or resume) a store in this process from adapter items (read lazily, a few in flight).

    Every item is accounted for in the returned summary: built, skipped or failed. Conversations
    already stored gain their new turns (``appended``); ``on_conflict`` (default
    ``build.on_conflict``) decides about inputs that rewrite a stored history (docs/incremental.md).
    """
    t0 = time.perf_counter()
    backend = resolve_backend(cfg.llm, backend)
    ctx = ctx or make_context(cfg, backend)
    writer = MemoryStoreWriter(out, cfg.store)
    migrate_if_needed(writer.layout)  # a store written by an older version: to the current layout first
    run_id = f"local-{uuid.uuid4().hex[:8]}"
    processor = ConversationProcessor(ctx, writer, run_id, retry_failed, on_conflict)
    summary = BuildSummary()

    async def drive() -> None:
        async for o in process_stream(items, processor, cfg.build.conversations_in_flight):
            summary.add(o)

    asyncio.run(drive())
    summary.wall_s = round(time.perf_counter() - t0, 3)
    finish_run(writer, summary, run_id, manifest_info(cfg, backend, summary, "local"), cfg.build.compact_conversations_per_file)
    return summary
