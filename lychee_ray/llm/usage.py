"""Token accounting: one :class:`CallUsage` per LLM (or embedding) call, collected in a ledger.

Token counts are what the provider reported (``usage`` in the reply). When a reply carries no
usage, the offline tokenizer counts the prompt and completion and the entry is marked
``estimated``. A call that needed several attempts is billed for every attempt the server answered
(an invalid reply still costs tokens); attempts without a reply (429, 5xx, timeout) count zero.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args
from collections.abc import Iterable, Iterator

import pyarrow as pa
from pydantic import BaseModel, ConfigDict, Field

Stage = Literal["encode", "plan", "answer", "judge", "embed"]
STAGES: tuple[str, ...] = get_args(Stage)

# Optional identifiers a caller may attach to a call (``keys=`` of the client).
KEY_FIELDS: tuple[str, ...] = ("conversation_id", "segment_id", "question_id")


class CallUsage(BaseModel):
    """Cost and outcome of one logical LLM call (all its attempts together)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    stage: Stage
    model: str
    prompt_tokens: int = Field(default=0, ge=0, description="Prompt tokens over all answered attempts.")
    completion_tokens: int = Field(default=0, ge=0, description="Completion tokens over all answered attempts.")
    cached_tokens: int = Field(default=0, ge=0, description="Provider-reported prompt_tokens_details.cached_tokens.")
    estimated: bool = Field(default=False, description="True when some counts come from the offline tokenizer.")
    latency_s: float = Field(default=0.0, ge=0, description="Wall time of the call, retries and waits included.")
    limiter_wait_s: float = Field(default=0.0, ge=0, description="Part of latency_s spent waiting on the rate limiter.")
    attempts: int = Field(default=1, ge=0, description="HTTP attempts made (format fallbacks excluded).")
    ok: bool = True
    error: str | None = Field(default=None, description="Last error text when ok is False.")
    error_kind: str | None = Field(default=None, description="Last error kind (see lychee_ray.llm.errors.ErrorKind).")
    finish_reason: str | None = None
    started_at: float = Field(default_factory=time.time, description="Unix time the call started.")
    conversation_id: str | None = None
    segment_id: str | None = None
    question_id: str | None = None

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens


# Arrow schema of a ledger table (``usage/`` in the memory store); one row per CallUsage.
USAGE_SCHEMA = pa.schema(
    [
        pa.field("stage", pa.string(), nullable=False),
        pa.field("model", pa.string(), nullable=False),
        pa.field("prompt_tokens", pa.int64(), nullable=False),
        pa.field("completion_tokens", pa.int64(), nullable=False),
        pa.field("cached_tokens", pa.int64(), nullable=False),
        pa.field("estimated", pa.bool_(), nullable=False),
        pa.field("latency_s", pa.float64(), nullable=False),
        pa.field("limiter_wait_s", pa.float64(), nullable=False),
        pa.field("attempts", pa.int32(), nullable=False),
        pa.field("ok", pa.bool_(), nullable=False),
        pa.field("error", pa.string()),
        pa.field("error_kind", pa.string()),
        pa.field("finish_reason", pa.string()),
        pa.field("started_at", pa.float64(), nullable=False),
        pa.field("conversation_id", pa.string()),
        pa.field("segment_id", pa.string()),
        pa.field("question_id", pa.string()),
    ]
)
assert set(USAGE_SCHEMA.names) == set(CallUsage.model_fields), "USAGE_SCHEMA out of sync with CallUsage"


@dataclass
class CallTally:
    """Running totals of one logical call over its attempts; :meth:`usage` makes its ledger entry."""

    started_at: float
    t0: float
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    estimated: bool = False
    limiter_wait_s: float = 0.0
    finish_reason: str | None = None
    keys: dict[str, str] = field(default_factory=dict)

    def usage(self, stage: Stage, model: str, latency_s: float, *, ok: bool,
              error: BaseException | None = None) -> CallUsage:
        """The :class:`CallUsage` of the call so far; ``error`` supplies the kind and text when not ok."""
        kind = getattr(error, "kind", None) or (type(error).__name__ if error is not None else None)
        text = getattr(error, "message", None) or (str(error) if error is not None else None)
        return CallUsage(
            stage=stage, model=model, prompt_tokens=self.prompt_tokens, completion_tokens=self.completion_tokens,
            cached_tokens=self.cached_tokens, estimated=self.estimated, latency_s=latency_s,
            limiter_wait_s=self.limiter_wait_s, attempts=self.attempts, ok=ok,
            error=None if ok else text, error_kind=None if ok else kind, finish_reason=self.finish_reason,
            started_at=self.started_at, **self.keys,
        )


@dataclass
class UsageTotals:
    """Sums over a set of calls."""

    calls: int = 0
    ok_calls: int = 0
    failed_calls: int = 0
    attempts: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0
    estimated_calls: int = 0
    latency_s: float = 0.0

    @property
    def total_tokens(self) -> int:
        """Prompt plus completion tokens."""
        return self.prompt_tokens + self.completion_tokens

    def add(self, u: CallUsage) -> None:
        """Fold one call into the sums."""
        self.calls += 1
        self.ok_calls += int(u.ok)
        self.failed_calls += int(not u.ok)
        self.attempts += u.attempts
        self.prompt_tokens += u.prompt_tokens
        self.completion_tokens += u.completion_tokens
        self.cached_tokens += u.cached_tokens
        self.estimated_calls += int(u.estimated)
        self.latency_s += u.latency_s

    def to_dict(self) -> dict[str, Any]:
        """Plain dict (for JSON reports and manifests), total_tokens included."""
        d = {f.name: getattr(self, f.name) for f in fields(self)}
        d["total_tokens"] = self.total_tokens
        return d


def _sum(entries: Iterable[CallUsage]) -> UsageTotals:
    t = UsageTotals()
    for u in entries:
        t.add(u)
    return t


class UsageLedger:
    """Append-only list of :class:`CallUsage`, safe to share between threads and coroutines.

    Appends take a short ``threading.Lock`` (no awaits inside), so it is safe from any thread or
    event loop. Pickles without the lock so it can travel to and from Ray workers.
    """

    def __init__(self, entries: Iterable[CallUsage] = ()) -> None:
        self._lock = threading.Lock()
        self._entries: list[CallUsage] = []
        # conversation id -> its entries: a long-lived builder's ledger holds every conversation it
        # built, and each build reads its own entries back (of_conversation) without a scan of all
        self._by_conversation: dict[str, list[CallUsage]] = {}
        self._add(list(entries))

    def _add(self, items: list[CallUsage]) -> None:
        """Append (the caller holds the lock, or nobody else has the ledger yet)."""
        self._entries.extend(items)
        for u in items:
            if u.conversation_id is not None:
                self._by_conversation.setdefault(u.conversation_id, []).append(u)

    # -- writing ---------------------------------------------------------------------------------
    def record(self, usage: CallUsage) -> None:
        """Append one call."""
        with self._lock:
            self._add([usage])

    def extend(self, usages: Iterable[CallUsage]) -> None:
        """Append several calls."""
        items = list(usages)
        with self._lock:
            self._add(items)

    def merge(self, other: UsageLedger) -> None:
        """Append every entry of ``other`` (which is left unchanged)."""
        if other is self:
            raise ValueError("cannot merge a ledger into itself")
        self.extend(other.entries())

    @classmethod
    def merged(cls, *ledgers: UsageLedger) -> UsageLedger:
        """A new ledger holding the entries of all ``ledgers`` in order."""
        out = cls()
        for led in ledgers:
            out.extend(led.entries())
        return out

    def drain(self) -> list[CallUsage]:
        """Return all entries and empty the ledger (for periodic flushes to storage)."""
        with self._lock:
            out, self._entries = self._entries, []
            self._by_conversation = {}
        return out

    # -- reading ---------------------------------------------------------------------------------
    def entries(self) -> list[CallUsage]:
        """A snapshot copy of the entries."""
        with self._lock:
            return list(self._entries)

    def of_conversation(self, conversation_id: str) -> UsageLedger:
        """A new ledger of this conversation's entries (in order), found without a scan of the others."""
        with self._lock:
            return UsageLedger(self._by_conversation.get(conversation_id, ()))

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def __iter__(self) -> Iterator[CallUsage]:
        return iter(self.entries())

    def totals(self, stage: str | None = None, **keys: str) -> UsageTotals:
        """Sums over all entries, optionally of one stage and/or matching ``keys`` (e.g. question_id)."""
        bad = set(keys) - set(KEY_FIELDS)
        if bad:
            raise ValueError(f"unknown usage keys {sorted(bad)}; allowed: {KEY_FIELDS}")
        return _sum(
            u
            for u in self.entries()
            if (stage is None or u.stage == stage) and all(getattr(u, k) == v for k, v in keys.items())
        )

    def totals_by_stage(self) -> dict[str, UsageTotals]:
        """Stage → sums, for the stages that occur."""
        out: dict[str, UsageTotals] = {}
        for u in self.entries():
            out.setdefault(u.stage, UsageTotals()).add(u)
        return out

    def _group(self, key: str) -> dict[str, dict[str, UsageTotals]]:
        out: dict[str, dict[str, UsageTotals]] = {}
        for u in self.entries():
            k = getattr(u, key)
            if k is None:
                continue
            per_stage = out.setdefault(k, {})
            per_stage.setdefault("total", UsageTotals()).add(u)
            per_stage.setdefault(u.stage, UsageTotals()).add(u)
        return out

    def by_conversation(self) -> dict[str, dict[str, UsageTotals]]:
        """conversation_id → {"total": sums, <stage>: sums}; entries without the id are skipped."""
        return self._group("conversation_id")

    def by_question(self) -> dict[str, dict[str, UsageTotals]]:
        """question_id → {"total": sums, <stage>: sums}; entries without the id are skipped."""
        return self._group("question_id")

    def summary(self) -> dict[str, Any]:
        """JSON-ready totals: overall and per stage."""
        return {
            "total": self.totals().to_dict(),
            "by_stage": {s: t.to_dict() for s, t in sorted(self.totals_by_stage().items())},
        }

    # -- Arrow -----------------------------------------------------------------------------------
    def to_table(self) -> pa.Table:
        """All entries as an Arrow table with :data:`USAGE_SCHEMA`."""
        rows = [u.model_dump() for u in self.entries()]
        return pa.Table.from_pylist(rows, schema=USAGE_SCHEMA)

    @classmethod
    def from_table(cls, table: pa.Table) -> UsageLedger:
        """Inverse of :meth:`to_table` (columns beyond the schema are ignored)."""
        names = [n for n in USAGE_SCHEMA.names if n in table.column_names]
        return cls(CallUsage(**row) for row in table.select(names).to_pylist())

    # -- pickling (threading.Lock is not picklable) ----------------------------------------------
    def __getstate__(self) -> dict[str, Any]:
        return {"entries": self.entries()}

    def __setstate__(self, state: dict[str, Any]) -> None:
        UsageLedger.__init__(self, state["entries"])

    def __repr__(self) -> str:
        t = self.totals()
        return f"UsageLedger(calls={t.calls}, total_tokens={t.total_tokens})"
