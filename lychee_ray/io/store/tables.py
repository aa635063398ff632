"""The store's tables: one registry every store module loops over.

Each :class:`TableSpec` says what a table is called (its directory under the store root and its key
in ``ids.json`` / ``location``), its Arrow schema, which part of a conversation's build artifacts
fills it, and whether it has a vector index (a FAISS file per generation, ids = row positions).
The writer, reader, compaction, erasure, the garbage sweep, verification, incremental builds and
cost accounting all ask :func:`table_specs` / :func:`table_names`; none lists tables itself. So a
new table is one :func:`register_table` call plus the build step that puts its rows into
:class:`~lychee_ray.io.store.artifacts.ConversationArtifacts` (``extra_tables`` / ``extra_vectors``
for tables beyond the core ones; ``tests/io/test_store_contract.py`` adds one that way). A table
registered after stores were written is ``optional``: a generation written before it has neither its
part nor its index, and reads as having no rows of it (:mod:`.reader`).
"""

from __future__ import annotations

from dataclasses import dataclass
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from lychee_ray.core.conversation import TURN_SCHEMA
from lychee_ray.core.passages import PASSAGE_SCHEMA
from lychee_ray.core.records import NODE_SCHEMA, RECORD_SCHEMA, SEGMENT_SCHEMA, nodes_table, records_table, segments_table
from lychee_ray.config.store import StoreConfig
from lychee_ray.io.store.artifacts import ConversationArtifacts
from lychee_ray.io.store.index import VectorPrecision


def _every_row(art: ConversationArtifacts) -> list[int] | None:
    return None


@dataclass(frozen=True)
class VectorIndex:
    """A table's FAISS index: ``vectors(art)`` are the vectors of rows ``rows(art)`` (None: every
    row, in order); ``ids.json`` lists the table's ``id_column`` in row order next to it. Stored at
    ``store.vector_precision``, or always at fp32 when ``exact`` (vectors read back for more than
    search: turn vectors, from which an incremental build's segmenter resumes)."""

    id_column: str
    vectors: Callable[[ConversationArtifacts], np.ndarray]
    rows: Callable[[ConversationArtifacts], list[int] | None] = _every_row
    exact: bool = False

    def precision(self, settings: StoreConfig) -> VectorPrecision:
        """The precision this table's vectors are stored at in a store of ``settings``."""
        return "fp32" if self.exact else settings.vector_precision


@dataclass(frozen=True)
class TableSpec:
    """One table of the store."""

    name: str
    # the table's columns (an empty table of a store without conversations has exactly these);
    # None: whatever the artifact brings (usage: llm/usage.py's USAGE_SCHEMA, a layer above io/)
    schema: pa.Schema | None
    # the rows one conversation's build artifacts put in it
    fill: Callable[[ConversationArtifacts], pa.Table]
    index: VectorIndex | None = None
    # loaded by StoreReader.load for serving (usage accounting is not: it only grows the cache)
    serving: bool = True
    # the column a delta generation upserts and deletes rows by (io/store/deltas.py); None: rows
    # are only ever added (a delta's rows follow the earlier ones)
    key: str | None = None
    # columns whose order merged rows are put back in (the order the build writes them in); ()
    # = replaced rows keep their place and new rows follow, which already is the build's order
    sort: tuple[str, ...] = ()
    # added after stores were written: a generation written before it has no part (and no index)
    # of it, and reads as an empty table (io/store/reader.py); every generation written since has one
    optional: bool = False


_CORE = (
    TableSpec("records", RECORD_SCHEMA, lambda a: records_table(a.records),
              VectorIndex("record_id", lambda a: a.record_vectors), key="record_id"),
    TableSpec("nodes", NODE_SCHEMA, lambda a: nodes_table(a.nodes),
              VectorIndex("node_id", lambda a: a.node_vectors, lambda a: a.node_vector_rows), key="node_id",
              sort=("kind", "key")),
    TableSpec("turns", TURN_SCHEMA, lambda a: a.turns.cast(TURN_SCHEMA),
              VectorIndex("turn_id", lambda a: a.turn_vectors, exact=True), key="turn_id"),
    TableSpec("segments", SEGMENT_SCHEMA, lambda a: segments_table(a.segments), key="segment_id"),
    # kept as the ledger wrote it (older stores' usage parts may lack newer columns)
    TableSpec("usage", None, lambda a: a.usage, serving=False),
    # passages of long turns (core/passages.py): stores built before them have none
    TableSpec("passages", PASSAGE_SCHEMA, lambda a: a.passages.cast(PASSAGE_SCHEMA),
              VectorIndex("passage_id", lambda a: a.passage_vectors), key="passage_id", optional=True),
)
CORE_TABLES = tuple(t.name for t in _CORE)

_registry: dict[str, TableSpec] = {t.name: t for t in _CORE}


class TableRegistryError(ValueError):
    """A registration that would break the store: ``kind`` is ``"duplicate"``, ``"core"`` (the
    core tables cannot be removed) or ``"reserved"`` (a name the layout uses for something else)."""

    def __init__(self, kind: str, name: str, message: str) -> None:
        super().__init__(f"table {name!r}: {message}")
        self.kind = kind
        self.name = name


# directories of the store root that are not tables (layout.py), and ids.json's own key
_RESERVED = frozenset({"index", "commits", "errors", "segstate", "manifest", "dim", "_claims", "_locks", "_staging"})


def register_table(spec: TableSpec) -> TableSpec:
    """Add a table to the store; every store module picks it up from then on."""
    if spec.name in _registry:
        raise TableRegistryError("duplicate", spec.name, "already registered")
    if spec.name in _RESERVED or not spec.name.isidentifier():
        raise TableRegistryError("reserved", spec.name, "not a usable table name")
    _registry[spec.name] = spec
    return spec


def unregister_table(name: str) -> None:
    """Remove a table added by :func:`register_table` (tests; stores written with it keep its files)."""
    if name in CORE_TABLES:
        raise TableRegistryError("core", name, "a core table cannot be removed")
    _registry.pop(name, None)


def table_specs() -> tuple[TableSpec, ...]:
    """Every table, in registration order (the core ones first)."""
    return tuple(_registry.values())


def table_names() -> tuple[str, ...]:
    return tuple(_registry)


def table_spec(name: str) -> TableSpec:
    """One table's spec; KeyError for a name no one registered."""
    return _registry[name]


def indexed_tables() -> tuple[TableSpec, ...]:
    """The tables with a vector index (their FAISS files and ``ids.json`` keys)."""
    return tuple(t for t in _registry.values() if t.index is not None)


__all__ = ["CORE_TABLES", "TableRegistryError", "TableSpec", "VectorIndex", "indexed_tables", "register_table",
           "table_names", "table_spec", "table_specs", "unregister_table"]
