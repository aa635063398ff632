"""The store contract (issue 30): the typed commit marker, read and written through one class, and
no module outside ``io/store/`` indexing a marker by string key; the table registry every store
module loops over (a toy table added in a test is written, read, compacted, verified and erased);
version-1 stores written by the code before it open and migrate."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lychee_ray.io.store import (
    StoreReader,
    StoreWriter,
    StoreLayout,
    TableSpec,
    VectorIndex,
    compact,
    conversation_key,
    erase_conversation,
    iter_markers,
    register_table,
    table_names,
    unregister_table,
)
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build_items
from lychee_ray.cli.main import main
from lychee_ray.config import load_config
from lychee_ray.io.adapters import AdapterItem
from lychee_ray.io.store.fs import parquet_file, read_parquet
from lychee_ray.io.store.gc import collect_garbage, garbage_paths
from lychee_ray.io.store.layout import STORE_VERSION, split_generation_name
from lychee_ray.io.store.migrate import migrate_store, store_version
from lychee_ray.io.store.marker import (
    MARKER_VERSION,
    CommitMarker,
    LastIncrement,
    MarkerCounts,
    MarkerError,
    TableLocation,
)
from lychee_ray.io.store.reader import load_generation
from lychee_ray.io.store.tables import TableRegistryError
from lychee_ray.io.verify import verify_store
from lychee_ray.testing.synthetic import synthetic_conversation
from tests.reliability.test_bad_input import HashEmbedder
from tests.io.test_store import artifacts

PKG = Path(__file__).resolve().parents[2] / "lychee_ray"


# ------------------------------------------------------------------------------------------------
# the typed marker
# ------------------------------------------------------------------------------------------------


def test_marker_json_round_trip_is_exact():
    m = CommitMarker(
        conversation_id="c/1", user_id="u", key="c_1-0123456789", generation="g000002-deadbeef", fingerprint="fp",
        committed_at="2026-01-01T00:00:00+00:00", counts=MarkerCounts(turns=4, segments=1, records=3, nodes=1),
        open_turns=2, backend="rules", model="m", embedder="e", embedding_dim=8,
        tokens={"encode": {"prompt_tokens": 10}}, timings_s={"encode": 0.5}, mean_turns_per_segment=4.0,
        quality={"drafts": 3}, turns_digest="ab" * 32,
        last_increment=LastIncrement(turns_added=2, segments_encoded=1, rebuilt="new_speaker"),
        location={"records": TableLocation(file="compact-x.parquet", row_group=3)},
    )
    text = m.to_json()
    back = CommitMarker.from_json(text)
    assert back == m and back.to_json() == text
    assert json.loads(text)["version"] == MARKER_VERSION
    assert m.owner == "u" and m.model_copy(update={"user_id": None}).owner == "c/1"
    moved = m.with_location({"nodes": TableLocation(file="compact-y.parquet", row_group=0)})
    assert set(moved.location) == {"records", "nodes"} and set(m.location) == {"records"}  # immutable


def test_marker_of_a_version_1_store_parses_and_newer_or_broken_markers_are_refused_by_kind():
    v1 = {"conversation_id": "c", "user_id": None, "key": "c-0123456789", "fingerprint": "fp",
          "committed_at": "2026-01-01T00:00:00+00:00", "counts": {"turns": 1, "segments": 1, "failed_segments": 0,
                                                                 "records": 1, "nodes": 0}}
    m = CommitMarker.from_dict(v1)
    assert (m.version, m.generation, m.owner, m.location) == (1, None, "c", {})
    with pytest.raises(MarkerError) as e:
        CommitMarker.from_dict({**v1, "version": MARKER_VERSION + 1}, "commits/c.json")
    assert e.value.kind == "unsupported_version" and e.value.path == "commits/c.json"
    with pytest.raises(MarkerError) as e:
        CommitMarker.from_dict({**v1, "counts": {"turns": "many"}})
    assert e.value.kind == "invalid"
    with pytest.raises(MarkerError) as e:
        CommitMarker.from_dict({**v1, "misspelt_field": 1})  # strict keys: a typo is not carried along
    assert e.value.kind == "invalid"
    with pytest.raises(MarkerError) as e:
        CommitMarker.from_dict([v1])
    assert e.value.kind == "invalid"


def test_writer_reader_and_layout_speak_commit_markers(tmp_path):
    w = StoreWriter(tmp_path)
    written = w.commit(artifacts("a"))
    assert isinstance(written, CommitMarker) and written.version == MARKER_VERSION and written.generation
    on_disk = (StoreLayout(tmp_path).marker_path(written.key)).read_text(encoding="utf-8")
    assert CommitMarker.from_json(on_disk) == written == w.commit_marker("a")
    assert list(iter_markers(tmp_path)) == [written]
    assert StoreReader(tmp_path).markers["a"] == written
    assert written.turns_digest is None and written.counts.records == 3  # test artifacts carry no build info


# ------------------------------------------------------------------------------------------------
# nobody outside io/store/ indexes a marker by string key
# ------------------------------------------------------------------------------------------------

# Marker fields no other dict of the package is keyed by: a string-key access to one of these is a
# marker read that bypasses CommitMarker, whatever the variable is called.
_GENERIC_KEYS = {"conversation_id", "user_id", "key", "model", "backend", "tokens", "quality", "version", "counts"}
# A receiver that *is* a marker by name (``marker``, ``prev_marker``, ``reader.markers[cid]`` ...):
# any string key on it is flagged.
_MARKER_RECEIVER = re.compile(r"(^|\.)\w*marker$|markers(\[.*\]|\.get\(.*\))$", re.IGNORECASE)
# Other dicts that happen to have a key of the same name (module, receiver, key), each checked by hand:
_NOT_MARKERS = {
    ("eval/runners/costs.py", "c", "committed_at"),  # the cached token estimates of one conversation (costs.json)
    ("eval/reports/report.py", "s", "fingerprint"),  # a store's entry in an eval run's results
    ("serve/service.py", "self.manifest", "embedding_dim"),  # manifest.json
}


def _string_key_uses(tree: ast.AST):
    """(line, receiver source, key) of every ``x["key"]`` and ``x.get/pop/setdefault("key", ...)``."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and isinstance(node.slice.value, str):
            yield node.lineno, ast.unparse(node.value), node.slice.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
              and node.func.attr in ("get", "pop", "setdefault") and node.args
              and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)):
            yield node.lineno, ast.unparse(node.func.value), node.args[0].value


def marker_string_key_uses(root: Path) -> list[str]:
    distinct = set(CommitMarker.model_fields) - _GENERIC_KEYS
    found = []
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel.startswith("io/store/") or "__pycache__" in rel:
            continue
        for line, recv, key in _string_key_uses(ast.parse(path.read_text(encoding="utf-8"))):
            if (key in distinct or _MARKER_RECEIVER.search(recv)) and (rel, recv, key) not in _NOT_MARKERS:
                found.append(f"{rel}:{line}: {recv}[{key!r}]")
    return found


def test_no_module_outside_io_store_indexes_a_marker_by_string_key():
    assert marker_string_key_uses(PKG) == []


def test_the_scan_finds_string_key_marker_reads(tmp_path):
    """The check above can fail: planted reads of each kind are found."""
    (tmp_path / "mod.py").write_text(
        "def f(m, marker, reader, cid, d):\n"
        "    a = m['committed_at']\n"            # a marker-only field, whatever the name
        "    b = marker.get('user_id')\n"        # a generic field on a receiver named marker
        "    c = reader.markers[cid]['key']\n"   # a marker taken from a reader
        "    e = d['content']\n"                 # another dict: not flagged
        "    return a, b, c, e\n", encoding="utf-8")
    assert [u.split(": ", 1)[1] for u in marker_string_key_uses(tmp_path)] == [
        "m['committed_at']", "marker['user_id']", "reader.markers[cid]['key']"]


def test_marker_typed_counts_feed_the_manifest(tmp_path):
    w = StoreWriter(tmp_path)
    w.commit(artifacts("a"))
    w.commit(artifacts("b", n_rec=2))
    manifest = w.write_manifest({})
    assert manifest["counts"]["conversations"] == 2 and manifest["counts"]["records"] == 5


# ------------------------------------------------------------------------------------------------
# one table registry: a toy table added by the registry and the builder alone
# ------------------------------------------------------------------------------------------------

TOY_SCHEMA = pa.schema([("conversation_id", pa.string()), ("toy_id", pa.string()), ("value", pa.int64())])


@pytest.fixture()
def toy_table():
    """A sixth table, with a vector index: one registry entry (nothing else in the store changes)."""
    spec = register_table(TableSpec("toy", TOY_SCHEMA, fill=lambda art: art.extra_tables["toy"],
                                    index=VectorIndex("toy_id", vectors=lambda art: art.extra_vectors["toy"])))
    try:
        yield spec
    finally:
        unregister_table("toy")


def toy_artifacts(cid: str, n: int):
    """The builder's part: the toy rows and their vectors go into the artifacts it commits."""
    art = artifacts(cid)
    art.segments = [s.model_copy(update={"turn_ids": [f"t{i}" for i in range(4)]}) for s in art.segments]  # verify-clean
    art.extra_tables["toy"] = pa.Table.from_pylist(
        [{"conversation_id": cid, "toy_id": f"{cid}-toy{i}", "value": i} for i in range(n)], schema=TOY_SCHEMA)
    art.extra_vectors["toy"] = art.turn_vectors[:n].copy()
    return art


def test_a_registered_table_is_written_read_compacted_verified_and_erased(tmp_path, toy_table):
    w = StoreWriter(tmp_path)
    a, b = w.commit(toy_artifacts("a", 3)), w.commit(toy_artifacts("b", 2))
    layout = w.layout
    # written: the generation's own part, its index and its ids.json entry
    assert layout.part_path("toy", a.key, a.generation).exists()
    assert layout.index_file(layout.marker_index_dir(a), "toy").exists()
    reader = StoreReader(tmp_path)
    d = reader.load("a")
    assert d.tables["toy"].column("toy_id").to_pylist() == ["a-toy0", "a-toy1", "a-toy2"]
    assert d.indexes["toy"].ntotal == 3 and d.ids["toy"] == ["a-toy0", "a-toy1", "a-toy2"]
    assert reader.read_table("toy").num_rows == 5
    assert load_generation(tmp_path, a).tables["toy"].num_rows == 3  # what incremental builds read
    assert verify_store(tmp_path)["ok"]
    # compacted: the toy parts merge like every other table, and are read back from the row group
    assert compact(tmp_path, conversations_per_file=10)["toy"] == 2
    a2 = layout.read_marker(a.key)
    assert set(a2.location) == set(table_names()) and "toy" in a2.location
    assert not layout.part_path("toy", a.key, a.generation).exists()
    assert StoreReader(tmp_path).load("a").tables["toy"].equals(d.tables["toy"])
    assert verify_store(tmp_path)["ok"]
    assert garbage_paths(tmp_path, min_age_s=0) == []
    # verified: a toy id map that disagrees with its table is reported
    ids_path = layout.ids_file(layout.marker_index_dir(b))
    good = ids_path.read_text(encoding="utf-8")
    ids = json.loads(good)
    ids_path.write_text(json.dumps({**ids, "toy": ids["toy"][::-1]}), encoding="utf-8")
    problems = verify_store(tmp_path)["problems"]
    assert list(problems) == ["b"] and any("toy" in p for p in problems["b"])
    ids_path.write_text(good, encoding="utf-8")
    # erased: the conversation's toy rows leave the shared compacted file, the other's stay
    report = erase_conversation(tmp_path, "a")
    assert report.rows_removed["toy"] == 3
    left = StoreReader(tmp_path)
    assert left.conversation_ids() == ["b"] and left.read_table("toy").column("conversation_id").to_pylist() == ["b", "b"]
    assert not any("a-toy" in str(v) for f in layout.table_dir("toy").iterdir() for v in
                   read_parquet(f).column("toy_id").to_pylist())
    assert verify_store(tmp_path)["ok"]


def test_the_registry_refuses_what_would_break_the_store(toy_table):
    with pytest.raises(TableRegistryError) as e:
        register_table(toy_table)
    assert e.value.kind == "duplicate"
    with pytest.raises(TableRegistryError) as e:
        register_table(TableSpec("commits", TOY_SCHEMA, fill=lambda art: art.turns))
    assert e.value.kind == "reserved"
    with pytest.raises(TableRegistryError) as e:
        unregister_table("records")
    assert e.value.kind == "core"


# ------------------------------------------------------------------------------------------------
# version-1 stores (written before issue 30) open and migrate
# ------------------------------------------------------------------------------------------------

CFG = load_config(env={})


@pytest.fixture(scope="module")
def ctx():
    return make_context(CFG, "rules", HashEmbedder())


def _convs(n: int = 3):
    out = []
    for i in range(n):
        c = synthetic_conversation(i, seed=11, sessions=2, topics_per_session=2)
        c.user_id = f"u-{i % 2}"
        out.append(c)
    return out


def _build(ctx, root, convs, **kw):
    items = [AdapterItem(file="mem", line=i, conversation=c) for i, c in enumerate(convs)]
    return run_local_build_items(CFG, items, root, backend="rules", ctx=ctx, **kw)


def write_v1_store(ctx, root: Path, convs, *, pre_generation: bool, own_parts: bool = False) -> None:
    """A store as the version-1 code (main before issue 30) left it, built by the real pipeline and
    written back in the v1 format:

    * markers as that code wrote them — ``json.dumps(dict, indent=1, sort_keys=True)`` of the same
      fields without ``version``, keys it never wrote (``last_increment``, ``location``) absent
      unless set; ``manifest.json`` ``version`` 1; a ``_staging/`` directory (``create()`` made one);
    * with ``pre_generation``: the layout before generations (``<table>/<key>.parquet``,
      ``index/<key>/*.faiss`` + ``ids.json``, no segmenter state, markers without ``generation``),
      still readable by that code and appendable (its own test, test_incremental.py, checked that).

    Checked once against a store built by main at a667fbc (the commit before issue 30): the same
    directories (``_staging/`` included), the same marker keys, manifest ``version`` 1; that store
    migrated as these do. The build compacts at its end, so the tables live in ``compact-*`` row
    groups (``location``); ``own_parts`` moves them back out into each conversation's own parts
    (a store whose last run did not compact).
    """
    assert _build(ctx, root, convs).built == len(convs)
    layout = StoreLayout(root)
    if own_parts:
        for m in list(layout.iter_markers()):
            for t, loc in m.location.items():
                rows = parquet_file(layout.table_dir(t) / loc.file).read_row_group(loc.row_group)
                pq.write_table(rows, layout.part_path(t, m.key, m.generation))
            layout.write_marker(m.model_copy(update={"location": {}}))
        for t in table_names():
            for f in layout.table_dir(t).glob("compact-*.parquet"):
                f.unlink()
    for m in list(layout.iter_markers()):
        d = json.loads(m.to_json())
        del d["version"]
        for k in ("last_increment", "location"):
            if not d[k]:
                del d[k]
        if pre_generation:
            gen = d.pop("generation")
            for t in table_names():
                if t not in m.location and layout.part_path(t, m.key, gen).exists():
                    layout.part_path(t, m.key, gen).rename(layout.v1_part_path(t, m.key))
            for f in list(layout.index_dir(m.key, gen).iterdir()):
                f.rename(layout.index_dir(m.key) / f.name)
            layout.index_dir(m.key, gen).rmdir()
            layout.segstate_path(m.key, gen).unlink(missing_ok=True)
        layout.marker_path(m.key).write_text(json.dumps(d, indent=1, sort_keys=True), encoding="utf-8")
    manifest = layout.read_manifest()
    layout.manifest_path.write_text(json.dumps({**manifest, "version": 1}, indent=1, sort_keys=True), encoding="utf-8")
    (layout.v1_staging_dir / "leftover.0123").mkdir(parents=True)


def _snapshot(root: Path) -> dict:
    r = StoreReader(root)
    return {cid: {t: r.load(cid).tables[t].to_pylist() for t in ("records", "nodes", "turns", "segments")}
            for cid in r.conversation_ids()}


def test_a_v1_store_opens_as_it_is_and_migrates(tmp_path, ctx):
    convs = _convs()
    write_v1_store(ctx, tmp_path, convs, pre_generation=False)
    assert store_version(tmp_path) == 1
    before = _snapshot(tmp_path)  # generation-era v1 markers are read without migrating
    assert verify_store(tmp_path)["ok"]
    assert main(["migrate", "--memory", str(tmp_path)]) == 0
    layout = StoreLayout(tmp_path)
    assert store_version(tmp_path) == STORE_VERSION == layout.read_manifest()["version"]
    assert all(m.version == MARKER_VERSION for m in layout.iter_markers())
    assert not layout.v1_staging_dir.exists()
    assert _snapshot(tmp_path) == before and verify_store(tmp_path)["ok"]
    again = migrate_store(tmp_path)  # idempotent
    assert (again.markers_rewritten, again.conversations_moved, again.staging_removed) == (0, 0, False)


@pytest.mark.parametrize("own_parts", [True, False])
def test_a_pre_generation_v1_store_migrates_into_generations(tmp_path, ctx, own_parts):
    convs = _convs()
    reference = tmp_path / "reference"
    _build(ctx, reference, convs)
    store = tmp_path / "v1"
    write_v1_store(ctx, store, convs, pre_generation=True, own_parts=own_parts)
    if own_parts:
        assert any(StoreReader(store).layout.v1_part_path("turns", m.key).exists() for m in iter_markers(store))
    reader = StoreReader(store)  # the store opens; a conversation says it needs migrating
    with pytest.raises(MarkerError) as e:
        reader.load(convs[0].conversation_id)
    assert e.value.kind == "needs_migration"
    assert not verify_store(store)["ok"]
    report = migrate_store(store)
    assert (report.from_version, report.conversations_moved, report.markers_rewritten, report.staging_removed) == (
        1, 3, 3, True)
    layout = StoreLayout(store)
    assert all(m.version == MARKER_VERSION and m.generation for m in layout.iter_markers())
    fixed = [f for t in table_names() for f in layout.table_dir(t).glob("*.parquet")
             if (split_generation_name(f.name, ".parquet") or ("", "gen"))[1] is None]  # <key>.parquet: none left
    assert fixed == [] and not any(f.is_file() for m in layout.iter_markers() for f in layout.index_dir(m.key).iterdir())
    assert _snapshot(store) == _snapshot(reference)
    assert verify_store(store)["ok"] and garbage_paths(store, min_age_s=0) == []
    # and a build on it goes on as on any store: unchanged input is skipped, new sessions append
    s = _build(ctx, store, convs)
    assert s.skipped == 3
    longer = _convs()
    longer[0].sessions.append(longer[1].sessions[0].model_copy(update={"session_id": "extra"}, deep=True))
    for t in longer[0].sessions[-1].turns:
        t.turn_id = f"extra-{t.turn_id}"
    assert _build(ctx, store, longer).appended == 1 and verify_store(store)["ok"]


def test_a_build_migrates_a_v1_store_when_it_opens_it(tmp_path, ctx):
    convs = _convs(2)
    write_v1_store(ctx, tmp_path, convs, pre_generation=True)
    s = _build(ctx, tmp_path, convs)
    assert s.skipped == 2 and store_version(tmp_path) == STORE_VERSION
    assert all(m.version == MARKER_VERSION for m in iter_markers(tmp_path)) and verify_store(tmp_path)["ok"]


def test_an_erasure_in_an_unmigrated_v1_store_removes_everything_and_leaves_the_version(tmp_path, ctx):
    convs = _convs()
    write_v1_store(ctx, tmp_path, convs, pre_generation=True, own_parts=True)
    layout = StoreLayout(tmp_path)
    gone = convs[0].conversation_id
    key = layout.read_marker(conversation_key(gone)).key
    report = erase_conversation(tmp_path, gone)
    assert report.conversations == 1 and report.rows_removed["turns"] > 0
    assert not any(key in str(p) for p in tmp_path.rglob("*"))  # fixed-path parts and index files too
    assert store_version(tmp_path) == 1  # the manifest rewritten by the erasure still says so: migrate next
    assert migrate_store(tmp_path).conversations_moved == 2
    assert verify_store(tmp_path)["ok"] and StoreReader(tmp_path).conversation_ids() == sorted(
        c.conversation_id for c in convs[1:])


def test_fixed_path_files_a_dead_migration_left_are_swept(tmp_path, ctx):
    """A migration killed after writing a conversation's new marker leaves its version-1 files:
    unreferenced, so the garbage sweep removes them (and nothing the marker names)."""
    convs = _convs(2)
    write_v1_store(ctx, tmp_path, convs, pre_generation=True, own_parts=True)
    layout = StoreLayout(tmp_path)
    key = next(iter(layout.iter_markers())).key
    saved = {p: p.read_bytes() for p in [*layout.index_dir(key).iterdir(), layout.v1_part_path("turns", key)]}
    migrate_store(tmp_path)
    for p, data in saved.items():  # as if the removal after the marker write had not happened
        p.write_bytes(data)
    assert sorted(garbage_paths(tmp_path, min_age_s=0)) == sorted(saved)
    assert collect_garbage(tmp_path, min_age_s=0).files_removed == len(saved)
    assert verify_store(tmp_path)["ok"] and garbage_paths(tmp_path, min_age_s=0) == []
