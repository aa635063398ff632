"""The commit marker: the one typed record that makes a conversation's generation visible.

A marker is written last by every commit (``commits/<key>.json``, :mod:`.writer`) and names the
generation whose files readers may trust; compaction and erasure repoint its ``location`` (rows
moved into a shared ``compact-*.parquet`` row group). Every module reads and writes markers through
:class:`CommitMarker` — attributes, never string keys — so its fields are spelled in this file only
(the contract is written out in ``docs/architecture.md``, "The store contract").

Versions: ``version`` 2 markers (this code) always name a generation. Markers without a
``version`` field are version 1 (written by older code); they parse the same way, and a version-1
marker without ``generation`` names the fixed pre-generation paths, which only the migration
(:mod:`.migrate`) still reads. A marker of a newer version than this code knows is refused with
:class:`MarkerError` (``kind="unsupported_version"``) rather than misread.

Lineage: a conversation's first commit stamps a random :attr:`CommitMarker.lineage`;
every later commit, fold, compaction or erasure re-point carries it. An erased and re-created id
gets a new one, so a write that read the erased conversation (a background encoding, a cached
state) can tell, and the writer refuses it (:class:`ConversationReplaced`). Markers written before
lineages have none (``None``, one legacy lineage); the migration or the next commit stamps one.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

# The marker format this code writes (and the newest it reads). 3: delta generations;
# 4: lineage.
MARKER_VERSION = 4
# Markers written before the version field existed.
LEGACY_MARKER_VERSION = 1

MarkerErrorKind = Literal["invalid", "unsupported_version", "needs_migration"]


class MarkerError(ValueError):
    """A commit marker that cannot be used: ``kind`` is ``"invalid"`` (not a marker's JSON or
    fields), ``"unsupported_version"`` (written by newer code) or ``"needs_migration"`` (a
    version-1 marker of the fixed-path scheme: ``lychee-ray migrate``); ``path`` names it when known."""

    def __init__(self, kind: MarkerErrorKind, message: str, path: str | None = None) -> None:
        super().__init__(f"{path}: {message}" if path else message)
        self.kind: MarkerErrorKind = kind
        self.path = path


class ConversationReplaced(RuntimeError):
    """A write built on a commit of a conversation that was erased (and possibly re-created) since:
    the conversation's current lineage is not the one the write read, or it has no commit at all.
    Nothing was written. ``kind`` is ``"conversation_replaced"``; ``conversation_id`` names it."""

    kind: Literal["conversation_replaced"] = "conversation_replaced"

    def __init__(self, conversation_id: str, detail: str) -> None:
        super().__init__(f"conversation {conversation_id!r} was erased or replaced since this write read it "
                         f"({detail}); nothing was written")
        self.conversation_id = conversation_id


def new_lineage() -> str:
    """A fresh lineage id (random: it says nothing about the conversation)."""
    return uuid.uuid4().hex


class _Frozen(BaseModel):
    # strict keys: a misspelled or unknown field is an error, not silently carried along
    model_config = ConfigDict(frozen=True, extra="forbid")


class MarkerCounts(_Frozen):
    """Row counts of the committed generation (``lychee-ray list``, the manifest totals)."""

    turns: int = 0
    segments: int = 0
    failed_segments: int = 0
    records: int = 0
    nodes: int = 0

    def as_dict(self) -> dict[str, int]:
        return self.model_dump()


class TableLocation(_Frozen):
    """Where a compacted table's rows of one conversation live: one row group of a shared file
    (``<table>/compact-*.parquet``) instead of the generation's own part."""

    file: str
    row_group: int = Field(ge=0)


class LastIncrement(_Frozen):
    """What the commit's incremental build or append did (docs/incremental.md)."""

    turns_added: int = 0
    segments_encoded: int = 0
    # why the conversation was re-segmented from scratch (new_speaker, exchange_mode, ...); None: continued
    rebuilt: str | None = None


class BuildInfo(_Frozen):
    """What the pipeline records about how a generation was built (all optional: a store written
    by an older build may lack any of them)."""

    backend: str | None = None
    model: str | None = None
    embedder: str | None = None
    embedding_dim: int | None = None
    # stage -> token kind -> count (llm/usage.py)
    tokens: dict[str, dict[str, int]] = Field(default_factory=dict)
    # stage -> seconds
    timings_s: dict[str, float] = Field(default_factory=dict)
    mean_turns_per_segment: float | None = None
    # the memory checks' report (core/quality.py ``QualityCounts.report()``)
    quality: dict[str, Any] | None = None
    # SHA-256 over the turns' identity columns (core/turn_identity.py turns_digest): an unchanged input at a glance
    turns_digest: str | None = None
    last_increment: LastIncrement | None = None


class CommitMarker(BuildInfo):
    """One conversation's commit marker (``commits/<key>.json``). Immutable: a changed marker is a
    new object (:meth:`with_location`) written whole."""

    version: int = MARKER_VERSION
    conversation_id: str
    # the owner; None: the conversation owns itself (see :attr:`owner`)
    user_id: str | None = None
    key: str
    # the generation whose files this marker publishes (None only in version-1 markers of stores
    # written before generations: fixed paths, read by the migration alone)
    generation: str | None = None
    fingerprint: str | None = None
    committed_at: str
    counts: MarkerCounts = Field(default_factory=MarkerCounts)
    # turns no segment covers yet (an append's open tail)
    open_turns: int = 0
    # table -> compacted row group; tables absent here are read from the generation's own part
    location: dict[str, TableLocation] = Field(default_factory=dict)
    # delta generations applied on top of ``generation`` (the base), oldest first (io/store/deltas.py)
    deltas: list[str] = Field(default_factory=list)
    # rows of the base generation and rows written or deleted by the deltas (the fold bound)
    base_rows: int = 0
    delta_rows: int = 0
    # the generation whose segmenter resume point is current (None: the newest one that wrote one
    # is the base)
    segstate_generation: str | None = None
    # stored turns the segmenter has not reached yet (appends whose segmentation and encoding are
    # queued, ingest/increment/); they are searchable as raw turns meanwhile
    unsegmented_turns: int = 0
    # raised by every commit that changes the segmentation (segments, records, the resume point);
    # not by queued appends or folds. A background encoding commits only if it is unchanged since
    # the state it encoded from (ingest/increment/ catch_up).
    segmentation_epoch: int = 0
    # random id stamped by the conversation's first commit and carried by every later one: an erased
    # and re-created id has a new one (None: written before lineages, see the module doc)
    lineage: str | None = None

    @property
    def owner(self) -> str:
        """The user the conversation belongs to (its own id when it has no user id)."""
        return self.user_id or self.conversation_id

    def with_location(self, locations: dict[str, TableLocation]) -> CommitMarker:
        """This marker with ``locations`` merged into :attr:`location` (compaction, erasure)."""
        return self.model_copy(update={"location": {**self.location, **locations}})

    @property
    def generations(self) -> list[str]:
        """The base generation and its deltas, in the order readers apply them."""
        return ([self.generation] if self.generation is not None else []) + list(self.deltas)

    def same_lineage(self, other: CommitMarker | None) -> bool:
        """True when ``other`` is a commit of the same conversation history as this one: same key and
        lineage (not an erased id's, nor one re-created since)."""
        return other is not None and (other.key, other.lineage) == (self.key, self.lineage)

    def extends(self, older: CommitMarker) -> bool:
        """True when this commit is ``older`` plus delta generations (same lineage, same base, same
        compaction): a reader holding ``older``'s data needs only the deltas after it."""
        return (self.same_lineage(older) and older.generation == self.generation and older.location == self.location
                and self.deltas[: len(older.deltas)] == older.deltas)

    def same_commit(self, other: CommitMarker | None) -> bool:
        """True when ``other`` is this very commit (not one written since)."""
        return other is not None and self.same_lineage(other) and (other.generation, other.committed_at) == (
            self.generation, self.committed_at)

    def same_files(self, other: CommitMarker | None) -> bool:
        """True when ``other`` is this commit with its rows where they were: compaction and erasure
        move a commit's rows (its :attr:`location`) without making a new commit."""
        return self.same_commit(other) and other is not None and other.location == self.location

    # -- JSON ------------------------------------------------------------------------------------
    def to_json(self) -> str:
        """The marker file's text (sorted keys: the same marker is the same bytes)."""
        return json.dumps(self.model_dump(mode="json"), indent=1, sort_keys=True)

    @classmethod
    def from_dict(cls, data: Any, path: str | None = None) -> CommitMarker:
        """A marker from parsed JSON (version 1 without a ``version`` field, or 2);
        :class:`MarkerError` when it is not one this code can use."""
        if not isinstance(data, dict):
            raise MarkerError("invalid", "a commit marker is a JSON object", path)
        version = data.get("version", LEGACY_MARKER_VERSION)
        if not isinstance(version, int) or version > MARKER_VERSION:
            raise MarkerError("unsupported_version", f"commit marker version {version!r}; this code reads up to "
                                                     f"{MARKER_VERSION}", path)
        try:
            return cls.model_validate({**data, "version": version})
        except ValidationError as e:
            raise MarkerError("invalid", f"not a commit marker: {e}", path) from None

    @classmethod
    def from_json(cls, text: str, path: str | None = None) -> CommitMarker:
        """:meth:`from_dict` of a marker file's text (``json.JSONDecodeError`` for text that is not
        JSON at all: a local marker being replaced reads as that for an instant)."""
        return cls.from_dict(json.loads(text), path)


__all__ = ["BuildInfo", "CommitMarker", "ConversationReplaced", "LEGACY_MARKER_VERSION", "LastIncrement", "MARKER_VERSION", "MarkerCounts",
           "MarkerError", "MarkerErrorKind", "TableLocation", "new_lineage"]
