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
  mentions it in its text (case-insensitive, whole words); a record that mentions it next to other
  facts is rewritten without the clauses naming it rather than removed (ingest/forget_parts.py),
  and the segments' notes (``resolution_state``) lose its name;
* ``expired`` — records of a type ``store.retention_days`` names whose ``created_at`` is older
  than that many days before ``now``.

With ``redact_turns`` the source turns of the removed records lose their text too (their content
becomes ``[forgotten]``), and for an entity every turn naming it loses the clauses that do — also
when no record matches (any more): a forget that finds only such turns redacts them. Without it
the turns stay, as the user's conversation. Nothing matching at all is a :class:`ForgetError`.
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
from lychee_ray.ingest.decide import decide_forget
from lychee_ray.io.store import StoreWriter, conversation_key
from lychee_ray.embed import Embedder
from lychee_ray.ingest.forget_parts import StoreModels, split_matches, turn_edits
from lychee_ray.io.store.artifacts import TableVectors
from lychee_ray.io.store.forget import REDACTED, counts_after, drop_old_rows, log_forget, without_records
from lychee_ray.io.store.layout import NotAStoreError, StoreLayout, as_layout
from lychee_ray.io.store.locks import store_lock
from lychee_ray.io.store.reader import ConversationData, load_generation, read_parts, read_segstate
from lychee_ray.io.store.rewrite import edit_turns, rewrite_records, scrub_segments, scrub_segstate
from lychee_ray.io.store.tombstones import read_tombstones, write_tombstones
from lychee_ray.text.mentions import mention_pattern, redact_mentions, strip_mentions

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
    records_rewritten: int = Field(default=0, description="records that also held other facts: rewritten without "
                                                         "the entity's clauses, under a new id (entity only)")
    rewritten_ids: dict[str, str] = Field(default_factory=dict, description="old id -> new id of each rewritten record")
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

    def is_subject(self, row: dict[str, Any]) -> bool:
        """Whether the record ``row``'s slot is about the entity named (such a record goes whole)."""
        name = " ".join((self.entity or "").split()).casefold()
        return bool(name) and row.get("slot") is not None and slot_subject(parse_slot(row["slot"]) or "") == name


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


def _names(table: pa.Table | None, columns: tuple[str, ...], pattern: re.Pattern[str]) -> bool:
    """Whether any of ``columns`` of ``table`` names the entity."""
    if table is None or not table.num_rows:
        return False
    return any(isinstance(v, str) and pattern.search(v) for c in columns if c in table.column_names
               for v in table.column(c).to_pylist())


def _in_scope(layout: StoreLayout, markers: list[Any], match: Any, pattern: re.Pattern[str] | None,
              redact_turns: bool) -> list[str]:
    """The conversations a forget changes: those with a matching record, and for an entity those
    whose segment notes name it and, with ``redact_turns``, whose turns do."""
    hits = {cid for cid, t in read_parts(layout, "records", markers).items() if _select(t, match)}
    if pattern is not None:
        hits |= {cid for cid, t in read_parts(layout, "segments", markers).items()
                 if _names(t, ("resolution_state", "error"), pattern)}
        if redact_turns:
            hits |= {cid for cid, t in read_parts(layout, "turns", markers).items()
                     if _names(t, ("content", "meta"), pattern)}
    return sorted(hits)


def _empty_report(user_id: str, kind: SelectorKind) -> ForgetReport:
    return ForgetReport(user_id=user_id, selector=kind, records_removed=0, record_ids=[], conversation_ids=[],
                        nodes_removed=0, nodes_changed=0, turns_redacted=0, files_rewritten=0, seconds=0.0)


def _nothing(kind: SelectorKind, selector: ForgetSelector, user_id: str, redact_turns: bool) -> ForgetError:
    if kind == "record":
        return ForgetError("not_found", f"unknown record {selector.record_id!r} of user {user_id!r}")
    what = "no record or turn" if kind == "entity" and redact_turns else "no record"
    return ForgetError("no_records", f"{what} of user {user_id!r} matches the {kind} given")


def forget_records(root: str | StoreLayout, user_id: str, selector: ForgetSelector, *,
                   conversation_id: str | None = None, redact_turns: bool = False,
                   now: datetime | None = None, embedder: Embedder | None = None) -> ForgetReport:
    """Forget the records ``selector`` names among ``user_id``'s conversations (only
    ``conversation_id`` when given) — module doc. ``embedder`` embeds rewritten records and
    redacted turns (default: the models the store's manifest names, loaded when first needed).
    Raises :class:`ForgetError` (``kind`` says why; nothing is changed then),
    ``ConversationDeleting`` while an erasure of a conversation in scope runs,
    :class:`NotAStoreError` when ``root`` is not a store."""
    t0 = time.perf_counter()
    kind = selector.kind()
    layout = as_layout(root)
    if not layout.is_store():
        raise NotAStoreError(root.root if isinstance(root, StoreLayout) else root)
    now = now or datetime.now(timezone.utc)
    match = selector.matcher(now)
    pattern = mention_pattern(selector.entity or "") if kind == "entity" else None
    with store_lock(layout):
        markers = [m for m in layout.iter_markers()
                   if m.owner == user_id and (conversation_id is None or m.conversation_id == conversation_id)]
        if conversation_id is not None and not markers:
            key = conversation_key(conversation_id)
            if layout.read_marker(key) is None and any(p.exists() for p in layout.conversation_paths(key)):
                raise ForgetError("conversation_building", f"conversation {conversation_id!r} is being built: "
                                                           "nothing is committed yet to forget from")
            raise ForgetError("not_found", f"unknown conversation {conversation_id!r} of user {user_id!r}")
        hits = _in_scope(layout, markers, match, pattern, redact_turns)
        if not hits:
            raise _nothing(kind, selector, user_id, redact_turns)
        writer = StoreWriter(layout)
        models = StoreModels.of_manifest(layout.read_manifest(), embedder)
        report = _empty_report(user_id, kind)
        for cid in hits:
            with hold_sync(writer, cid) as held:
                m = held.marker()
                if m is None or not decide_forget(m, user_id):  # erased (or re-created) meanwhile
                    continue
                held.redecide(m)  # stands: this hold decided (a commit refuses without it)
                data = load_generation(layout, m)  # again, under the lock: the commit as it stands
                change = _forget_in(data, read_segstate(layout, m), match, selector.entity if pattern else None,
                                    redact_turns, models, selector.is_subject)
                if change is None:
                    continue
                tables, vectors, segstate, done = change
                if done.forgotten:
                    tombs = read_tombstones(layout, m.key)
                    for r in data.records.select(["record_id", "text"]).to_pylist():
                        if r["record_id"] in done.forgotten:
                            tombs.add(r["record_id"], r["text"])
                    write_tombstones(layout, m.key, tombs)  # first: a commit racing past this lock cannot re-add them
                held.rewrite(m.model_copy(update={"counts": counts_after(m, tables)}), tables, vectors, data.dim,
                             segstate)
            report.files_rewritten += drop_old_rows(layout, m)
            done.add_to(report, cid)
        if not report.conversation_ids:  # every hit was erased or changed meanwhile
            raise _nothing(kind, selector, user_id, redact_turns)
        log_forget(layout, now.isoformat(), kind, selector.ident(), report.records_removed, report.records_rewritten,
                   report.turns_redacted)
    report.seconds = round(time.perf_counter() - t0, 4)
    return report


@dataclass
class _Done:
    """What one conversation's forget changed."""

    removed: set[str]
    rewritten: dict[str, str]  # old id -> new id
    nodes_removed: int
    nodes_changed: int
    turns: list[str]

    @property
    def forgotten(self) -> set[str]:
        """The ids gone from the store (tombstoned): removed and rewritten records' old ids."""
        return self.removed | set(self.rewritten)

    def add_to(self, report: ForgetReport, cid: str) -> None:
        report.records_removed += len(self.removed)
        report.record_ids += sorted(self.removed)
        report.records_rewritten += len(self.rewritten)
        report.rewritten_ids.update(self.rewritten)
        report.conversation_ids.append(cid)
        report.nodes_removed += self.nodes_removed
        report.nodes_changed += self.nodes_changed
        report.turns_redacted += len(self.turns)


def _forget_in(data: ConversationData, segstate: dict[str, Any] | None, match: Any, entity: str | None,
               redact_turns: bool, models: StoreModels, subject_is: Any
               ) -> tuple[dict[str, pa.Table], dict[str, TableVectors], dict[str, Any] | None, _Done] | None:
    """One conversation's tables, vectors and segmenter state after the forget, and what changed
    (None: nothing). ``entity``: the name forgotten, for an entity selector."""
    pattern = mention_pattern(entity) if entity else None
    dead, rewrites = split_matches(data.records, match, pattern, subject_is)
    tables, vectors, removed = without_records(data, dead)
    rewritten = rewrite_records(tables, vectors, rewrites, models.embed_memory)
    scrubbed = scrub_segments(tables, lambda s: strip_mentions(s, pattern) or "") if pattern is not None else 0
    turns: list[str] = []
    before = {r["turn_id"]: r["content"] for r in data.turns.select(["turn_id", "content"]).to_pylist()}
    if redact_turns:
        edits = turn_edits(tables["turns"], pattern, removed.sources, models, data.dim)
        turns = edit_turns(tables, vectors, edits, data.dim)
    if not (dead or rewritten.records or scrubbed or turns):
        return None
    # the segmenter's state keeps the open segment's turn texts and words: they go as the turns' do
    redacted = {before[t]: REDACTED for t in turns if before.get(t)}
    words = {w.casefold() for w in entity.split()} if entity else set()

    def fix(s: str) -> str:
        s = redacted.get(s, s)
        return redact_mentions(s, pattern, REDACTED) if pattern is not None else s

    segstate = scrub_segstate(segstate, fix, lambda w: w.casefold() in words)
    return tables, vectors, segstate, _Done(dead, rewritten.new_ids, removed.nodes_removed + rewritten.nodes_removed,
                                            removed.nodes_changed + rewritten.nodes_changed, turns)


__all__ = ["ForgetError", "ForgetErrorKind", "ForgetReport", "ForgetSelector", "SelectorKind", "forget_records"]
