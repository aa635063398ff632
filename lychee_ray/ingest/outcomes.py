"""What becomes of each input conversation: :class:`Outcome` (built, skipped, failed or duplicate) and the
run's :class:`BuildSummary`, plus the row forms that carry items and outcomes through Ray Data."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from lychee_ray.config import PassagesConfig
from lychee_ray.core.conversation import Conversation
from lychee_ray.core.quality import QualityCounts
from lychee_ray.io.adapters import AdapterItem, InputIssue
from lychee_ray.io.adapters.base import DUPLICATE_CONVERSATION
from lychee_ray.io.store.marker import CommitMarker
from lychee_ray.ingest.passages import capped_turns

# Failed conversation ids named in the summary table (the rest: `lychee-ray list` / `errors`).
SUMMARY_MAX_IDS = 10


@dataclass(frozen=True)
class IncrementMade:
    """What an increment added to a stored conversation, as its outcome reports it."""

    new_turns: int
    tokens: dict[str, dict[str, int]]
    quality: dict[str, Any]


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
    # A stored conversation that gained turns (the increment route: tokens and quality are the increment's).
    appended: bool = False

    # -- the one place outcomes are made ------------------------------------------------------

    @classmethod
    def built(cls, item: AdapterItem, conversation_id: str, committed: CommitMarker, *, wall_s: float,
              warnings: list[str], increment: IncrementMade | None = None) -> Outcome:
        """Committed: the whole generation's counts; tokens and quality are the generation's, or,
        for an increment, what the increment spent and checked (``appended`` when it added turns)."""
        tokens = increment.tokens if increment is not None else committed.tokens
        quality = increment.quality if increment is not None else committed.quality or {}
        return cls("built", conversation_id, counts=committed.counts.as_dict(), tokens=tokens, quality=quality,
                   file=item.file, line=item.line, wall_s=wall_s, warnings=list(warnings),
                   appended=increment is not None and increment.new_turns > 0)

    @classmethod
    def skipped(cls, item: AdapterItem, conversation_id: str, marker: CommitMarker,
                warnings: list[str] | None = None) -> Outcome:
        """Nothing to write: the stored conversation (``marker``) already holds the input."""
        return cls("skipped", conversation_id, counts=marker.counts.as_dict(), file=item.file, line=item.line,
                   warnings=list(warnings or []))

    @classmethod
    def failed(cls, item: AdapterItem, conversation_id: str | None, stage: str, error: BaseException | str, *,
               wall_s: float = 0.0, warnings: list[str] | None = None) -> Outcome:
        """Quarantined at ``stage`` (an exception is named by its type)."""
        msg = error if isinstance(error, str) else f"{type(error).__name__}: {error}"
        return cls("failed", conversation_id, stage, msg, item.file, item.line, wall_s=wall_s,
                   warnings=list(warnings or []))

    @classmethod
    def duplicate(cls, item: AdapterItem, conversation_id: str | None, message: str, warning: str) -> Outcome:
        """A later input line repeating a conversation id: skipped, with a warning."""
        return cls("duplicate", conversation_id, "input", message, item.file, item.line, warnings=[warning])

    def to_row(self) -> dict[str, Any]:
        """Flat row (JSON strings for nested fields) for transport through Ray Data."""
        d = asdict(self)
        d["counts"] = json.dumps(self.counts)
        d["tokens"] = json.dumps(self.tokens)
        d["quality"] = json.dumps(self.quality)
        d["warnings"] = json.dumps(self.warnings)
        return d

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Outcome:
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


# the columns of an outcome's row (Outcome.to_row)
OUTCOME_COLUMNS: tuple[str, ...] = tuple(f.name for f in fields(Outcome))


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


def unreadable_outcome(item: AdapterItem) -> Outcome:
    """The outcome of an item without a conversation: ``duplicate`` when the adapter saw its id
    before (and nothing else is wrong with it: a warning), else ``failed`` at stage ``input``."""
    dup = next((i for i in item.issues if i.kind == DUPLICATE_CONVERSATION), None)
    if dup is not None and not any(i.level == "error" for i in item.issues):
        return Outcome.duplicate(item, dup.conversation_id, dup.message, f"{dup.field}: {dup.message}")
    errs = [i for i in item.issues if i.level == "error"] or item.issues
    first = errs[0] if errs else None
    msg = "; ".join(f"{i.field}: {i.message}" if i.field else i.message for i in errs) or "unreadable input"
    return Outcome.failed(item, first.conversation_id if first else None, "input", msg)


def duplicate_outcome(item: AdapterItem, cid: str, first_seen: str) -> Outcome:
    """A line whose id another block of the input claimed first in this run (a Ray run): skipped,
    with a warning naming both lines."""
    msg = (f"duplicate conversation id: this line ({item.where}) skipped; the conversation is built from its "
           f"first occurrence ({first_seen})")
    return Outcome.duplicate(item, cid, msg, f"conversation_id: {msg}")


def input_warnings(item: AdapterItem, max_turn_chars: int, passages: PassagesConfig | None = None) -> list[str]:
    """The item's warning-level issues plus one line for turns over ``segmenter.max_turn_chars`` and,
    with ``passages``, one for turns over ``passages.max_turn_chars`` (searchable only that far)."""
    out = [f"{i.field}: {i.message}" if i.field else i.message for i in item.issues if i.level == "warning"]
    conv = item.conversation
    if conv is not None and max_turn_chars:
        long = [t for *_, t in conv.iter_turns() if len(t.text) > max_turn_chars]
        if long:
            named = ", ".join(f"{t.turn_id} ({len(t.text)} chars)" for t in long[:5]) + (" …" if len(long) > 5 else "")
            out.append(f"{len(long)} turn(s) longer than segmenter.max_turn_chars={max_turn_chars}: {named}; only their first "
                       f"{max_turn_chars} characters are embedded, segmented and encoded, the turns are stored in full")
    if conv is not None and passages is not None:
        capped = capped_turns([t for *_, t in conv.iter_turns()], passages)
        if capped:
            cap = passages.max_turn_chars
            named = ", ".join(f"{t.turn_id} ({len(t.text)} chars)" for t in capped[:5]) + (" …" if len(capped) > 5 else "")
            out.append(f"{len(capped)} turn(s) longer than passages.max_turn_chars={cap}: {named}; only their first "
                       f"{cap} characters are searchable (cut into passages), the turns are stored in full")
    return out


@dataclass
class BuildSummary:
    """Accounting of every input conversation: built + skipped + failed + duplicate = inputs."""

    inputs: int = 0
    built: int = 0
    appended: int = 0  # of the built: stored conversations that gained turns (the increment route)
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
    # Memory checks over the conversations built in this run.
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
                ("segments repaired / degenerate", f"{q['segments_repaired']} / {q['segments_degenerate']}"),
                ("segments salvaged (reply cut, warnings)", q["segments_salvaged"])]

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
        rows = [("input conversations", self.inputs), ("built", self.built), ("of which increments (gained turns)", self.appended),
                ("skipped (already built)", self.skipped),
                ("failed (see errors/)", self.failed), ("duplicate ids skipped (warnings)", self.duplicate),
                ("input warnings (errors/, stage warning)", len(self.warnings)),
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
            shown = ", ".join(failed[:SUMMARY_MAX_IDS]) + (
                f" (+{len(failed) - SUMMARY_MAX_IDS} more)" if len(failed) > SUMMARY_MAX_IDS else "")
            lines.append(f"{'failed conversations':<{w}}  {shown}")
        if store is not None:
            lines.append(f"conversation ids: lychee-ray list --memory {store}")
            if self.errors or self.warnings or self.failed_segments or self.quality.segments_salvaged:
                lines.append(f"errors and warnings: lychee-ray errors --memory {store} --warnings")
        return "\n".join(lines)


__all__ = [
    "BuildSummary", "IncrementMade", "OUTCOME_COLUMNS", "Outcome", "SUMMARY_MAX_IDS", "duplicate_outcome",
    "input_warnings", "item_to_row", "row_to_item", "unreadable_outcome",
]
