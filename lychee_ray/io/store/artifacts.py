"""What a commit writes, as data: a conversation's whole build artifacts, or a delta of them.

:class:`ConversationArtifacts` is everything one conversation build produces (a full generation);
:class:`ConversationDelta` is what one increment changes (a delta generation, io/store/deltas.py):
per table the rows upserted, the keys deleted and the vectors of the upserted rows. Both are plain
data: the table registry (:mod:`.tables`) reads artifacts, the writer commits either.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa

from lychee_ray.core.passages import PASSAGE_SCHEMA
from lychee_ray.core.records import EvidenceNode, MemoryRecord, SegmentRow
from lychee_ray.io.store.marker import BuildInfo, MarkerCounts


@dataclass
class ConversationArtifacts:
    """Everything one conversation build produces, ready to commit."""

    conversation_id: str
    user_id: str
    records: list[MemoryRecord]
    nodes: list[EvidenceNode]
    turns: pa.Table
    segments: list[SegmentRow]
    usage: pa.Table
    record_vectors: np.ndarray
    node_vectors: np.ndarray
    turn_vectors: np.ndarray
    fingerprint: str
    # Rows of ``nodes`` that have a vector (in node_vectors order); None = every node.
    node_vector_rows: list[int] | None = None
    # how the generation was built: copied into the commit marker
    info: BuildInfo = field(default_factory=BuildInfo)
    # passages of the long turns (core/passages.py; none when every turn fits in one passage) and
    # their vectors, in row order
    passages: pa.Table = field(default_factory=PASSAGE_SCHEMA.empty_table)
    passage_vectors: np.ndarray = field(default_factory=lambda: np.zeros((0, 0), dtype=np.float32))
    # rows and vectors of tables registered beyond the core ones (io/store/tables.py), by table name
    extra_tables: dict[str, pa.Table] = field(default_factory=dict)
    extra_vectors: dict[str, np.ndarray] = field(default_factory=dict)
    # The segmenter's resume point (docs/incremental.md), saved beside the generation; None = none.
    segstate: dict[str, Any] | None = None

    def counts(self) -> MarkerCounts:
        return MarkerCounts(
            turns=self.turns.num_rows,
            segments=len(self.segments),
            failed_segments=sum(s.status == "failed" for s in self.segments),
            records=len(self.records),
            nodes=len(self.nodes),
        )

    def open_turns(self) -> int:
        """Turns no segment covers yet: the open tail an append left (docs/incremental.md)."""
        return self.turns.num_rows - len({t for s in self.segments for t in s.turn_ids})



@dataclass
class TableVectors:
    """A table's vectors: ``rows[i]`` is the table row ``vectors[i]`` belongs to (rows without a
    vector, e.g. small nodes, have none)."""

    rows: np.ndarray  # int64, (k,)
    vectors: np.ndarray  # float32, (k, dim)

    @classmethod
    def empty(cls, dim: int) -> TableVectors:
        return cls(np.zeros(0, dtype=np.int64), np.zeros((0, dim), dtype=np.float32))

    @classmethod
    def of(cls, vectors: np.ndarray, rows: list[int] | None, dim: int) -> TableVectors:
        v = np.asarray(vectors, dtype=np.float32).reshape(-1, dim) if dim else np.zeros((len(vectors), 0), np.float32)
        r = np.arange(len(v), dtype=np.int64) if rows is None else np.asarray(rows, dtype=np.int64)
        return cls(r, v)


@dataclass
class TableDelta:
    """One table's change: ``upserts`` (rows new or replacing the row of the same key), their
    ``vectors`` (indexed tables; rows = positions in ``upserts``) and the keys ``deletes`` removes."""

    upserts: pa.Table
    vectors: TableVectors | None = None
    deletes: list[str] = field(default_factory=list)

    @property
    def rows(self) -> int:
        return self.upserts.num_rows + len(self.deletes)


@dataclass
class ConversationDelta:
    """What one increment of a conversation writes (:meth:`StoreWriter.commit_delta`).

    ``counts`` / ``open_turns`` / ``info`` describe the conversation *after* the delta (they go into
    the marker as a full commit's would); ``segstate`` None keeps the previous resume point."""

    conversation_id: str
    user_id: str
    fingerprint: str
    tables: dict[str, TableDelta]
    counts: MarkerCounts
    open_turns: int
    info: BuildInfo
    dim: int
    segstate: dict[str, Any] | None = None
    unsegmented_turns: int = 0

    @property
    def rows(self) -> int:
        """Rows written or deleted across tables (the fold bound counts these)."""
        return sum(t.rows for t in self.tables.values())


__all__ = ["ConversationArtifacts", "ConversationDelta", "TableDelta", "TableVectors"]
