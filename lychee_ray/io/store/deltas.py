"""Delta generations: a commit that writes only what changed (docs/architecture.md).

A conversation's commit marker names a *base* generation (every table, written whole) and, after
it, zero or more *delta* generations, oldest first. A delta holds, per table, the rows that are new
or replaced (upserted by the table's key column, :attr:`TableSpec.key`), the ids it deletes, and
the vectors of its upserted rows; keyless tables (usage) only grow. So an append that adds one turn
writes one turn row, one vector and the segmenter's resume point — not the conversation.

Files of a delta generation sit where a base generation's would (``<table>/<key>.<gen>.parquet``,
``index/<key>/<gen>/``, ``segstate/<key>.<gen>.json``), plus ``index/<key>/<gen>/delta.json``
naming the tables it has parts for and its deletes. The commit protocol is unchanged: files first,
marker last; a reader that read a marker reads exactly its base and deltas.

Readers merge base + deltas in order (:func:`apply_delta`): a replaced row keeps its position, new
rows follow, deleted rows go, and a table with :attr:`TableSpec.sort` is re-sorted, so the merged
tables are the ones a full rewrite would hold. When the deltas pass a bound
(``appends.delta_max_count``, or ``appends.delta_fold_ratio`` × the base's rows) the writer *folds*
them: the merged state becomes a new base generation (:meth:`StoreWriter.fold`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lychee_ray.io.store.artifacts import TableDelta, TableVectors
from lychee_ray.io.store.fs import AnyPath
from lychee_ray.io.store.tables import table_spec


def delta_file(index_dir: AnyPath) -> AnyPath:
    """``delta.json`` of a delta generation's index directory (absent in a base generation)."""
    return index_dir / "delta.json"


def write_delta_manifest(index_dir: AnyPath, tables: dict[str, TableDelta], dim: int) -> None:
    """Which tables the delta has parts for (by row count) and what it deletes."""
    doc = {"dim": dim, "tables": {n: t.upserts.num_rows for n, t in tables.items()},
           "deletes": {n: list(t.deletes) for n, t in tables.items() if t.deletes}}
    delta_file(index_dir).write_text(json.dumps(doc), encoding="utf-8")


def read_delta_manifest(index_dir: AnyPath) -> dict[str, Any]:
    """The ``delta.json`` of a delta generation (FileNotFoundError when it is gone)."""
    return json.loads(delta_file(index_dir).read_text(encoding="utf-8"))


@dataclass
class MergedTable:
    """A table as merged so far, with its vectors (None: the table has no index)."""

    table: pa.Table
    vectors: TableVectors | None = None


def apply_delta(name: str, current: MergedTable, delta: TableDelta) -> MergedTable:
    """``current`` with ``delta`` applied: replaced rows keep their place, new rows are appended,
    deleted rows dropped, then the table's :attr:`TableSpec.sort` order is restored. Vectors follow
    their rows."""
    spec = table_spec(name)
    up = delta.upserts
    if spec.key is None:  # append-only (usage)
        if up.num_rows == 0:
            return current
        table = pa.concat_tables([current.table, up.cast(current.table.schema)]) if current.table.num_rows else up
        return MergedTable(table, _stack(current.vectors, delta.vectors, current.table.num_rows))
    if up.num_rows == 0 and not delta.deletes:
        return current
    schema = current.table.schema
    n_base = current.table.num_rows
    order = _merge_order(current.table.column(spec.key), up.column(spec.key).combine_chunks()
                         if up.num_rows else pa.array([], type=schema.field(spec.key).type), delta.deletes)
    both = pa.concat_tables([current.table, up.cast(schema) if up.num_rows else schema.empty_table()])
    if not spec.sort and np.array_equal(order, np.arange(n_base + up.num_rows)):
        # only new rows (an append's turns): they follow, nothing moves, nothing is copied
        return MergedTable(both, _stack(current.vectors, delta.vectors, n_base)
                           if current.vectors is not None or delta.vectors is not None else None)
    if spec.sort and len(order):
        merged = both.take(pa.array(order))
        # Arrow's sort is stable and orders strings by their UTF-8 bytes, i.e. by code point
        perm = pc.sort_indices(merged.select(list(spec.sort)), sort_keys=[(c, "ascending") for c in spec.sort])
        order = order[perm.to_numpy()]
    table = both.take(pa.array(order)) if len(order) else both.slice(0, 0)
    vecs = None
    if current.vectors is not None or delta.vectors is not None:
        allv = _stack(current.vectors, delta.vectors, n_base)
        assert allv is not None
        where = np.full(n_base + up.num_rows, -1, dtype=np.int64)  # concat row -> its vector, if any
        where[allv.rows] = np.arange(len(allv.rows))
        picked = where[order] if len(order) else np.zeros(0, dtype=np.int64)
        has = picked >= 0
        vecs = TableVectors(np.nonzero(has)[0].astype(np.int64), allv.vectors[picked[has]])
    return MergedTable(table, vecs)


def _merge_order(base_keys: pa.ChunkedArray, new_keys: pa.Array, deletes: list[str]) -> np.ndarray:
    """Rows of ``concat(base, upserts)`` in merged order: each base row in place, as its upsert
    when one has its key (a replacement wins over a delete), dropped when deleted; then the upserts
    whose key is new, in their order. Computed with Arrow kernels (a table of a 10,000-turn
    conversation has tens of thousands of rows)."""
    n_base = len(base_keys)
    if len(new_keys) != pc.count_distinct(new_keys).as_py():  # no writer does this; merged as always
        return _merge_order_rows(base_keys.to_pylist(), new_keys.to_pylist(), deletes)
    base_pos = np.arange(n_base, dtype=np.int64)
    if len(new_keys):
        idx = pc.index_in(base_keys, value_set=new_keys).fill_null(-1).to_numpy().astype(np.int64)
    else:
        idx = np.full(n_base, -1, dtype=np.int64)
    if deletes:
        dropped = pc.is_in(base_keys, value_set=pa.array(deletes, type=base_keys.type)).to_numpy(zero_copy_only=False)
    else:
        dropped = np.zeros(n_base, dtype=bool)
    replaced = idx >= 0
    kept = np.where(replaced, n_base + idx, base_pos)[replaced | ~dropped]
    if not len(new_keys):
        return kept
    known = pc.is_in(new_keys, value_set=base_keys.combine_chunks() if n_base else pa.array([], type=new_keys.type))
    fresh = n_base + np.nonzero(~known.to_numpy(zero_copy_only=False))[0].astype(np.int64)
    return np.concatenate([kept, fresh])


def _merge_order_rows(base_ids: list[Any], new_ids: list[Any], deletes: list[str]) -> np.ndarray:
    """:func:`_merge_order` row by row, for upserts that repeat a key (the last one replaces)."""
    replace = {k: i for i, k in enumerate(new_ids)}
    dropped = set(deletes)
    n_base = len(base_ids)
    take: list[int] = []
    for i, k in enumerate(base_ids):
        if k in replace:
            take.append(n_base + replace.pop(k))
        elif k not in dropped:
            take.append(i)
    seen = set(base_ids)
    take += [n_base + i for i, k in enumerate(new_ids) if k not in seen]
    return np.asarray(take, dtype=np.int64)


def _stack(a: TableVectors | None, b: TableVectors | None, offset: int) -> TableVectors | None:
    """Vectors of ``concat(table_a, table_b)`` (``b``'s rows shifted by ``offset``)."""
    if a is None and b is None:
        return None
    dim = a.vectors.shape[1] if a is not None else b.vectors.shape[1] if b is not None else 0
    a = a or TableVectors.empty(dim)
    b = b or TableVectors.empty(dim)
    return TableVectors(np.concatenate([a.rows, b.rows + offset]).astype(np.int64),
                        np.concatenate([a.vectors.reshape(-1, dim), b.vectors.reshape(-1, dim)]).astype(np.float32))


__all__ = ["MergedTable", "apply_delta", "delta_file", "read_delta_manifest", "write_delta_manifest"]
