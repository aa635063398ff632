"""What flows between the steps of a build run: one :class:`StageWork` per input conversation.

A work is either finished (it carries its :class:`~lychee_ray.ingest.outcomes.Outcome`: built,
skipped, failed or duplicate), going back to the decide step (``again``: another writer committed
the conversation after its decision), or on its way: a route and the commit marker the decision
read, then turn vectors, then pending artifacts, then their vectors. Finished works pass through
the later stages untouched, so every input conversation reaches the end as one outcome. Between
processes a work travels as one pickled column (:meth:`to_row` / :func:`from_row`).
"""

from __future__ import annotations

import pickle
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lychee_ray.ingest.outcomes import IncrementMade, Outcome
from lychee_ray.ingest.pipeline import PendingArtifacts
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store.marker import CommitMarker
from lychee_ray.names import BUILD_ROUTE, WriteRoute


# Ray Data columns of a work row (the stages read only WORK_COLUMN; the others are for logs)
WORK_COLUMN = "work"
ID_COLUMN = "conversation_id"
TURNS_COLUMN = "turns"


@dataclass
class StageWork:
    """One input conversation between stages."""

    item: AdapterItem
    # wall-clock start (time.time(): comparable across processes) for the outcome's wall_s
    t0: float = field(default_factory=time.time)
    outcome: Outcome | None = None
    # build: the conversation constructed whole (new, stored with another configuration, --retry-failed,
    # or a rewritten history rebuilt); increment: a stored conversation continued with its new turns
    route: WriteRoute = BUILD_ROUTE
    # the commit marker the decision read (None: not stored); the commit goes ahead only while the
    # conversation's marker is still this one (ingest/commit.py ``commit_decided``)
    marker: CommitMarker | None = None
    warnings: list[str] = field(default_factory=list)
    # build: reuse the stored ok segments' encodings (--retry-failed)
    reuse_encodings: bool = False
    # the turns before this one are stored with their vectors (an increment embeds only the rest)
    first_turn: int = 0
    # another writer committed the conversation after its decision: it goes back to the decide step
    again: bool = False
    turn_vectors: np.ndarray | None = None
    pending: PendingArtifacts | None = None
    embedded: bool = False  # pending's record and node vectors are in
    increment: IncrementMade | None = None  # what an increment added (its outcome reports it)
    placement: str | None = None  # where it was built (the Ray job's node id: the run's placement report)
    # turns credited to each stage so far (the progress display: ingest/stages/turn_report.py)
    passed: dict[str, int] = field(default_factory=dict)

    @property
    def done(self) -> bool:
        """Finished: its outcome is known and the remaining stages pass it through."""
        return self.outcome is not None

    @property
    def conversation_id(self) -> str | None:
        conv = self.item.conversation
        return conv.conversation_id if conv is not None else (self.outcome.conversation_id if self.outcome else None)

    @property
    def num_turns(self) -> int:
        conv = self.item.conversation
        return conv.num_turns if conv is not None else 0

    def fail(self, stage: str, error: BaseException | str) -> Outcome:
        """Quarantine the conversation at ``stage`` (one bad conversation never stops the run); its outcome."""
        self.outcome = Outcome.failed(self.item, self.conversation_id, stage, error, wall_s=self.elapsed(),
                                      warnings=self.warnings)
        self.turn_vectors = None
        self.pending = None
        return self.outcome

    def decide_again(self) -> None:
        """Send the work back to the decide step (what it carries was built on a replaced commit)."""
        self.again = True
        self.turn_vectors = None
        self.pending = None
        self.embedded = False
        self.increment = None

    def elapsed(self) -> float:
        return max(0.0, time.time() - self.t0)

    def to_row(self) -> dict[str, Any]:
        """The work as one Ray Data row."""
        return {WORK_COLUMN: pickle.dumps(self, protocol=pickle.HIGHEST_PROTOCOL),
                ID_COLUMN: self.conversation_id or "", TURNS_COLUMN: self.num_turns}


def from_row(row: dict[str, Any]) -> StageWork:
    """The work a row of :meth:`StageWork.to_row` carries."""
    work = pickle.loads(row[WORK_COLUMN])
    if not isinstance(work, StageWork):
        raise TypeError(f"not a stage work: {type(work).__name__}")
    return work


def rows_to_columns(rows: list[dict[str, Any]], keys: tuple[str, ...]) -> dict[str, list[Any]]:
    """Rows as the column dict a Ray Data batch is (``keys`` when there are no rows)."""
    cols = tuple(rows[0]) if rows else keys
    return {k: [r[k] for r in rows] for k in cols}


def works_to_columns(works: list[StageWork]) -> dict[str, list[Any]]:
    """A batch of works as Ray Data columns."""
    return rows_to_columns([w.to_row() for w in works], (WORK_COLUMN, ID_COLUMN, TURNS_COLUMN))


__all__ = ["ID_COLUMN", "StageWork", "TURNS_COLUMN", "WORK_COLUMN", "from_row",
           "rows_to_columns", "works_to_columns"]
