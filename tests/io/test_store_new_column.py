"""A store written before a record field existed stays readable, appendable and compactable
(issue 36): io/store/reader.py ``conform_part`` reads a part that lacks a nullable column of its
table's schema with that column as nulls. Emulated by dropping one nullable record column from a
committed conversation's Parquet part, i.e. the part a store built before that column would hold."""

from __future__ import annotations

import pyarrow as pa

from lychee_ray.core.records import RECORD_SCHEMA
from lychee_ray.io.store import StoreReader, StoreWriter, StoreLayout, compact, read_part
from lychee_ray.io.store.fs import read_parquet, write_parquet
from lychee_ray.io.store.reader import conform_part, read_delta
from lychee_ray.io.verify import verify_store
from lychee_ray.query.view import ConversationView
from tests.ingest.test_deltas import marker, open_store
from tests.ingest.test_incremental import conv, turn_dicts  # noqa: F401 (fixture)

NEW = "time_expression"  # the column the "old" part predates (nullable)
NO_FOLD = ("appends.delta_max_count=50", "appends.delta_fold_min_rows=100000")


def drop_column(root, cid: str, column: str = NEW) -> pa.Table:
    """Rewrite ``cid``'s base records part without ``column``; returns the part as it was."""
    m = marker(root, cid)
    assert not m.deltas and "records" not in m.location
    path = StoreLayout(root).marker_part_path("records", m)
    part = read_parquet(path)
    write_parquet(part.drop_columns([column]), path)
    assert column not in read_parquet(path).column_names
    return part


def nulled(part: pa.Table, column: str = NEW) -> pa.Table:
    i = part.schema.get_field_index(column)
    return part.set_column(i, part.schema.field(column), pa.nulls(part.num_rows, part.schema.field(column).type))


def test_conform_part_fills_missing_nullable_columns_in_schema_order():
    full = RECORD_SCHEMA.empty_table()
    assert conform_part("records", full) is full  # lacks nothing: as it is
    old = full.drop_columns([NEW, "created_at"])
    got = conform_part("records", old)
    assert got.schema.equals(RECORD_SCHEMA)
    assert conform_part("records", old, ["record_id", NEW]).column_names == ["record_id", NEW]
    assert conform_part("records", full.drop_columns(["text"])).column_names == [n for n in RECORD_SCHEMA.names if n != "text"]
    usage = pa.table({"x": [1]})  # a table without a fixed schema is never touched
    assert conform_part("usage", usage) is usage


def test_a_part_without_a_column_reads_appends_and_compacts(tmp_path, conv):
    cid, turns = conv.conversation_id, turn_dicts(conv)
    StoreWriter(tmp_path)
    store = open_store(tmp_path, *NO_FOLD)
    store.append(cid, turns[:30], user_id=conv.user_id)
    store.close()
    was = drop_column(tmp_path, cid)
    old_base = marker(tmp_path, cid).generation
    assert was.num_rows and was.column(NEW).null_count < was.num_rows  # the test drops real values

    # read: the missing column is nulls, in its place; the rest as written
    reader = StoreReader(tmp_path)
    data = reader.load(cid)
    assert data.records.schema.equals(RECORD_SCHEMA) and data.records.equals(nulled(was))
    assert read_part(tmp_path, "records", marker(tmp_path, cid), columns=["record_id", NEW]).column(NEW).null_count == was.num_rows
    view = ConversationView.from_data(data)
    assert view.record_column(NEW) == [None] * was.num_rows and view.record_column("text") == view.record_text
    assert view.record_column("record_id") is view.record_column("record_id")  # converted once, then kept

    # append onto it (a fresh process: nothing kept in memory), encoded and queued: deltas over the old base
    store = open_store(tmp_path, *NO_FOLD)
    assert store.search(cid, turns[3]["content"][:60]).evidence
    store.append(cid, turns[30:50])
    store.append(cid, [turns[50]], queue=True)
    store.flush(cid)
    m = marker(tmp_path, cid)
    assert m.deltas and m.generation == old_base  # the old part is still the base, the deltas on top
    assert any("records" in read_delta(StoreLayout(tmp_path), m.key, g, ["records"], 0, vectors=False) for g in m.deltas)
    assert store.search(cid, turns[45]["content"][:60]).evidence
    store.append("c-new", turns[:12], user_id="u-new")  # a conversation written with the column
    store.close()
    assert verify_store(tmp_path)["ok"]
    reader.refresh()
    after = {c: reader.load(c).records for c in (cid, "c-new")}
    assert after[cid].schema.equals(RECORD_SCHEMA) and after[cid].num_rows > was.num_rows
    assert after[cid].slice(0, was.num_rows).column(NEW).null_count == was.num_rows  # the old rows as read
    assert reader.read_table("records").num_rows == sum(t.num_rows for t in after.values())

    # compact the old part with new ones into one file
    assert compact(tmp_path, conversations_per_file=10)["records"] == 2
    assert all("records" in marker(tmp_path, c).location for c in (cid, "c-new"))
    reader.refresh()
    for c, t in after.items():
        assert reader.load(c).records.equals(t), c
    assert verify_store(tmp_path)["ok"]
    store = open_store(tmp_path, *NO_FOLD)  # and append on top of the compacted old rows
    store.append(cid, turns[51:60])
    store.flush(cid)
    store.close()
    assert verify_store(tmp_path)["ok"]
    reader.refresh()
    assert reader.load(cid).records.num_rows >= after[cid].num_rows
