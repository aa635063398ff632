"""A committed conversation read back for an increment: its turns, segments, records,
vectors and the segmenter's resume point (typed: :class:`~lychee_ray.ingest.resume_point.ResumePoint`).

Everything is read from the generation one commit marker names (the caller holds the
conversation's write lock, so that generation stays current while it works).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from lychee_ray.ingest.encode.guard import ConversationMemory
from lychee_ray.ingest.increment.node_index import NodeIndex
from lychee_ray.ingest.increment.turn_log import TurnLog
from lychee_ray.ingest.pipeline import KnownVectors
from lychee_ray.ingest.resume_point import ResumePoint
from lychee_ray.ingest.supersede import SlotState
from lychee_ray.config import CurrencyConfig
from lychee_ray.core.conversation import Conversation, Session, Turn
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import MemoryRecord, SegmentRow
from lychee_ray.io.store import StoreLayout
from lychee_ray.io.store.layout import as_layout
from lychee_ray.io.store.artifacts import TableVectors
from lychee_ray.io.store.marker import CommitMarker
from lychee_ray.io.store.reader import ConversationData, load_generation, read_segstate


@dataclass
class StoredConversation:
    """One committed generation of a conversation, as an increment needs it."""

    marker: CommitMarker
    turns: pa.Table
    rows: list[SegmentRow]
    records: list[MemoryRecord]
    usage: pa.Table
    turn_vectors: np.ndarray
    known: KnownVectors = field(default_factory=KnownVectors)
    segstate: ResumePoint | None = None
    # every table as committed (base + deltas merged): what a delta is computed against
    data: ConversationData | None = None
    # kept between increments by an appending process (increment/cache.py StoredCache): the
    # conversation object, the node index (increment/node_index.py) and which generations the state
    # holds (its marker's, minus turn deltas committed by others since it was kept)
    kept_conv: Conversation | None = None
    node_index: NodeIndex | None = None
    applied: set[str] = field(default_factory=set)
    kept_log: TurnLog | None = None  # the stored turns' identities (an append's checks)
    kept_memory: ConversationMemory | None = None  # the record guard's memory of the final segments' records
    kept_slots: SlotState | None = None  # the slots' current records and what people said, after those records
    # the final (not provisional) segments and how many records they have, which open ``records``
    final_segments: set[str] | None = None
    final_records: int | None = None
    final_quality: QualityCounts | None = None  # the memory checks' counts of those segments

    @property
    def conversation_id(self) -> str:
        return self.marker.conversation_id

    @property
    def user_id(self) -> str:
        return self.marker.owner

    @property
    def num_turns(self) -> int:
        return self.turns.num_rows

    @property
    def segmented_turns(self) -> int:
        """Turns the segmenter has consumed (the rest were appended with their segmentation queued)."""
        return self.num_turns - self.marker.unsegmented_turns

    def turn_rows(self) -> list[dict[str, Any]]:
        return self.turns.to_pylist()

    def records_of(self, segment_ids: set[str]) -> list[MemoryRecord]:
        """The stored records of these segments, in stored order."""
        return [r for r in self.records if r.segment_id in segment_ids]

    def conversation(self) -> Conversation:
        """The stored turns as a conversation (session positions kept: a session index no turn has,
        e.g. an empty session of the original input, becomes an empty placeholder session). Built
        once and kept; each call returns a new conversation whose last session is a copy, so the
        caller may add turns to it (earlier sessions are shared and must not be changed)."""
        if self.kept_conv is None:
            self.kept_conv = self._build_conversation()
        sessions = list(self.kept_conv.sessions)
        if sessions:
            sessions[-1] = sessions[-1].model_copy(update={"turns": list(sessions[-1].turns)})
        # model_construct: the kept conversation was validated when it was built or grown
        return Conversation.model_construct(conversation_id=self.conversation_id, user_id=self.user_id,
                                            sessions=sessions, meta={})

    def final_memory(self, final_records: list[MemoryRecord]) -> ConversationMemory:
        """The record guard's memory of the final segments' records (``final_records``, in order),
        built once and kept for the increments that follow."""
        if self.kept_memory is None:
            self.kept_memory = ConversationMemory()
            self.kept_memory.accept(final_records)
        return self.kept_memory

    def final_slots(self, final_records: list[MemoryRecord], conv: Conversation, cfg: CurrencyConfig) -> SlotState:
        """The slot state after the final segments' records (``final_records``, in order; the
        speakers heard from ``conv``), built once and kept for the increments that follow."""
        if self.kept_slots is None:
            self.kept_slots = SlotState.after(final_records, conv, cfg)
        return self.kept_slots

    def turn_log(self) -> TurnLog:
        """The stored turns' identities (:class:`~lychee_ray.ingest.increment.turn_log.TurnLog`), built once and kept."""
        if self.kept_log is None:
            self.kept_log = TurnLog(self.marker)
            self.kept_log.add(self.turn_rows())
        return self.kept_log

    def add_turns(self, rows: list[dict[str, Any]], vectors: np.ndarray, marker: CommitMarker, generation: str) -> None:
        """Take turns another commit appended (a queued append's delta ``generation``) into this
        kept state, in place; ``marker`` is the commit that now describes it."""
        self.turns = pa.concat_tables([self.turns, pa.Table.from_pylist(rows, schema=self.turns.schema)])
        self.turn_vectors = np.concatenate([self.turn_vectors, np.asarray(vectors, dtype=np.float32)])
        if self.kept_conv is not None:
            sessions = self.kept_conv.sessions
            for r in rows:
                if not sessions or sessions[-1].session_id != r["session_id"]:
                    sessions.append(Session(session_id=r["session_id"], started_at=r["session_started_at"]))
                sessions[-1].turns.append(_turn(r))
        if self.node_index is not None:
            self.node_index.add_turns(r["turn_id"] for r in rows)
        if self.kept_log is not None:
            self.kept_log.add(rows)
        self.marker = marker
        self.applied.add(generation)

    def add_passages(self, rows: pa.Table, vectors: TableVectors) -> None:
        """Take in the passages (and their vectors) of turns another commit appended (:meth:`add_turns`):
        known again by id and span when the conversation's artifacts are assembled whole."""
        keys = list(zip(rows.column("passage_id").to_pylist(), rows.column("char_start").to_pylist(),
                        rows.column("char_end").to_pylist(), strict=False))
        for i, v in zip(vectors.rows.tolist(), vectors.vectors, strict=False):
            self.known.passages[keys[i]] = v

    def _build_conversation(self) -> Conversation:
        sessions: dict[int, Session] = {}
        for r in self.turn_rows():
            s = sessions.get(r["session_index"])
            if s is None:
                s = sessions[r["session_index"]] = Session(session_id=r["session_id"], started_at=r["session_started_at"])
            s.turns.append(_turn(r))
        ordered = [sessions.get(i) or Session(session_id=f"(empty session {i})") for i in range(max(sessions, default=-1) + 1)]
        return Conversation(conversation_id=self.conversation_id, user_id=self.user_id, sessions=ordered)


def _turn(r: dict[str, Any]) -> Turn:
    """A turns-table row as a :class:`Turn`."""
    return Turn.from_row(r)


def load_stored(root: str | Path | StoreLayout, marker: CommitMarker,
                previous: ConversationData | None = None) -> StoredConversation:
    """Read the generation ``marker`` names (own parts or compacted row groups, deltas, indexes,
    segmenter state); ``previous``: the conversation as this process read it before (only the
    deltas committed since are read, see :func:`~lychee_ray.io.store.reader.load_generation`)."""
    layout = as_layout(root)
    data = load_generation(layout, marker, previous=previous)  # every table, its indexes (io/store/reader.py)
    tables, idx = data.tables, data.indexes
    records = [MemoryRecord.from_row(r) for r in tables["records"].to_pylist()]
    rows = sorted((SegmentRow.model_validate(r) for r in tables["segments"].to_pylist()), key=lambda r: r.index)
    n_turns = tables["turns"].num_rows
    dim = idx["turns"].d
    tv = data.table_vectors("turns")
    turn_vectors = np.zeros((n_turns, dim), dtype=np.float32)
    turn_vectors[tv.rows] = tv.vectors
    node_keys = list(zip(tables["nodes"].column("node_id").to_pylist(), tables["nodes"].column("text").to_pylist(), strict=False))
    rv, nv, pv = data.table_vectors("records"), data.table_vectors("nodes"), data.table_vectors("passages")
    pas = tables["passages"]
    passage_keys = list(zip(pas.column("passage_id").to_pylist(), pas.column("char_start").to_pylist(),
                            pas.column("char_end").to_pylist(), strict=False))
    known = KnownVectors(
        records={records[int(i)].record_id: v for i, v in zip(rv.rows, rv.vectors, strict=False) if 0 <= i < len(records)},
        nodes={node_keys[int(i)]: v for i, v in zip(nv.rows, nv.vectors, strict=False) if 0 <= i < len(node_keys)},
        passages={passage_keys[int(i)]: v for i, v in zip(pv.rows, pv.vectors, strict=False) if 0 <= i < len(passage_keys)},
    )
    return StoredConversation(marker=marker, turns=tables["turns"], rows=rows, records=records, usage=tables["usage"],
                              turn_vectors=turn_vectors, known=known, segstate=ResumePoint.read(read_segstate(layout, marker)), data=data,
                              applied=set(marker.generations))


__all__ = ["StoredConversation", "load_stored"]
