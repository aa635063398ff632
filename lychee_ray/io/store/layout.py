"""Where everything of a memory store lives, and the commit protocol's file-level rules.

Layout (DESIGN §2)::

    ROOT/manifest.json
    ROOT/records/<key>.<gen>.parquet   nodes/  turns/  segments/  usage/  passages/   one part per conversation
                                                                      and generation (or a row group of compact-*.parquet)
    ROOT/errors/<run>-<n>.parquet                                     quarantined inputs / stages, warnings
    ROOT/index/<key>/<gen>/{records,nodes,turns,passages}.faiss + ids.json   IndexIDMap2 (io/store/index.py)
    ROOT/segstate/<key>.<gen>.json                                    segmenter resume point (incremental builds)
    ROOT/commits/<key>.json                                           commit marker (last write), names <gen>
    ROOT/_claims/<run>/<key>.json                                     which run builds which conversation
    ROOT/_locks/<hash>.lock  <hash>.deleting  store.lock              write/erase locks (io/store/locks.py)

A conversation is visible to readers only through its commit marker. Every commit writes a new
*generation*: its files under names no earlier commit used (``<gen>`` = ``g<seq>-<random>``), then
the marker that names the generation, last. Nothing is renamed or overwritten in place, so the
protocol needs only "a single object write is atomic" (true of object stores too): a reader that
read a marker reads exactly that generation's files, never a mix, and a crash leaves at worst an
unreferenced generation that the next commit of the conversation removes (a commit writes its
indexes first, so the conversation's own ``index/<key>/`` lists every generation that left a file:
no commit lists the shared table directories, whose size grows with the store). Old generations are
removed after the new marker is written (by the writer holding the conversation's write lock); a
reader that still held the old marker finds a file missing, re-reads the marker and loads again
(:meth:`StoreReader.load`). This module is the only place that spells these paths.

Store version 2 (:data:`STORE_VERSION`) has one path scheme: every marker names a generation.
Version-1 stores may hold markers of the pre-generation scheme (fixed paths ``<table>/<key>.parquet``
and ``index/<key>/*.faiss``) and a ``_staging/`` directory; :mod:`.migrate` moves them to
generations (``lychee-ray migrate``, or a build opening the store), and is the only reader of the
version-1 paths spelled at the end of :class:`StoreLayout`. Reading such a marker otherwise raises
:class:`~lychee_ray.io.store.marker.MarkerError` with ``kind="needs_migration"``.

ROOT is a local directory or a ``pyarrow.fs`` URI (``s3://bucket/prefix`` ...; :mod:`.fs`). The
protocol above needs no rename, so it holds on object stores as it is: each file is one object
write, the marker is written last, readers trust only markers, and the files of a crashed writer's
generation are unreferenced garbage that the conversation's next commit removes.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Literal
from collections.abc import Iterator

from lychee_ray.config.store import StoreConfig
from lychee_ray.io.store.lease import check_held
from lychee_ray.io.store.marker import CommitMarker, MarkerError
from lychee_ray.io.store.tables import table_names
from lychee_ray.io.store.fs import AnyPath, listing_state, sorted_entries, store_root
from lychee_ray.io.store.remote_path import StorePath, default_settings, display_uri

# 2: one path scheme (every marker names a generation), typed markers with a version
STORE_VERSION = 2
# stores written before the version was raised (manifest "version" 1, or none)
LEGACY_STORE_VERSION = 1
SEGSTATE_DIR = "segstate"
FORGOTTEN_DIR = "forgotten"
# A generation name: g<sequence>-<random hex>; unique without coordination, ordered by sequence.
_GENERATION = re.compile(r"g(\d{6,})-[0-9a-f]{8}")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# the key is the readable id plus a short hash that keeps two ids apart after unsafe characters are replaced
_KEY_PREFIX_CHARS = 80
_KEY_HASH_CHARS = 10


# Why a path is no memory store: nothing is there, or something is but no store's ``commits/``.
NotAStoreKind = Literal["missing", "not_a_store"]


class NotAStoreError(FileNotFoundError):
    """A path that is no memory store. ``kind``: ``missing`` when nothing exists there (a mistyped
    path), ``not_a_store`` when something does but has no ``commits/`` directory (a store's writer
    creates it first); left out, it is found by looking at ``root`` — every place that opens a store
    raises this error, so each one reports the two cases apart."""

    def __init__(self, root: str | Path | StorePath, kind: NotAStoreKind | None = None) -> None:
        self.kind: NotAStoreKind = kind if kind is not None else "not_a_store" if _root_exists(root) else "missing"
        self.root = display_uri(root)
        if self.kind == "missing":
            super().__init__(f"no memory store at {self.root}: the folder does not exist")
        else:
            super().__init__(f"not a memory store (no commits/): {self.root}")

    def __reduce__(self) -> tuple[Any, ...]:
        # (rebuilt from its root and kind, not its message: the error crosses process boundaries under Ray)
        return type(self), (self.root, self.kind)


def _root_exists(root: str | Path | StorePath) -> bool:
    """Whether anything exists at a store root (a remote one that cannot be reached counts as existing:
    the error then names the missing ``commits/``, which is all that is known)."""
    try:
        return store_root(root).exists()
    except Exception:  # noqa: BLE001 — unknown is reported as "exists" (the message above says why it is no store)
        return True


def conversation_key(conversation_id: str) -> str:
    """File-system-safe, collision-free name for a conversation id (readable prefix + hash)."""
    digest = hashlib.sha1(conversation_id.encode("utf-8")).hexdigest()[:_KEY_HASH_CHARS]
    return f"{_UNSAFE.sub('_', conversation_id)[:_KEY_PREFIX_CHARS]}-{digest}"


def new_generation(previous: CommitMarker | None) -> str:
    """A fresh generation name after the one ``previous`` (a commit marker, or None) names.

    The sequence orders generations; the random part makes the name unique even when two writers
    (which the write lock normally prevents) start from the same marker, so no file is overwritten.
    """
    return f"g{generation_seq(marker_generation(previous)) + 1:06d}-{uuid.uuid4().hex[:8]}"


def marker_generation(marker: CommitMarker | None) -> str | None:
    """The generation a commit marker names (None: no marker, or a store written before generations)."""
    return None if marker is None else marker.generation


def generation_seq(generation: str | None) -> int:
    """The sequence number of a generation name (0 for the fixed paths of older stores)."""
    m = _GENERATION.fullmatch(generation or "")
    return int(m.group(1)) if m else 0


def atomic_write_text(path: AnyPath, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old or the new content, never a mix
    (an object store's single write already is; a local file is written aside and renamed)."""
    if isinstance(path, StorePath):
        path.write_text(text, encoding="utf-8")
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class StoreLayout:
    """Paths of one store directory. Every module asks this class; none spells a path itself."""

    def __init__(self, root: str | Path | StorePath, settings: StoreConfig | None = None) -> None:
        """``settings``: the ``store`` config section this store is used with (garbage age,
        parallel reads, and for a remote root its index cache and leases). None: the settings a
        remote root already carries, else the packaged defaults — never a process-wide value."""
        self.root: AnyPath = store_root(root, settings)
        self.settings: StoreConfig = (settings if settings is not None else
                                      self.root.settings if isinstance(self.root, StorePath) else default_settings())
        # remote stores: markers read so far, by path -> (size, mtime, marker); see _remote_markers
        self._marker_memo: dict[StorePath, tuple[int, float, CommitMarker | None]] = {}

    @property
    def remote(self) -> bool:
        """True when the store lives in a ``pyarrow.fs`` filesystem rather than a local directory."""
        return isinstance(self.root, StorePath)

    # -- directories and files ------------------------------------------------------------------
    @property
    def manifest_path(self) -> AnyPath:
        return self.root / "manifest.json"

    @property
    def commits_dir(self) -> AnyPath:
        return self.root / "commits"

    @property
    def errors_dir(self) -> AnyPath:
        return self.root / "errors"

    def claims_dir(self, run_id: str) -> AnyPath:
        return self.root / "_claims" / run_id

    def claim_path(self, run_id: str, key: str) -> AnyPath:
        return self.claims_dir(run_id) / f"{key}.json"

    def table_dir(self, table: str) -> AnyPath:
        return self.root / table

    def part_path(self, table: str, key: str, generation: str) -> AnyPath:
        """One conversation's own (not yet compacted) Parquet part of ``table`` in ``generation``."""
        return self.table_dir(table) / f"{key}.{generation}.parquet"

    def index_dir(self, key: str, generation: str | None = None) -> AnyPath:
        """The FAISS indexes of one conversation's ``generation``; without it, the conversation's
        index directory (which holds every generation)."""
        return self.root / "index" / key if generation is None else self.root / "index" / key / generation

    @staticmethod
    def index_file(index_dir: AnyPath, table: str) -> AnyPath:
        """The FAISS index of ``table`` in a generation's index directory."""
        return index_dir / f"{table}.faiss"

    @staticmethod
    def ids_file(index_dir: AnyPath) -> AnyPath:
        """``ids.json`` of a generation's index directory: each indexed table's ids in row order, and ``dim``."""
        return index_dir / "ids.json"

    def segstate_path(self, key: str, generation: str) -> AnyPath:
        """The segmenter's resume point saved with a generation (docs/incremental.md)."""
        return self.root / SEGSTATE_DIR / f"{key}.{generation}.json"

    def marker_part_path(self, table: str, marker: CommitMarker) -> AnyPath:
        """The own Parquet part of ``table`` that a commit marker names (not for compacted tables:
        those live in the row group ``marker.location[table]``, see ``reader.read_part``)."""
        return self.part_path(table, marker.key, _generation_of(marker))

    def marker_index_dir(self, marker: CommitMarker) -> AnyPath:
        """The directory of the FAISS indexes and ``ids.json`` that a commit marker names."""
        return self.index_dir(marker.key, _generation_of(marker))

    def marker_segstate_path(self, marker: CommitMarker) -> AnyPath:
        """The segmenter resume point a commit marker names (the file may be absent: a generation
        committed without one): the newest one its base or deltas wrote."""
        return self.segstate_path(marker.key, marker.segstate_generation or _generation_of(marker))

    def generation_paths(self, key: str, complete: bool = True) -> dict[str | None, list[AnyPath]]:
        """Existing files and directories of conversation ``key`` by generation (None, only with
        ``complete``: files of the version-1 fixed paths that no migration removed): its Parquet
        parts, segmenter states and index directories, the index directory last
        in each list (removal takes it last, see below). Names are parsed exactly, so another key
        that starts with this one never matches.

        ``complete=True`` lists the shared table and ``segstate/`` directories and so finds every
        file of the conversation (erasure, checks). Those listings grow with the store — on an
        object store each one is a LIST of every conversation's objects — so a commit removing its
        old generations asks with ``complete=False``: a commit writes its generation's indexes
        first (writer.py), so listing the conversation's own ``index/<key>/`` finds every generation
        that left any file, and its parts and state are then looked up by name. What this misses (a
        generation whose index files are gone, e.g. after a removal that died half-way) no marker
        names, and the garbage sweep (gc.py) removes it."""
        if complete:
            return self._scanned_generation_paths(key)
        out: dict[str | None, list[AnyPath]] = {}
        idx = self.index_dir(key)
        gens = [f for f in (idx.iterdir() if self.remote or idx.is_dir() else [])
                if f.is_dir() and _GENERATION.fullmatch(f.name)]

        def existing(paths: list[AnyPath]) -> list[AnyPath]:
            return [p for p in paths if p.exists()]
        for g in sorted(gens):
            out[g.name] = existing([*(self.part_path(t, key, g.name) for t in table_names()),
                                    self.segstate_path(key, g.name)]) + [g]
        return out

    def _scanned_generation_paths(self, key: str) -> dict[str | None, list[AnyPath]]:
        """:meth:`generation_paths` from listings of every directory that holds per-conversation files."""
        out: dict[str | None, list[AnyPath]] = {}

        def add(gen: str | None, path: AnyPath) -> None:
            out.setdefault(gen, []).append(path)

        def own(name: str, suffix: str) -> tuple[bool, str | None]:
            """(belongs to ``key``, its generation) for ``<key>[.<gen>]<suffix>``."""
            parsed = split_generation_name(name, suffix)
            return (parsed is not None and parsed[0] == key), (parsed[1] if parsed else None)
        for table in table_names():
            d = self.table_dir(table)
            if d.is_dir():
                for f in d.iterdir():
                    mine, gen = own(f.name, ".parquet")
                    if mine:
                        add(gen, f)
        sdir = self.root / SEGSTATE_DIR
        if sdir.is_dir():
            for f in sdir.iterdir():
                mine, gen = own(f.name, ".json")
                if mine and gen is not None:
                    add(gen, f)
        idx = self.index_dir(key)
        if idx.is_dir():
            for f in sorted_entries(idx):
                add(f.name if f.is_dir() and _GENERATION.fullmatch(f.name) else None, f)
        return out

    def conversation_paths(self, key: str) -> list[AnyPath]:
        """Every file or directory that belongs to conversation ``key`` alone (existing or not):
        the commit marker first, then its own Parquet parts, FAISS indexes and build claims. Erasure
        (:mod:`.erase`) removes exactly these; a new per-conversation file must be listed here. Rows
        in shared ``compact-*.parquet`` files and ``errors/`` are not paths of one conversation (see
        :mod:`.compact`, :mod:`.erase`)."""
        paths = [self.marker_path(key), self.index_dir(key), self.forgotten_path(key)]
        # parts and segmenter states of every generation, and any version-1 fixed-path part (the
        # index directory above holds all of its generations)
        paths += [p for ps in self.generation_paths(key).values() for p in ps
                  if p.parent != self.index_dir(key) and p not in paths]
        paths += sorted((self.root / "_claims").glob(f"*/{key}.json"))  # keys contain no glob characters
        return paths

    # -- locks (io/store/locks.py): named by a hash of the key, so no lock file spells an id ----
    @property
    def locks_dir(self) -> AnyPath:
        return self.root / "_locks"

    def _lock_stem(self, key: str) -> AnyPath:
        return self.locks_dir / hashlib.sha256(key.encode("utf-8")).hexdigest()[:24]

    def write_lock_path(self, key: str) -> AnyPath:
        """flock(2) file serialising writers (appends, erasure) of one conversation."""
        return self._lock_stem(key).with_suffix(".lock")

    def encode_lock_path(self, key: str) -> AnyPath:
        """Lock serialising the background encodings of one conversation (ingest/increment/
        ``catch_up``): they segment and encode without the write lock, so appends go on."""
        return self._lock_stem(key).with_suffix(".encode")

    def deleting_path(self, key: str) -> AnyPath:
        """Present while (or since a crashed) erasure of conversation ``key`` runs; appends refuse then."""
        return self._lock_stem(key).with_suffix(".deleting")

    @property
    def store_lock_path(self) -> AnyPath:
        """flock(2) file serialising store-wide rewrites (erasure of rows in shared compacted files)."""
        return self.locks_dir / "store.lock"

    def marker_path(self, key: str) -> AnyPath:
        return self.commits_dir / f"{key}.json"

    def forgotten_path(self, key: str) -> AnyPath:
        """The tombstones of conversation ``key``'s forgotten records (io/store/tombstones.py): kept
        across generations, so no later commit of the conversation writes them back."""
        return self.root / FORGOTTEN_DIR / f"{key}.json"

    def create(self) -> None:
        """Make the directories a writer needs."""
        for d in (*(self.table_dir(t) for t in table_names()), self.errors_dir, self.root / "index", self.commits_dir,
                  self.root / SEGSTATE_DIR):
            d.mkdir(parents=True, exist_ok=True)

    # -- reading the commit state ---------------------------------------------------------------
    def is_store(self) -> bool:
        """True when ``root`` holds a store (a writer has created ``commits/``)."""
        return self.commits_dir.is_dir()

    def has_manifest(self) -> bool:
        return self.manifest_path.exists()

    def read_manifest(self) -> dict[str, Any]:
        """``manifest.json``, or {} before the first build finished."""
        p = self.manifest_path
        return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}

    def read_marker(self, key: str) -> CommitMarker | None:
        """The commit marker of one conversation key, or None when it is not (fully) committed.
        :class:`~lychee_ray.io.store.marker.MarkerError` for a file that is no usable marker."""
        return self._read_marker_file(self.marker_path(key))

    @staticmethod
    def _read_marker_file(path: AnyPath) -> CommitMarker | None:
        try:
            return CommitMarker.from_json(path.read_text(encoding="utf-8"), str(path))
        except (FileNotFoundError, json.JSONDecodeError):
            return None  # absent, or being replaced or removed right now: not visible

    def write_marker(self, marker: CommitMarker) -> None:
        """Publish ``marker`` (one atomic write; the caller holds the conversation's write lock). On
        an object store the caller's lease is checked first (:func:`~.lease.check_held`): a writer
        whose lease may have expired raises :class:`~.lease.LeaseLost` and publishes nothing."""
        path, lock = self.marker_path(marker.key), self.write_lock_path(marker.key)
        if isinstance(lock, StorePath):  # a remote store (the marker and its lock share the root)
            check_held(lock)
        atomic_write_text(path, marker.to_json())

    def iter_markers(self) -> Iterator[CommitMarker]:
        """Commit markers of all visible conversations, in key order."""
        if isinstance(self.commits_dir, StorePath):
            yield from self._remote_markers(self.commits_dir)
            return
        for p in sorted(self.commits_dir.glob("*.json")):
            m = self._read_marker_file(p)
            if m is not None:
                yield m

    def _remote_markers(self, commits: StorePath) -> list[CommitMarker]:
        """Markers of a remote store: one listing, then only the markers new or rewritten since this
        layout last read them (same size and mtime = same object), fetched ``store.io_threads`` at a
        time — one GET costs tens of milliseconds on an object store, and Serve re-scans on reload."""
        listed = sorted((p, size, mtime) for p, size, mtime in commits.list_stats() if p.name.endswith(".json"))
        todo = [(p, size, mtime) for p, size, mtime in listed if self._marker_memo.get(p, (None, None))[:2] != (size, mtime)]

        if todo:
            with ThreadPoolExecutor(max_workers=max(1, min(self.settings.io_threads, len(todo)))) as pool:
                for (p, size, mtime), m in zip(todo, pool.map(self._read_marker_file, [t[0] for t in todo]), strict=False):
                    self._marker_memo[p] = (size, mtime, m)
        keep = {p for p, _, _ in listed}
        self._marker_memo = {p: v for p, v in self._marker_memo.items() if p in keep}
        return [m for p, _, _ in listed if (m := self._marker_memo[p][2]) is not None]

    def commit_state(self) -> tuple[float, float]:
        """(mtime of the manifest, state of the commits/ listing): changes when a build commits (0.0 = absent)."""
        def mtime(p: AnyPath) -> float:
            try:
                return p.stat().st_mtime
            except FileNotFoundError:
                return 0.0

        return mtime(self.manifest_path), listing_state(self.commits_dir)

    # -- version 1 (read by migrate.py alone) ----------------------------------------------------
    def v1_part_path(self, table: str, key: str) -> AnyPath:
        """A pre-generation store's fixed Parquet part of ``table`` (its indexes lay directly in
        ``index_dir(key)``)."""
        return self.table_dir(table) / f"{key}.parquet"

    @property
    def v1_staging_dir(self) -> AnyPath:
        """Where version-1 writers of the oldest stores assembled a commit before renaming it."""
        return self.root / "_staging"


def _generation_of(marker: CommitMarker) -> str:
    """The generation a marker names; a version-1 marker of the fixed-path scheme names none."""
    if marker.generation is None:
        raise MarkerError("needs_migration", f"conversation {marker.conversation_id!r} is stored in the version-1 "
                                             "fixed-path layout; run `lychee-ray migrate --memory STORE`",
                          marker.key)
    return marker.generation


def split_generation_name(name: str, suffix: str) -> tuple[str, str | None] | None:
    """(key, generation) of a per-conversation file name ``<key>[.<gen>]<suffix>`` (generation None:
    the fixed name of older stores); None for other names (compacted files, temporaries)."""
    if not name.endswith(suffix) or name.startswith((".", "compact-")):
        return None
    stem = name[: -len(suffix)]
    head, _, gen = stem.rpartition(".")
    if head and _GENERATION.fullmatch(gen):
        return head, gen
    return stem, None  # keys end in "-<10 hex>", so no key is mistaken for "<key>.<gen>"


def is_generation(name: str) -> bool:
    """True for a generation name (``g<seq>-<random>``)."""
    return _GENERATION.fullmatch(name) is not None


def as_layout(root: str | Path | StorePath | StoreLayout, settings: StoreConfig | None = None) -> StoreLayout:
    """``root`` as a :class:`StoreLayout` (a layout is used as it is: it carries its settings)."""
    return root if isinstance(root, StoreLayout) else StoreLayout(root, settings)


def iter_markers(root: str | Path | StorePath) -> Iterator[CommitMarker]:
    """Commit markers of all visible conversations of the store at ``root``, in key order."""
    return StoreLayout(root).iter_markers()
