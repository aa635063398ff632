"""Reading a store: visible conversations (by commit marker), one conversation at a time."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from lychee_ray.core.records import ERROR_SCHEMA
from lychee_ray.io.store.fs import parquet_file, read_parquet, sorted_entries
from lychee_ray.io.store.remote_path import StorePath
from lychee_ray.io.store.artifacts import TableDelta, TableVectors
from lychee_ray.io.store.deltas import MergedTable, apply_delta, read_delta_manifest
from lychee_ray.io.store.index import build_flat_index, read_index, stored_vectors
from lychee_ray.config.store import StoreConfig
from lychee_ray.io.store.marker import CommitMarker
from lychee_ray.io.store.layout import NotAStoreError, StoreLayout, as_layout, conversation_key
from lychee_ray.io.store.tables import indexed_tables, table_names, table_spec, table_specs


def read_part(root: str | Path | StorePath | StoreLayout, table: str, marker: CommitMarker,
              columns: list[str] | None = None) -> pa.Table:
    """One conversation's rows of ``table`` as its commit stands: its base part (or its row group in
    a compacted file) with the marker's delta generations applied (no vectors read)."""
    layout = as_layout(root)
    if not marker.deltas:
        return read_base_part(layout, table, marker, columns)
    cur = MergedTable(read_base_part(layout, table, marker))
    for gen in marker.deltas:
        d = read_delta(layout, marker.key, gen, [table], 0, vectors=False).get(table)
        if d is not None:
            cur = apply_delta(table, cur, d)
    return cur.table.select(columns) if columns else cur.table


def read_parts(root: str | Path | StorePath | StoreLayout, table: str, markers: Iterable[CommitMarker],
               columns: list[str] | None = None) -> dict[str, pa.Table]:
    """Many conversations' rows of ``table``, each as :func:`read_part` reads it, by conversation id:
    those whose rows sit in one compacted file are read in one call per file (its row groups
    together, then split), the others one by one. A conversation whose rows cannot be read now (a
    compaction moved them meanwhile) is left out; asking again reads it from where its marker points."""
    layout = as_layout(root)
    out: dict[str, pa.Table] = {}
    by_file: dict[str, list[CommitMarker]] = {}
    for m in markers:
        loc = m.location.get(table)
        if loc is not None and not m.deltas:
            by_file.setdefault(loc.file, []).append(m)
            continue
        try:
            out[m.conversation_id] = read_part(layout, table, m, columns)
        except (OSError, KeyError, ValueError):
            continue
    for file, ms in by_file.items():
        ms.sort(key=lambda m: m.location[table].row_group)
        groups = [m.location[table].row_group for m in ms]
        try:
            pf = parquet_file(layout.table_dir(table) / file)
            sizes = [pf.metadata.row_group(g).num_rows for g in groups]
            whole = pf.read_row_groups(groups, columns=columns)
        except (OSError, KeyError, ValueError, IndexError):
            continue
        start = 0
        for m, n in zip(ms, sizes, strict=True):
            out[m.conversation_id] = conform_part(table, whole.slice(start, n), columns)
            start += n
    return out


def read_base_part(root: str | Path | StorePath | StoreLayout, table: str, marker: CommitMarker,
                   columns: list[str] | None = None) -> pa.Table:
    """The base generation's rows of ``table``: its own part, or its row group in a compacted file
    (:func:`conform_part`: with the columns it predates as nulls)."""
    layout = as_layout(root)
    loc = marker.location.get(table)
    if loc is None:
        path = layout.marker_part_path(table, marker)
        try:
            part = read_parquet(path, columns=columns)
        except pa.ArrowInvalid:
            if columns is None:
                raise
            part = read_parquet(path)  # a column asked for that the part predates: filled below
        except FileNotFoundError:
            if not predates_table(layout, table, marker):
                raise
            schema = table_spec(table).schema
            assert schema is not None  # an optional table has a schema (its empty table)
            part = schema.empty_table()
    else:  # (a row group read skips asked-for columns it lacks)
        part = parquet_file(layout.table_dir(table) / loc.file).read_row_group(loc.row_group, columns=columns)
    return conform_part(table, part, columns)


def predates_table(layout: StoreLayout, table: str, marker: CommitMarker) -> bool:
    """Whether the base generation ``marker`` names was written before ``table`` was registered:
    the table is optional (io/store/tables.py), and the generation's index directory is there but
    holds no index of it (a generation replaced meanwhile has no index directory either: that is a
    missing file, not an older store)."""
    spec = table_spec(table)
    if not spec.optional or spec.index is None:
        return False
    idx_dir = layout.marker_index_dir(marker)
    return layout.ids_file(idx_dir).exists() and not layout.index_file(idx_dir, table).exists()


def conform_part(table: str, part: pa.Table, columns: list[str] | None = None) -> pa.Table:
    """A stored part of ``table`` with the nullable columns of the table's schema (io/store/tables.py)
    it lacks added as nulls, in schema order: a part written before a column existed (a new record
    field) reads like one written after, so merging deltas, appends and compaction see one schema.
    The one place parts are brought up to the current schema (every part is read through
    :func:`read_base_part` or :func:`read_delta`). ``columns``: only these (in this order). A part
    that lacks nothing is returned as it is."""
    schema = table_spec(table).schema
    have = set(part.column_names)
    if schema is None or all(f.name in have or not f.nullable or (columns is not None and f.name not in columns)
                             for f in schema):
        return part
    fields, arrays = [], []
    for f in schema:
        if f.name in have:
            fields.append(part.schema.field(f.name))
            arrays.append(part.column(f.name))
        elif f.nullable:
            fields.append(f)
            arrays.append(pa.chunked_array([pa.nulls(part.num_rows, f.type)], type=f.type))
    known = set(schema.names)
    for f in part.schema:  # columns the schema no longer has stay, after its own
        if f.name not in known:
            fields.append(f)
            arrays.append(part.column(f.name))
    full = pa.Table.from_arrays(arrays, schema=pa.schema(fields, metadata=part.schema.metadata))
    return full if columns is None else full.select(columns)


def read_segstate(root: str | Path | StorePath | StoreLayout, marker: CommitMarker) -> dict[str, Any] | None:
    """The segmenter resume point saved with the marker's generation (None when it has none:
    stores written before incremental builds, or a generation committed without one)."""
    path = as_layout(root).marker_segstate_path(marker)
    if path is None:
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None


def conversation_bytes(layout: StoreLayout, marker: CommitMarker, tables: Iterable[str] | None = None,
                       indexes: Iterable[str] | None = None) -> int:
    """On-disk bytes of one conversation (cost accounting): its Parquet parts of ``tables`` (all
    tables by default; compressed row groups when compacted) + its index files (``indexes`` by
    stem, all by default)."""
    total = 0
    for t in table_names() if tables is None else tables:
        loc = marker.location.get(t)
        if loc is not None:
            try:
                rg = parquet_file(layout.table_dir(t) / loc.file).metadata.row_group(loc.row_group)
                total += sum(rg.column(i).total_compressed_size for i in range(rg.num_columns))
            except (OSError, IndexError):
                pass
        else:
            p = layout.marker_part_path(t, marker)
            total += p.stat().st_size if p.exists() else 0
    names = set(table_names() if tables is None else tables)
    for gen in marker.deltas:  # delta generations: their own parts
        for t in names:
            p = layout.part_path(t, marker.key, gen)
            total += p.stat().st_size if p.exists() else 0
    wanted = None if indexes is None else set(indexes)
    for gen in marker.generations:
        idx = layout.index_dir(marker.key, gen)
        if idx.is_dir():
            for f in idx.iterdir():
                if (wanted is None and f.name != "delta.json") or (wanted is not None and f.stem in wanted):
                    total += f.stat().st_size
    return total


@dataclass
class ConversationData:
    """One committed generation of a conversation: its tables and vector indexes by table name
    (io/store/tables.py), with the core ones also as attributes for the query path."""

    conversation_id: str
    user_id: str
    tables: dict[str, pa.Table]
    indexes: dict[str, Any]
    # ids.json: each indexed table's ids in row order, and the shared "dim"
    ids: dict[str, Any]
    marker: CommitMarker | None = None
    # indexed tables' vectors by row, once read back from the indexes (merging deltas needs them)
    vectors: dict[str, TableVectors] = field(default_factory=dict)

    def table_vectors(self, name: str) -> TableVectors:
        """An indexed table's vectors by row (read back from its index once, then kept)."""
        v = self.vectors.get(name)
        if v is None:
            rows, vecs = stored_vectors(self.indexes[name])
            v = self.vectors[name] = TableVectors(rows, vecs)
        return v

    @property
    def records(self) -> pa.Table:
        return self.tables["records"]

    @property
    def nodes(self) -> pa.Table:
        return self.tables["nodes"]

    @property
    def turns(self) -> pa.Table:
        return self.tables["turns"]

    @property
    def segments(self) -> pa.Table:
        return self.tables["segments"]

    @property
    def record_index(self) -> Any:
        return self.indexes["records"]

    @property
    def node_index(self) -> Any:
        return self.indexes["nodes"]

    @property
    def turn_index(self) -> Any:
        return self.indexes["turns"]

    @property
    def dim(self) -> int:
        return int(self.ids["dim"])

    def nbytes(self) -> int:
        """Approximate resident size (tables + flat index vectors)."""
        vec = 4 * self.dim * sum(self.tables[name].num_rows for name in self.indexes if name in self.tables)
        return sum(t.nbytes for t in self.tables.values()) + vec


def load_generation(root: str | Path | StorePath | StoreLayout, marker: CommitMarker,
                    tables: Iterable[str] | None = None, previous: ConversationData | None = None) -> ConversationData:
    """Read the generations ``marker`` names: the base's ``tables`` (default: every registered
    table), every vector index and ``ids.json``, then each delta generation applied in order
    (io/store/deltas.py). The one place that opens a generation's files; the serving reader
    (:meth:`StoreReader.load`) and incremental builds (ingest/increment/stored.py) both use it.

    ``previous``: data this process already loaded for an earlier commit of the conversation; when
    ``marker`` only adds deltas to it, just those are read and applied (an append costs a reader
    its delta, not the conversation). OSError (or faiss's RuntimeError) when a file is gone, e.g.
    replaced by a newer commit."""
    layout = as_layout(root)
    names = table_names() if tables is None else tuple(tables)
    if previous is not None and _extends(previous, marker, names):
        data, todo = previous, marker.deltas[len(previous.marker.deltas):]  # type: ignore[union-attr]  # _extends: both have deltas
    else:
        data, todo = _read_base(layout, marker, names), marker.deltas
    if not todo:
        return data if data.marker is marker else dataclasses.replace(data, marker=marker)
    dim = data.dim
    merged = {n: MergedTable(data.tables[n], data.table_vectors(n) if n in data.indexes else None) for n in names}
    before = dict(merged)
    for gen in todo:
        for name, delta in read_delta(layout, marker.key, gen, names, dim).items():
            merged[name] = apply_delta(name, merged[name], delta)
    # a table no delta changed keeps its objects (and its index): readers tell what changed by them
    changed = {n for n in names if merged[n] is not before[n]}
    out_tables = {n: m.table for n, m in merged.items()}
    vectors = {n: m.vectors for n, m in merged.items() if m.vectors is not None}
    indexes = {n: build_flat_index(v.vectors, dim, v.rows.tolist()) if n in changed or n not in data.indexes
               else data.indexes[n] for n, v in vectors.items()}
    ids: dict[str, Any] = {"dim": dim}
    for s in indexed_tables():
        if s.name in out_tables:
            ids[s.name] = (out_tables[s.name].column(s.index.id_column).to_pylist()  # type: ignore[union-attr]  # indexed_tables(): index set
                           if s.name in changed or s.name not in data.ids else data.ids[s.name])
    return ConversationData(conversation_id=marker.conversation_id, user_id=marker.owner, tables=out_tables,
                            indexes=indexes, ids=ids, marker=marker, vectors=vectors)


def _extends(previous: ConversationData, marker: CommitMarker, names: tuple[str, ...]) -> bool:
    """True when ``marker`` is ``previous``'s commit plus deltas (same base, same compaction)."""
    return (previous.marker is not None and marker.extends(previous.marker)
            and all(n in previous.tables for n in names))


def _read_base(layout: StoreLayout, marker: CommitMarker, names: tuple[str, ...]) -> ConversationData:
    idx_dir = layout.marker_index_dir(marker)
    ids = json.loads(layout.ids_file(idx_dir).read_text(encoding="utf-8"))
    indexes: dict[str, Any] = {}
    for s in indexed_tables():
        if s.optional and s.name not in ids and not layout.index_file(idx_dir, s.name).exists():
            # a generation written before the table: no rows, an empty index (verify and folds see one)
            indexes[s.name], ids[s.name] = build_flat_index(np.zeros((0, 0), np.float32), int(ids.get("dim", 0))), []
        else:
            indexes[s.name] = read_index(layout.index_file(idx_dir, s.name))
    return ConversationData(
        conversation_id=marker.conversation_id,
        user_id=marker.owner,
        tables={name: read_base_part(layout, name, marker) for name in names},
        indexes=indexes,
        ids=ids,
        marker=marker,
    )


def read_delta(layout: StoreLayout, key: str, generation: str, names: Iterable[str], dim: int,
               vectors: bool = True) -> dict[str, TableDelta]:
    """The changes one delta generation makes to ``names`` (tables it has no part for: deletes
    only); ``vectors`` False skips reading its indexes."""
    idx_dir = layout.index_dir(key, generation)
    doc = read_delta_manifest(idx_dir)
    out: dict[str, TableDelta] = {}
    for name in names:
        n_rows = int(doc["tables"].get(name, 0))
        deletes = list(doc.get("deletes", {}).get(name, []))
        if not n_rows and not deletes:
            continue
        spec = table_spec(name)
        upserts = conform_part(name, read_parquet(layout.part_path(name, key, generation))) if n_rows else (
            spec.schema.empty_table() if spec.schema is not None else pa.table({}))
        vecs = None
        if vectors and spec.index is not None and n_rows:
            rows, v = stored_vectors(read_index(layout.index_file(idx_dir, name)))
            vecs = TableVectors(rows, v.reshape(-1, dim) if dim else v)
        out[name] = TableDelta(upserts, vecs, deletes)
    return out


class StoreReader:
    """Read side of a store: the manifest, the visible conversations, one conversation at a time."""

    def __init__(self, root: str | Path | StorePath | StoreLayout, settings: StoreConfig | None = None) -> None:
        """``settings``: the ``store`` config section (see :class:`StoreLayout`)."""
        self.layout = as_layout(root, settings)
        self.root = self.layout.root
        if not self.layout.is_store():
            raise NotAStoreError(self.root)
        self.refresh()

    def refresh(self) -> None:
        """Re-scan commit markers (picks up conversations added by a later build)."""
        # Built aside and swapped in whole: threads querying meanwhile never see a half-built map.
        markers = {m.conversation_id: m for m in self.layout.iter_markers()}
        by_user: dict[str, list[str]] = {}
        for cid, m in markers.items():
            by_user.setdefault(m.owner, []).append(cid)
        self.markers: dict[str, CommitMarker] = markers
        self.by_user: dict[str, list[str]] = by_user

    def refresh_conversation(self, conversation_id: str) -> CommitMarker | None:
        """Re-read one conversation's commit marker (after this process committed it: cheaper than
        :meth:`refresh`); returns it, or None when the conversation is not committed."""
        m = self.layout.read_marker(conversation_key(conversation_id))
        markers, by_user = dict(self.markers), {u: list(c) for u, c in self.by_user.items()}
        old = markers.pop(conversation_id, None)
        if old is not None:
            by_user[old.owner].remove(conversation_id)
        if m is not None:
            markers[conversation_id] = m
            by_user.setdefault(m.owner, []).append(conversation_id)
        self.markers, self.by_user = markers, {u: c for u, c in by_user.items() if c}
        return m

    @property
    def manifest(self) -> dict[str, Any]:
        return self.layout.read_manifest()

    def conversation_ids(self) -> list[str]:
        return sorted(self.markers)

    def load(self, conversation_id: str, previous: ConversationData | None = None,
             tables: Iterable[str] | None = None) -> ConversationData:
        """Open one conversation's tables and indexes; KeyError when it is not committed.

        Everything comes from the generation one marker names. When a file of it is gone (a newer
        commit replaced that generation after this reader read the marker), the marker is read
        again and the load repeated on the newer generation; a file missing from the current
        generation is an error. ``previous``: this conversation as loaded before (see
        :func:`load_generation`: only deltas committed since are read). ``tables``: only these
        (default: every serving table).
        """
        m = self.markers.get(conversation_id)
        if m is None:
            raise KeyError(conversation_id)
        while True:
            try:
                if tables is not None:
                    return self.load_generation(m, tables, previous)
                return self._load(conversation_id, m, previous)
            except (OSError, RuntimeError):  # RuntimeError: faiss cannot open a missing index file
                fresh = self.layout.read_marker(m.key)
                if fresh is None or m.same_files(fresh):  # a compaction moving the rows is worth a retry
                    raise
                self.markers = {**self.markers, conversation_id: fresh}
                m = fresh

    def changed_tables(self, conversation_id: str, since: ConversationData) -> set[str] | None:
        """Tables the deltas committed after ``since`` change (rows or deletes), read from their
        small ``delta.json`` files; None when the current commit is not ``since``'s plus deltas (or
        a delta is gone: folded meanwhile), i.e. when anything may have changed."""
        m = self.markers.get(conversation_id)
        if m is None or since.marker is None or not m.extends(since.marker):
            return None
        names: set[str] = set()
        try:
            for gen in m.deltas[len(since.marker.deltas):]:
                doc = read_delta_manifest(self.layout.index_dir(m.key, gen))
                names.update(n for n, rows in doc["tables"].items() if rows)
                names.update(n for n, keys in doc.get("deletes", {}).items() if keys)
        except OSError:
            return None
        return names

    def _load(self, conversation_id: str, m: CommitMarker, previous: ConversationData | None = None) -> ConversationData:
        return self.load_generation(m, [s.name for s in table_specs() if s.serving], previous)

    def load_generation(self, marker: CommitMarker, tables: Iterable[str] | None = None,
                        previous: ConversationData | None = None) -> ConversationData:
        """The generation ``marker`` names (:func:`load_generation`), without the retry of :meth:`load`."""
        return load_generation(self.layout, marker, tables, previous)

    def read_table(self, name: str) -> pa.Table:
        """A whole table across visible conversations (for reports and checks, not for serving)."""
        parts = [read_part(self.layout, name, m) for m in self.markers.values()]
        schema = table_spec(name).schema
        if not parts:
            return schema.empty_table() if schema is not None else pa.table({})
        return pa.concat_tables(parts)

    def errors(self) -> pa.Table:
        files = sorted_entries(self.layout.errors_dir, "*.parquet")
        return pa.concat_tables([read_parquet(f) for f in files]) if files else ERROR_SCHEMA.empty_table()
