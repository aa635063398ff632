"""Writing a store: one atomic commit per conversation, error parts and the manifest."""

from __future__ import annotations

import json
import uuid
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import numpy as np
import pyarrow as pa

from lychee_ray.config.appends import AppendsConfig
from lychee_ray.config.store import StoreConfig
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import ERROR_SCHEMA
from lychee_ray.io.store.fs import AnyPath, create_exclusive, remove_tree, write_parquet
from lychee_ray.io.store.remote_path import StorePath
from lychee_ray.io.store.artifacts import ConversationArtifacts, ConversationDelta, TableDelta, TableVectors
from lychee_ray.io.store.deltas import write_delta_manifest
from lychee_ray.io.store.index import build_flat_index, write_index
from lychee_ray.io.store.layout import (
    LEGACY_STORE_VERSION,
    STORE_VERSION,
    StoreLayout,
    as_layout,
    atomic_write_text,
    conversation_key,
    generation_seq,
    new_generation,
)
from lychee_ray.io.store.locks import conversation_write_lock
from lychee_ray.io.store.fence import UNFENCED, BasedOn, check_fence
from lychee_ray.io.store.lease import LeaseLost
from lychee_ray.io.store.marker import MARKER_VERSION, BuildInfo, CommitMarker, new_lineage
from lychee_ray.io.store.migrate import migrate_conversation
from lychee_ray.io.store.reader import ConversationData, load_generation, read_segstate
from lychee_ray.io.store.tables import indexed_tables, table_specs
from lychee_ray.io.store.tombstones import filter_artifacts, filter_delta, read_tombstones


def artifacts_delta(previous: ConversationData, art: ConversationArtifacts) -> ConversationDelta:
    """What a commit of ``art`` changes against ``previous`` (the conversation's committed
    :class:`~lychee_ray.io.store.reader.ConversationData`, every table loaded), as a delta: per
    keyed table the rows new or different and the keys gone, for keyless tables the rows past the
    stored ones; vectors for the upserted rows of indexed tables."""
    dim = int(art.turn_vectors.shape[1]) if art.turn_vectors.ndim == 2 else previous.dim
    tables: dict[str, TableDelta] = {}
    for spec in table_specs():
        new = spec.fill(art)
        old = previous.tables[spec.name]
        if spec.key is None:
            picked = list(range(old.num_rows, new.num_rows))
            deletes: list[str] = []
        else:
            # rows an increment changes sit mostly at the end (a tail segment, its records): the
            # equal prefix is found by a C++ comparison, and only the rest compared row by row
            k = _equal_prefix(old, new)
            before = dict(zip(old.column(spec.key).to_pylist()[k:], old.slice(k).to_pylist(), strict=False))
            rows = new.slice(k).to_pylist()
            picked = [k + i for i, r in enumerate(rows) if before.get(r[spec.key]) != r]
            keep = set(new.column(spec.key).to_pylist()[k:])
            deletes = [key for key in before if key not in keep]
        if not picked and not deletes:
            continue
        up = new.take(pa.array(picked, type=pa.int64())) if picked else new.slice(0, 0)
        vecs = None
        if spec.index is not None and picked:
            all_vecs = np.asarray(spec.index.vectors(art), dtype=np.float32).reshape(-1, dim)
            vrows = spec.index.rows(art)
            where = {r: i for i, r in enumerate(range(new.num_rows) if vrows is None else vrows)}
            have = [(j, where[r]) for j, r in enumerate(picked) if r in where]
            vecs = TableVectors(np.asarray([j for j, _ in have], dtype=np.int64),
                                all_vecs[[i for _, i in have]] if have else np.zeros((0, dim), np.float32))
        tables[spec.name] = TableDelta(up, vecs, deletes)
    return ConversationDelta(conversation_id=art.conversation_id, user_id=art.user_id, fingerprint=art.fingerprint,
                             tables=tables, counts=art.counts(), open_turns=art.open_turns(), info=art.info, dim=dim,
                             segstate=art.segstate)


def _equal_prefix(a: pa.Table, b: pa.Table) -> int:
    """The number of leading rows two tables (same schema) have equal (binary search: a prefix
    that is equal has every shorter prefix equal)."""
    lo, hi = 0, min(a.num_rows, b.num_rows)
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a.slice(0, mid).equals(b.slice(0, mid)):
            lo = mid
        else:
            hi = mid - 1
    return lo


class StoreWriter:
    """Writes conversations into a store directory, one atomic commit each."""

    def __init__(self, root: str | Path | StorePath | StoreLayout, settings: StoreConfig | None = None) -> None:
        """``settings``: the ``store`` config section (see :class:`StoreLayout`)."""
        self.layout = as_layout(root, settings)
        self.root = self.layout.root
        self.layout.create()

    def commit_marker(self, conversation_id: str) -> CommitMarker | None:
        """The committed marker of a conversation, or None when it is not (fully) committed."""
        return self.layout.read_marker(conversation_key(conversation_id))

    def current_marker(self, conversation_id: str) -> CommitMarker | None:
        """:meth:`commit_marker` for a writer that holds the conversation's write lock and is about
        to build on it: a version-1 marker is migrated first (:mod:`.migrate`), so what follows
        reads and replaces a generation like any other."""
        m = self.commit_marker(conversation_id)
        return migrate_conversation(self.layout, m) if m is not None and m.version < MARKER_VERSION else m

    def is_committed(self, conversation_id: str, fingerprint: str | None = None) -> bool:
        m = self.commit_marker(conversation_id)
        return m is not None and (fingerprint is None or m.fingerprint == fingerprint)

    def claim(self, conversation_id: str, run_id: str, where: str) -> str | None:
        """Claim a conversation id for this run; returns the earlier claimant's location when the
        id was already claimed in this run from another input location (a duplicate), else None.

        A claim from the same location is the same input retried (e.g. Ray re-running a task after
        an actor died) and is granted again. Claims of other (earlier, possibly killed) runs do not
        matter, so resume still works. Locally the check-and-create is atomic (``O_EXCL``), so two
        builders racing on one id cannot both win; on an object store it is check-then-write
        (:func:`~lychee_ray.io.store.fs.create_exclusive`), and two builders racing within one round
        trip both build the id — the later commit replaces the earlier one whole, nothing is mixed.
        """
        path = self.layout.claim_path(run_id, conversation_key(conversation_id))
        if create_exclusive(path, json.dumps({"conversation_id": conversation_id, "where": where})):
            return None
        try:
            first = json.loads(path.read_text(encoding="utf-8")).get("where", "?")
        except (json.JSONDecodeError, OSError):
            first = "?"
        return None if first == where else first

    def release_claims(self, run_id: str) -> None:
        """Forget a finished run's claims."""
        remove_tree(self.layout.claims_dir(run_id))

    def commit(self, art: ConversationArtifacts, *, locked: bool = False, based_on: BasedOn = UNFENCED) -> CommitMarker:
        """Publish one conversation as a new generation; returns the commit marker.

        The generation's files get names no earlier commit used, the marker naming them is written
        last (one atomic write), then the conversation's older generations are removed (layout.py
        describes the protocol). ``locked``: the caller already holds the conversation's write lock
        (:func:`~lychee_ray.io.store.locks.conversation_write_lock`; incremental builds and appends
        hold it from reading the stored state to the commit); otherwise the commit takes it.
        ``based_on``: the commit the artifacts were built from (None: none) — :func:`check_fence`
        refuses the commit with :class:`ConversationReplaced` when that is no longer the
        conversation's lineage. The marker carries the lineage (a first commit stamps a new one).
        """
        if not locked:
            with conversation_write_lock(self.layout, art.conversation_id):
                return self.commit(art, locked=True, based_on=based_on)
        key = conversation_key(art.conversation_id)
        previous = self.layout.read_marker(key)
        check_fence(art.conversation_id, previous, based_on)
        art = filter_artifacts(art, read_tombstones(self.layout, key))  # forgotten records stay forgotten
        gen = new_generation(previous)
        tables = {spec.name: spec.fill(art) for spec in table_specs()}  # every registered table
        with self._generation_files(key, gen) as index_dir:
            self._write_indexes(index_dir, art, tables)
            for name, table in tables.items():
                write_parquet(table, self.layout.part_path(name, key, gen))
            self._write_segstate(key, gen, art.segstate)
        marker = CommitMarker(
            conversation_id=art.conversation_id,
            user_id=art.user_id,
            key=key,
            generation=gen,
            fingerprint=art.fingerprint,
            committed_at=datetime.now(timezone.utc).isoformat(),
            counts=art.counts(),
            open_turns=art.open_turns(),
            base_rows=sum(t.num_rows for t in tables.values()),
            segmentation_epoch=previous.segmentation_epoch + 1 if previous is not None else 0,
            lineage=previous.lineage if previous is not None and previous.lineage else new_lineage(),
            **art.info.model_dump(),
        )
        self._publish(key, gen, marker)
        self.remove_old_generations(key, keep=gen)
        return marker

    def commit_delta(self, delta: ConversationDelta, *, locked: bool = False,
                     based_on: BasedOn = UNFENCED) -> CommitMarker:
        """Publish ``delta`` as a delta generation on top of the conversation's current commit
        (io/store/deltas.py); same protocol as :meth:`commit`: its files, then the marker naming
        base + deltas. The conversation must be committed (a delta needs a base); ``based_on``: the
        commit the delta was computed against (checked as in :meth:`commit`)."""
        if not locked:
            with conversation_write_lock(self.layout, delta.conversation_id):
                return self.commit_delta(delta, locked=True, based_on=based_on)
        key = conversation_key(delta.conversation_id)
        previous = self.layout.read_marker(key)
        check_fence(delta.conversation_id, previous, based_on)
        delta = filter_delta(delta, read_tombstones(self.layout, key))  # forgotten records stay forgotten
        if previous is None or previous.generation is None:
            raise ValueError(f"conversation {delta.conversation_id!r}: a delta needs a committed base generation")
        gen = self._next_generation(previous)
        with self._generation_files(key, gen) as index_dir:
            by_name = {s.name: s for s in table_specs()}
            for name, td in delta.tables.items():
                spec = by_name[name]
                if spec.index is not None and td.upserts.num_rows:
                    v = td.vectors
                    vecs, rows = (v.vectors, v.rows.tolist()) if v is not None else (np.zeros((0, delta.dim), np.float32), [])
                    write_index(build_flat_index(vecs, delta.dim, rows, spec.index.precision(self.layout.settings)),
                                StoreLayout.index_file(index_dir, name))
            write_delta_manifest(index_dir, delta.tables, delta.dim)
            for name, td in delta.tables.items():
                if td.upserts.num_rows:
                    schema = by_name[name].schema
                    write_parquet(td.upserts.cast(schema) if schema is not None else td.upserts,
                                  self.layout.part_path(name, key, gen))
            self._write_segstate(key, gen, delta.segstate)
        marker = previous.model_copy(update={
            **{k: getattr(delta.info, k) for k in BuildInfo.model_fields},
            "version": MARKER_VERSION,
            "user_id": delta.user_id,
            "fingerprint": delta.fingerprint,
            "committed_at": datetime.now(timezone.utc).isoformat(),
            "counts": delta.counts,
            "open_turns": delta.open_turns,
            "deltas": [*previous.deltas, gen],
            "delta_rows": previous.delta_rows + delta.rows,
            "segstate_generation": gen if delta.segstate is not None else previous.segstate_generation,
            "unsegmented_turns": delta.unsegmented_turns,
            "segmentation_epoch": previous.segmentation_epoch + (delta.segstate is not None),
            "lineage": previous.lineage or new_lineage(),
        })
        # nothing earlier became garbage (base and deltas are all still named); a crashed writer's
        # leftovers go with the next fold or full commit, or the garbage sweep
        self._publish(key, gen, marker)
        return marker

    def needs_fold(self, marker: CommitMarker, bound: AppendsConfig) -> bool:
        """True when the marker's deltas passed the fold bound (``appends.delta_max_count`` deltas, or
        more delta rows than ``appends.delta_fold_ratio`` x the base's and ``appends.delta_fold_min_rows``)."""
        return bool(marker.deltas) and (
            len(marker.deltas) >= bound.delta_max_count
            or marker.delta_rows > max(bound.delta_fold_ratio * marker.base_rows, bound.delta_fold_min_rows))

    def fold(self, conversation_id: str, *, locked: bool = False) -> CommitMarker | None:
        """Rewrite a conversation's base + deltas as one new base generation (the merged tables and
        vectors, written whole); the marker naming it is written last, then the old generations go.
        Returns the new marker (the current one when there was nothing to fold; None: not committed)."""
        if not locked:
            with conversation_write_lock(self.layout, conversation_id):
                return self.fold(conversation_id, locked=True)
        key = conversation_key(conversation_id)
        m = self.layout.read_marker(key)
        if m is None or not m.deltas:
            return m
        data = load_generation(self.layout, m)
        return self._write_base(m, data.tables, {s.name: data.table_vectors(s.name) for s in indexed_tables()},
                                data.dim, read_segstate(self.layout, m), data.ids)

    def rewrite(self, marker: CommitMarker, tables: dict[str, pa.Table], vectors: dict[str, TableVectors], dim: int,
                segstate: dict[str, Any] | None, *, based_on: BasedOn = UNFENCED) -> CommitMarker:
        """Publish ``tables`` (every registered table) and the indexed tables' ``vectors`` as a new
        base generation of ``marker``'s conversation — the conversation's rows changed in place (a
        forget, io/store/forget.py), not re-built. The caller holds the conversation's write lock and
        read ``marker`` under it; ``based_on`` fences the commit as in :meth:`commit`."""
        check_fence(marker.conversation_id, self.layout.read_marker(marker.key), based_on)
        return self._write_base(marker, tables, vectors, dim, segstate)

    def _write_base(self, m: CommitMarker, tables: dict[str, pa.Table], vectors: dict[str, TableVectors], dim: int,
                    segstate: dict[str, Any] | None, ids: dict[str, Any] | None = None) -> CommitMarker:
        """Write ``tables`` and ``vectors`` as a new base generation after ``m``'s, publish the marker
        naming it (``m``'s fields otherwise), then remove the older generations. ``ids``: the indexed
        tables' id columns in row order (None: read from ``tables``)."""
        key = m.key
        gen = self._next_generation(m)
        with self._generation_files(key, gen) as index_dir:
            for spec in indexed_tables():
                assert spec.index is not None
                v = vectors[spec.name]
                write_index(build_flat_index(v.vectors, dim, v.rows.tolist(), spec.index.precision(self.layout.settings)),
                            StoreLayout.index_file(index_dir, spec.name))
            if ids is None:
                ids = {s.name: tables[s.name].column(s.index.id_column).to_pylist()
                       for s in indexed_tables() if s.index is not None}
            StoreLayout.ids_file(index_dir).write_text(
                json.dumps({"dim": dim, **{s.name: ids[s.name] for s in indexed_tables()}}), encoding="utf-8")
            for name, table in tables.items():
                write_parquet(table, self.layout.part_path(name, key, gen))
            self._write_segstate(key, gen, segstate)
        marker = m.model_copy(update={
            "version": MARKER_VERSION, "lineage": m.lineage or new_lineage(),
            "generation": gen, "deltas": [], "location": {}, "segstate_generation": None, "delta_rows": 0,
            "base_rows": sum(t.num_rows for t in tables.values()),
            "committed_at": datetime.now(timezone.utc).isoformat(),
        })
        self._publish(key, gen, marker)
        self.remove_old_generations(key, keep=gen)
        return marker

    def _publish(self, key: str, gen: str, marker: CommitMarker) -> None:
        """Write the marker naming generation ``gen``; if the writer's lease was lost meanwhile (an
        object store: :class:`~.lease.LeaseLost`), nothing is published and ``gen``'s files go."""
        try:
            self.layout.write_marker(marker)
        except LeaseLost:
            for path in self.layout.generation_paths(key, complete=False).get(gen, []):
                remove_tree(path)
            raise

    @contextmanager
    def _generation_files(self, key: str, gen: str) -> Iterator[AnyPath]:
        """Write a generation's files in the block. Its index directory is made first and yielded:
        ``index/<key>/<gen>/`` is how a later commit finds this generation's files without listing
        the shared table directories (layout.generation_paths). On any error the files written so
        far are removed (no marker names them: invisible anyway, but not left behind)."""
        index_dir = self.layout.index_dir(key, gen)
        try:
            if not self.layout.remote:  # object stores have no directories to make
                index_dir.mkdir(parents=True, exist_ok=True)
            yield index_dir
        except BaseException:
            for path in self.layout.generation_paths(key, complete=False).get(gen, []):
                remove_tree(path)
            raise

    def _write_segstate(self, key: str, gen: str, state: dict[str, Any] | None) -> None:
        """The segmenter's resume point saved with a generation (nothing when there is none)."""
        if state is None:
            return
        path = self.layout.segstate_path(key, gen)
        if not self.layout.remote:
            path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(state), encoding="utf-8")

    @staticmethod
    def _next_generation(previous: CommitMarker) -> str:
        """A generation name after every generation ``previous`` names (its base and deltas)."""
        newest = max(previous.generations, key=generation_seq)
        return new_generation(previous.model_copy(update={"generation": newest}))

    def remove_old_generations(self, key: str, keep: str | None) -> int:
        """Delete every generation of ``key`` but ``keep`` (the caller holds its write lock, so no
        other commit of it is being written); returns the number of paths removed. Generations are
        found through the conversation's own index directory, so the cost does not grow with the
        store (``generation_paths(complete=False)``; the garbage sweep takes what that misses)."""
        n = 0
        for gen, paths in self.layout.generation_paths(key, complete=False).items():
            if gen == keep:
                continue
            for path in paths:
                remove_tree(path)
                n += 1
        return n

    def _write_indexes(self, dest: AnyPath, art: ConversationArtifacts, tables: dict[str, pa.Table]) -> None:
        """One FAISS index per indexed table (ids = row positions) and ``ids.json`` with each
        indexed table's id column in row order (io/store/tables.py says which tables and columns)."""
        specs = indexed_tables()
        vecs = {s.name: s.index.vectors(art) for s in specs if s.index is not None}
        # the embedding dimension every index shares (0: a conversation without any vector)
        dim = max((int(v.shape[1]) for v in vecs.values() if v.ndim == 2), default=0)
        ids: dict[str, list[Any]] = {}
        for spec in specs:
            assert spec.index is not None
            name, rows = spec.name, spec.index.rows(art)
            ids[name] = tables[name].column(spec.index.id_column).to_pylist()
            expected = len(ids[name]) if rows is None else len(rows)
            if len(vecs[name]) != expected:
                raise ValueError(f"{name}: {len(vecs[name])} vectors for {expected} rows")
            if rows is not None and any(not 0 <= r < len(ids[name]) for r in rows):
                raise ValueError(f"{name}: vector row ids out of range")
            write_index(build_flat_index(vecs[name], dim, rows, spec.index.precision(self.layout.settings)),
                        StoreLayout.index_file(dest, name))
        StoreLayout.ids_file(dest).write_text(json.dumps({"dim": dim, **ids}), encoding="utf-8")

    def write_errors(self, rows: list[dict[str, Any]], run_id: str | None = None) -> AnyPath | None:
        """Append error rows (conversation_id, stage, message, file, line) as one Parquet part."""
        if not rows:
            return None
        now = datetime.now(timezone.utc).isoformat()
        full = [{"time": now, "file": None, "line": None, "conversation_id": None, **r} for r in rows]
        path = self.layout.errors_dir / f"{run_id or 'run'}-{uuid.uuid4().hex[:8]}.parquet"
        write_parquet(pa.Table.from_pylist(full, schema=ERROR_SCHEMA), path)
        return path

    def write_manifest(self, info: dict[str, Any]) -> dict[str, Any]:
        """Summarise every committed conversation into ``manifest.json`` (plus ``info``).

        The store version is kept as it was when the store is older: only the migration
        (:mod:`.migrate`) may raise it, so an erasure in a version-1 store leaves it to be migrated."""
        old = self.layout.read_manifest()
        # (a manifest without "version" counts as version 1)
        version = min(int(old.get("version", LEGACY_STORE_VERSION)), STORE_VERSION) if old else STORE_VERSION
        markers = list(self.layout.iter_markers())
        totals: dict[str, int] = {}
        tokens: dict[str, dict[str, int]] = {}
        quality = QualityCounts()
        for m in markers:
            quality.add(QualityCounts.from_report(m.quality))
            for k, v in m.counts.as_dict().items():
                totals[k] = totals.get(k, 0) + int(v)
            for stage, t in m.tokens.items():
                agg = tokens.setdefault(stage, {})
                for k, v in t.items():
                    agg[k] = agg.get(k, 0) + int(v)

        def one_or_all(values: list[Any]) -> Any:
            vals = sorted({str(v) for v in values if v is not None})
            return vals[0] if len(vals) == 1 else (vals or None)

        manifest = {
            "version": version,
            "written_at": datetime.now(timezone.utc).isoformat(),
            # what the committed conversations were built with (a list when they differ)
            "backend": one_or_all([m.backend for m in markers]),
            "models": {"llm": one_or_all([m.model for m in markers]), "embedding": one_or_all([m.embedder for m in markers])},
            "embedding_dim": one_or_all([m.embedding_dim for m in markers]),
            "fingerprint": one_or_all([m.fingerprint for m in markers]),
            "erasures": old.get("erasures") or [],  # the log of io/store/erase.py outlives builds
            **info,
            "counts": {"conversations": len(markers), **totals},
            "tokens": tokens,
            # memory checks of every committed conversation (lychee_ray.core.quality; docs/llm-quality.md)
            "quality": quality.report(),
        }
        if isinstance(manifest["embedding_dim"], str):
            manifest["embedding_dim"] = int(manifest["embedding_dim"])
        atomic_write_text(self.layout.manifest_path, json.dumps(manifest, indent=1, sort_keys=True))
        return manifest
