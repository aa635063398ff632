"""The passages table on every store path, stores written before it, and the stored vectors' precision.

* a generation written before the passages table (no part, no index, no ``ids.json`` key) reads as
  having none: load, verify, compaction, a fold and the next commit all work on it;
* a file of a replaced generation is still a missing file, not an older store;
* ``store.vector_precision``: record, node and passage vectors stored at fp16 / int8, turn vectors at
  fp32; read back close to what was written, and written again unchanged (a fold never drifts).
"""

from __future__ import annotations

import json

import faiss
import numpy as np
import pyarrow as pa
import pytest

from lychee_ray.config import load_config
from lychee_ray.core.passages import Passage, passages_table
from lychee_ray.io.store import StoreReader, StoreWriter, compact
from lychee_ray.io.store.artifacts import ConversationDelta, TableDelta, TableVectors
from lychee_ray.io.store.marker import BuildInfo
from lychee_ray.io.store.reader import predates_table, read_base_part
from lychee_ray.io.verify import verify_store
from tests.io.test_store import artifacts

DIM = 8


def store_settings(precision: str):
    return load_config(env={}, sets=[f"store.vector_precision={precision}"]).store


def toy(cid: str, **kw):
    """tests/io/test_store.py's toy artifacts with one segment covering every turn (verify-clean)."""
    art = artifacts(cid, **{"dim": DIM, **kw})
    art.segments = [s.model_copy(update={"turn_ids": ["t0", "t1", "t2", "t3"]}) for s in art.segments]
    return art


def with_passages(cid: str = "c-1"):
    """Toy artifacts whose turn t1 has two passages."""
    art = toy(cid)
    ps = [Passage(cid, cid, "t1", k, 2, 3 * k, 3 * k + 3, 2, f"p{k}") for k in range(2)]
    rng = np.random.default_rng(1)
    v = rng.normal(size=(2, DIM)).astype(np.float32)
    art.passages, art.passage_vectors = passages_table(ps), v / np.linalg.norm(v, axis=1, keepdims=True)
    return art


def make_old(root, marker) -> None:
    """Turn the marker's generation into one written before the passages table existed."""
    w = StoreWriter(root)
    layout = w.layout
    layout.marker_part_path("passages", marker).unlink()
    idx = layout.marker_index_dir(marker)
    layout.index_file(idx, "passages").unlink()
    ids = json.loads(layout.ids_file(idx).read_text(encoding="utf-8"))
    del ids["passages"]
    layout.ids_file(idx).write_text(json.dumps(ids), encoding="utf-8")


def test_a_generation_written_before_passages_reads_as_having_none(tmp_path):
    w = StoreWriter(tmp_path)
    m = w.commit(toy("old"))
    make_old(tmp_path, m)
    assert predates_table(w.layout, "passages", m) and not predates_table(w.layout, "turns", m)
    d = StoreReader(tmp_path).load("old")
    assert d.tables["passages"].num_rows == 0 and d.indexes["passages"].ntotal == 0 and d.ids["passages"] == []
    assert verify_store(tmp_path)["ok"]
    # compaction merges its (empty) passages like any table; the reader then reads the row group
    w.commit(with_passages("new"))
    compact(tmp_path, conversations_per_file=10)
    r = StoreReader(tmp_path)
    assert r.load("old").tables["passages"].num_rows == 0 and r.load("new").tables["passages"].num_rows == 2
    assert verify_store(tmp_path)["ok"]


def test_deltas_and_a_fold_on_an_old_generation_add_passages(tmp_path):
    w = StoreWriter(tmp_path)
    m = w.commit(toy("old"))
    make_old(tmp_path, m)
    rows = passages_table([Passage("old", "old", "t2", k, 2, k, k + 1, 1, "x") for k in range(2)])
    vecs = np.eye(DIM, dtype=np.float32)[:2]
    delta = ConversationDelta(conversation_id="old", user_id="old", fingerprint="fp1",
                              tables={"passages": TableDelta(rows, TableVectors.of(vecs, None, DIM))},
                              counts=m.counts, open_turns=m.open_turns, info=BuildInfo(), dim=DIM)
    w.commit_delta(delta)
    d = StoreReader(tmp_path).load("old")
    assert d.tables["passages"].column("passage_id").to_pylist() == ["t2#p1", "t2#p2"]
    assert d.indexes["passages"].ntotal == 2
    folded = w.fold("old")
    assert folded is not None and not folded.deltas
    d2 = StoreReader(tmp_path).load("old")
    assert d2.tables["passages"].equals(d.tables["passages"]) and d2.indexes["passages"].ntotal == 2
    assert verify_store(tmp_path)["ok"]


def test_a_replaced_generation_is_a_missing_file_not_an_older_store(tmp_path):
    w = StoreWriter(tmp_path)
    first = w.commit(with_passages("c"))
    w.commit(with_passages("c"))  # removes the first generation's files
    assert not predates_table(w.layout, "passages", first)
    with pytest.raises(FileNotFoundError):
        read_base_part(w.layout, "passages", first)


@pytest.mark.parametrize("precision,kind,close", [("fp16", "IndexScalarQuantizer", 1e-3), ("int8", "IndexScalarQuantizer", 6e-3),
                                                  ("fp32", "IndexFlatIP", 0.0)])
def test_vectors_are_stored_at_the_configured_precision_and_never_drift(tmp_path, precision, kind, close):
    settings = store_settings(precision)
    w = StoreWriter(tmp_path, settings)
    art = with_passages("c")
    w.commit(art)
    d = StoreReader(tmp_path, settings).load("c")
    for name, written in (("records", art.record_vectors), ("passages", art.passage_vectors)):
        assert type(faiss.downcast_index(d.indexes[name].index)).__name__ == kind, name
        got = d.table_vectors(name).vectors
        assert np.abs(got - written).max() <= close + 1e-7, name
        _, ids = d.indexes[name].search(np.ascontiguousarray(written), 1)
        assert ids[:, 0].tolist() == list(range(len(written))), name  # each finds its own row
    assert type(faiss.downcast_index(d.turn_index.index)).__name__ == "IndexFlatIP"  # turns: always fp32
    assert np.array_equal(d.table_vectors("turns").vectors, art.turn_vectors)
    # a delta then a fold: every vector read back is exactly what was read before
    before = {n: d.table_vectors(n).vectors.copy() for n in ("records", "nodes", "passages")}
    extra = passages_table([Passage("c", "c", "t2", 0, 2, 0, 1, 1, "y"), Passage("c", "c", "t2", 1, 2, 2, 3, 1, "z")])
    m = w.commit_marker("c")
    w.commit_delta(ConversationDelta(conversation_id="c", user_id="c", fingerprint="fp1",
                                     tables={"passages": TableDelta(extra, TableVectors.of(np.eye(DIM, dtype=np.float32)[:2], None, DIM))},
                                     counts=m.counts, open_turns=m.open_turns, info=BuildInfo(), dim=DIM))
    w.fold("c")
    after = StoreReader(tmp_path, settings).load("c")
    for n, v in before.items():
        assert np.array_equal(after.table_vectors(n).vectors[: len(v)], v), n
    assert verify_store(tmp_path)["ok"]


def test_int8_needs_a_quarter_of_the_bytes(tmp_path):
    sizes = {}
    for precision in ("fp32", "int8"):
        settings = store_settings(precision)
        art = toy("c", n_rec=400, dim=384)
        w = StoreWriter(tmp_path / precision, settings)
        m = w.commit(art)
        sizes[precision] = w.layout.index_file(w.layout.marker_index_dir(m), "records").stat().st_size
    assert sizes["int8"] < 0.3 * sizes["fp32"]


def test_passage_rows_have_their_schema():
    t = passages_table([Passage("c", "u", "t9", 0, 3, 0, 10, 4, "hello")])
    assert t.column("passage_id").to_pylist() == ["t9#p1"]
    assert t.schema.field("char_end").type == pa.int64()
