"""Forgetting on request: erase one record, every record of a slot or of an entity, or the records
past their type's retention, of one user (docs/erasure.md, "Forgetting").

:func:`forget_records` runs under the store lock (one store-wide rewrite at a time, as erasure and
compaction), and for each conversation holding such records under its write lock (:func:`hold_sync`,
the one write path: ingest/commit.py): it reads the commit, drops the records there
(io/store/forget.py), adds them to the conversation's tombstones (io/store/tombstones.py: no later
commit writes them back) and publishes a new base generation fenced on the commit it read; the
rows the previous commit had in shared compacted files are then rewritten away, and the manifest
logs the forget (hashes only). Readers see the new commit as any other (their cached views of the
old one are rebuilt: ``MemoryStore.forget_records`` drops its own at once).

Which records (:class:`ForgetSelector`, exactly one of):

* ``record_id`` — that record;
* ``slot`` — every record whose slot is it (normalised as records' slots are: core/currency.py);
* ``entity`` — every record that names it in ``entities``, has it as its slot's subject, or
  mentions it in its text (case-insensitive, whole words);
* ``expired`` — records of a type ``store.retention_days`` names whose ``created_at`` is older
  than that many days before ``now``.

With ``redact_turns`` the source turns of the forgotten records lose their text too (their content
becomes ``[forgotten]``); without it they stay, as the user's conversation.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from collections.abc import Mapping
from typing import Any, Literal

import pyarrow as pa
from pydantic import BaseModel, Field

from lychee_ray.core.currency import parse_slot, slot_subject
from lychee_ray.core.records import RECORD_TYPES
from lychee_ray.ingest.commit import hold_sync
from lychee_ray.io.store import StoreWriter, conversation_key
from lychee_ray.io.store.forget import counts_after, drop_old_rows, log_forget, without_records
from lychee_ray.io.store.layout import NotAStoreError, StoreLayout, as_layout
from lychee_ray.io.store.locks import store_lock
from lychee_ray.io.store.reader import load_generation, read_parts, read_segstate
from lychee_ray.io.store.tombstones import read_tombstones, write_tombstones

ForgetErrorKind = Literal["not_found", "no_records", "invalid_request", "conversation_building"]
SelectorKind = Literal["record", "slot", "entity", "expired"]
_COLUMNS = ["record_id", "type", "text", "entities", "slot", "created_at"]


class ForgetError(LookupError):
    """A forget that removes nothing. ``kind``: ``not_found`` (no such record of this user — one of
    another user's is not found either), ``no_records`` (a slot, entity or retention matching no
    record), ``invalid_request`` (not exactly one selector; a slot that does not parse; no retention
    configured), ``conversation_building`` (the conversation named has files but no commit yet: a
    build or first append of it is running; forget once it is committed)."""

    def __init__(self, kind: ForgetErrorKind, message: str) -> None:
        super().__init__(message)
        self.kind: ForgetErrorKind = kind

    def __str__(self) -> str:
        return str(self.args[0])


class ForgetReport(BaseModel):
    """What a forget removed (also the body of ``POST /v1/users/{user_id}/forget``)."""

    user_id: str
    selector: SelectorKind
    records_removed: int
    record_ids: list[str] = Field(description="the forgotten records' ids (returned to the caller, kept only as "
                                              "tombstones)")
    conversation_ids: list[str]
    nodes_removed: int
    nodes_changed: int
    turns_redacted: int
    files_rewritten: int = Field(description="shared compacted files written anew without the old rows")
    seconds: float


@dataclass(frozen=True)
class ForgetSelector:
    """Which records to forget: exactly one of the fields (module doc)."""

    record_id: str | None = None
    slot: str | None = None
    entity: str | None = None
    retention_days: Mapping[str, int] | None = None  # set: forget the expired records

    def kind(self) -> SelectorKind:
        given = [k for k, v in (("record", self.record_id), ("slot", self.slot), ("entity", self.entity),
                                ("expired", self.retention_days)) if v is not None]
        if len(given) != 1:
            raise ForgetError("invalid_request", "name exactly one of: a record id, a slot, an entity, expired")
        kind: SelectorKind = given[0]  # type: ignore[assignment]  # one of the four literals above
        if kind == "slot" and parse_slot(self.slot) is None:
            raise ForgetError("invalid_request", f"slot {self.slot!r} does not name a subject and an attribute "
                                                 "('subject · attribute')")
        if kind == "entity" and not (self.entity or "").strip():
            raise ForgetError("invalid_request", "the entity is empty")
        if kind == "expired" and not self.retention_days:
            raise ForgetError("invalid_request", "no retention is configured (store.retention_days)")
        unknown = sorted(set(self.retention_days or {}) - set(RECORD_TYPES))
        if kind == "expired" and unknown:
            raise ForgetError("invalid_request", f"store.retention_days names unknown record types {unknown}")
        return kind

    def ident(self) -> str:
        """What was named (hashed into the manifest's log)."""
        return self.record_id or self.slot or self.entity or ",".join(f"{k}={v}" for k, v in
                                                                      sorted((self.retention_days or {}).items()))

    def matcher(self, now: datetime) -> Any:
        """``f(row) -> bool`` over record rows (:data:`_COLUMNS`)."""
        kind = self.kind()
        if kind == "record":
            return lambda r: r["record_id"] == self.record_id
        if kind == "slot":
            want = parse_slot(self.slot)
            return lambda r: parse_slot(r.get("slot")) == want
        if kind == "entity":
            name = " ".join((self.entity or "").split()).casefold()
            pattern = re.compile(rf"(?<!\w){re.escape(name)}(?!\w)", re.IGNORECASE)
            return lambda r: (any(" ".join(e.split()).casefold() == name for e in (r.get("entities") or []))
                              or (r.get("slot") is not None and slot_subject(parse_slot(r["slot"]) or "") == name)
                              or bool(pattern.search(r.get("text") or "")))
        cutoff = {t: now - timedelta(days=d) for t, d in (self.retention_days or {}).items()}
        return lambda r: r["type"] in cutoff and _older(r.get("created_at"), cutoff[r["type"]])


def _older(created_at: str | None, cutoff: datetime) -> bool:
    """True when ``created_at`` (ISO; a date alone is midnight UTC) is before ``cutoff``; a record
    without a date never expires."""
    if not created_at:
        return False
    try:
        t = datetime.fromisoformat(created_at.replace("Z", "+00:00"))
    except ValueError:
        return False
    return (t if t.tzinfo is not None else t.replace(tzinfo=timezone.utc)) < cutoff


def _select(table: pa.Table, match: Any) -> set[str]:
    return {r["record_id"] for r in table.select([c for c in _COLUMNS if c in table.column_names]).to_pylist()
            if match(r)}


def forget_records(root: str | StoreLayout, user_id: str, selector: ForgetSelector, *,
                   conversation_id: str | None = None, redact_turns: bool = False,
                   now: datetime | None = None) -> ForgetReport:
    """Forget the records ``selector`` names among ``user_id``'s conversations (only
    ``conversation_id`` when given) — module doc. Raises :class:`ForgetError` (``kind`` says why;
    nothing is changed then), ``ConversationDeleting`` while an erasure of a conversation in scope
    runs, :class:`NotAStoreError` when ``root`` is not a store."""
    t0 = time.perf_counter()
    kind = selector.kind()
    layout = as_layout(root)
    if not layout.is_store():
        raise NotAStoreError(root.root if isinstance(root, StoreLayout) else root)
    now = now or datetime.now(timezone.utc)
    match = selector.matcher(now)
    with store_lock(layout):
        markers = [m for m in layout.iter_markers()
                   if m.owner == user_id and (conversation_id is None or m.conversation_id == conversation_id)]
        if conversation_id is not None and not markers:
            key = conversation_key(conversation_id)
            if layout.read_marker(key) is None and any(p.exists() for p in layout.conversation_paths(key)):
                raise ForgetError("conversation_building", f"conversation {conversation_id!r} is being built: "
                                                           "nothing is committed yet to forget from")
            raise ForgetError("not_found", f"unknown conversation {conversation_id!r} of user {user_id!r}")
        parts = read_parts(layout, "records", markers)
        hits = sorted(cid for cid, t in parts.items() if _select(t, match))
        if not hits:
            if kind == "record":
                raise ForgetError("not_found", f"unknown record {selector.record_id!r} of user {user_id!r}")
            raise ForgetError("no_records", f"no record of user {user_id!r} matches the {kind} given")
        writer = StoreWriter(layout)
        report = ForgetReport(user_id=user_id, selector=kind, records_removed=0, record_ids=[], conversation_ids=[],
                              nodes_removed=0, nodes_changed=0, turns_redacted=0, files_rewritten=0, seconds=0.0)
        at = now.isoformat()
        for cid in hits:
            with hold_sync(writer, cid) as held:
                m = held.marker()
                if m is None or m.owner != user_id:  # erased (or re-created) meanwhile
                    continue
                data = load_generation(layout, m)
                dead = _select(data.records, match)  # again, under the lock: the commit as it stands
                if not dead:
                    continue
                tables, vectors, removed = without_records(data, dead, redact_turns)
                tombs = read_tombstones(layout, m.key)
                for r in data.records.select(["record_id", "text"]).to_pylist():
                    if r["record_id"] in dead:
                        tombs.add(r["record_id"], r["text"])
                write_tombstones(layout, m.key, tombs)  # first: a commit racing past this lock cannot re-add them
                held.rewrite(m.model_copy(update={"counts": counts_after(m, tables)}), tables, vectors, data.dim,
                             read_segstate(layout, m))
            report.files_rewritten += drop_old_rows(layout, m)
            report.records_removed += removed.records
            report.record_ids += sorted(dead)
            report.conversation_ids.append(cid)
            report.nodes_removed += removed.nodes_removed
            report.nodes_changed += removed.nodes_changed
            report.turns_redacted += len(removed.turns_redacted)
        if not report.records_removed:  # every hit was erased or changed meanwhile
            raise ForgetError("no_records" if kind != "record" else "not_found",
                              f"no record of user {user_id!r} matches the {kind} given")
        log_forget(layout, at, kind, selector.ident(), report.records_removed)
    report.seconds = round(time.perf_counter() - t0, 4)
    return report


__all__ = ["ForgetError", "ForgetErrorKind", "ForgetReport", "ForgetSelector", "SelectorKind", "forget_records"]
