"""The record table's Arrow schema is derived from :class:`MemoryRecord` (issue 36): a new record
field is one new model field, its column follows. The derived schema is exactly the one the store
was written with before (the literal below), so every existing store reads as before."""

from __future__ import annotations

from typing import Annotated

import pyarrow as pa
import pytest
from pydantic import BaseModel

from lychee_ray.core.records import NOT_NULL, RECORD_SCHEMA, MemoryRecord, TimeSpan, arrow_schema, records_table

# RECORD_SCHEMA as it was written out by hand before it was derived (issue 36)
LITERAL_RECORD_SCHEMA = pa.schema(
    [
        pa.field("record_id", pa.string(), nullable=False),
        pa.field("conversation_id", pa.string(), nullable=False),
        pa.field("user_id", pa.string(), nullable=False),
        pa.field("session_id", pa.string(), nullable=False),
        pa.field("segment_id", pa.string(), nullable=False),
        pa.field("ordinal", pa.int32(), nullable=False),
        pa.field("type", pa.string(), nullable=False),
        pa.field("text", pa.string(), nullable=False),
        pa.field("entities", pa.list_(pa.string())),
        pa.field("topics", pa.list_(pa.string())),
        pa.field("time_start", pa.string()),
        pa.field("time_end", pa.string()),
        pa.field("time_granularity", pa.string()),
        pa.field("time_expression", pa.string()),
        pa.field("source_turn_ids", pa.list_(pa.string())),
        pa.field("created_at", pa.string()),
        pa.field("backend", pa.string()),
        pa.field("model", pa.string()),
        # added later: a store written before it reads the column as null (tests/io/test_store_new_column.py)
        pa.field("artifact", pa.string()),
    ]
)


def record(**kw) -> MemoryRecord:
    base = dict(record_id="r-1", conversation_id="c", user_id="u", session_id="s1", segment_id="c#s00000", ordinal=0,
                type="event", text="Caroline went to a support group on 7 May 2023.", entities=["Caroline"],
                topics=["support group"], time=TimeSpan(start="2023-05-07", end="2023-05-07", granularity="day",
                                                         expression="yesterday"),
                source_turn_ids=["t1"], created_at="2023-05-08T13:56:00", backend="rules", model="rules")
    return MemoryRecord(**{**base, **kw})


# the columns of memory that stays current, added after (nullable: older stores read them as nulls)
CURRENCY_COLUMNS = [
    pa.field("slot", pa.string()),
    pa.field("slot_value", pa.string()),
    pa.field("valid_from", pa.string()),
    pa.field("supersedes", pa.list_(pa.string())),
    pa.field("conflicts_with", pa.list_(pa.string())),
]
# the statements of value (core/statements.py), added after them: a list of structs
STATEMENT_COLUMNS = [
    pa.field("statements", pa.list_(pa.struct([
        pa.field("subject", pa.string()), pa.field("kind", pa.string()), pa.field("unit", pa.string()),
        pa.field("value", pa.string()), pa.field("said", pa.string()), pa.field("context", pa.string()),
        pa.field("changed", pa.bool_()), pa.field("modality", pa.string()), pa.field("slot", pa.string()),
        pa.field("supersedes", pa.list_(pa.string()))]))),
]


def test_derived_schema_equals_the_literal_one():
    """The columns the store had keep their names, types and order; later fields follow them."""
    expected = pa.schema([*LITERAL_RECORD_SCHEMA, *CURRENCY_COLUMNS, *STATEMENT_COLUMNS])
    assert RECORD_SCHEMA.equals(expected, check_metadata=True)
    assert [(f.name, f.type, f.nullable) for f in RECORD_SCHEMA] == [(f.name, f.type, f.nullable) for f in expected]


def test_rows_round_trip_and_fill_the_schema():
    r = record()
    assert records_table([r]).schema.equals(RECORD_SCHEMA)
    assert MemoryRecord.from_row(records_table([r]).to_pylist()[0]) == r
    assert MemoryRecord.from_row(record(time=TimeSpan(), created_at=None).to_row()) == record(time=TimeSpan(), created_at=None)


def test_a_null_column_takes_the_fields_default():
    """A store written before a field reads it back as null (io/store/reader.py conform_part)."""
    row = record().to_row()
    row.update(entities=None, created_at=None, time_expression=None)
    r = MemoryRecord.from_row(row)
    assert r.entities == [] and r.created_at is None and r.time.expression is None and r.time.start == "2023-05-07"
    row.pop("topics")  # a column the row lacks altogether
    assert MemoryRecord.from_row(row).topics == []


def test_a_new_field_is_a_new_column():
    class Extra(BaseModel):
        score: float | None = None
        flag: bool = False

    class Rec(BaseModel):
        key: Annotated[str, NOT_NULL]
        tags: list[str] = []
        extra: Extra = Extra()
        n: int | None = None

    assert arrow_schema(Rec).equals(pa.schema([
        pa.field("key", pa.string(), nullable=False), pa.field("tags", pa.list_(pa.string())),
        pa.field("extra_score", pa.float64()), pa.field("extra_flag", pa.bool_()), pa.field("n", pa.int32())]))

    class Bad(BaseModel):
        what: dict[str, int] = {}

    with pytest.raises(TypeError, match="Bad.what"):
        arrow_schema(Bad)
