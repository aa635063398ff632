"""``read_parts``: many conversations' rows of a table, compacted files read once each, equal to
``read_part`` conversation by conversation (before and after compaction)."""

from __future__ import annotations

from lychee_ray.io.store import StoreReader, StoreWriter, compact, read_part, read_parts
from tests.io.test_store import artifacts


def test_read_parts_equals_read_part_for_each_conversation(tmp_path):
    w = StoreWriter(tmp_path)
    for i in range(7):
        w.commit(artifacts(f"c-{i}", n_rec=1 + i % 3))

    def check() -> None:
        markers = list(StoreReader(tmp_path).markers.values())
        for table, cols in (("records", ["record_id", "text"]), ("turns", None)):
            got = read_parts(tmp_path, table, markers, cols)
            assert set(got) == {m.conversation_id for m in markers}
            for m in markers:
                assert got[m.conversation_id].equals(read_part(tmp_path, table, m, cols)), (table, m.conversation_id)

    check()
    compact(tmp_path, 3)  # three files, row groups of several conversations each
    assert all(m.location for m in StoreReader(tmp_path).markers.values())
    check()
    # a marker pointing at a compacted file that is gone is left out, not an error
    reader = StoreReader(tmp_path)
    m = reader.markers["c-0"]
    gone = m.model_copy(update={"location": {**m.location, "records": m.location["records"].model_copy(update={"file": "missing.parquet"})}})
    assert read_parts(tmp_path, "records", [gone, reader.markers["c-1"]]).keys() == {"c-1"}
