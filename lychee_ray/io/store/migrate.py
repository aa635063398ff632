"""Version-1 stores to version 2 (:data:`~lychee_ray.io.store.layout.STORE_VERSION`).

What a version-1 store may hold that version 2 does not:

* commit markers without a ``version`` field: rewritten as version-2 markers (same fields);
* markers of the pre-generation scheme (no ``generation``: fixed paths ``<table>/<key>.parquet``
  and ``index/<key>/*.faiss`` + ``ids.json``, no segmenter state): their files are copied into a
  fresh generation, the marker naming it is written, then the fixed-path files are removed — the
  commit protocol's order (new files under new names, the marker last, old files after), so a
  crash leaves the old marker and its files intact, or the new ones; running it again finishes;
* a ``_staging/`` directory (the oldest writers assembled commits there): removed;
* ``manifest.json`` with ``version`` 1: set to 2.

:func:`migrate_store` does all of it (``lychee-ray migrate --memory STORE``; a build runs it when it
opens a version-1 store, :func:`migrate_if_needed`); :func:`migrate_conversation` does one
conversation whose write lock the caller holds (an append meeting a fixed-path marker). Readers
never write: a fixed-path marker read before migration raises ``MarkerError("needs_migration")``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from lychee_ray.io.store.fs import AnyPath, remove_tree
from lychee_ray.io.store.remote_path import StorePath
from lychee_ray.io.store.layout import LEGACY_STORE_VERSION, STORE_VERSION, StoreLayout, as_layout, atomic_write_text, new_generation
from lychee_ray.io.store.locks import ConversationDeleting, conversation_write_lock, store_lock
from lychee_ray.io.store.marker import MARKER_VERSION, CommitMarker, new_lineage
from lychee_ray.io.store.tables import table_names


@dataclass
class MigrationReport:
    """What a migration changed (all zero / False: the store was already version 2)."""

    from_version: int
    to_version: int = STORE_VERSION
    markers_rewritten: int = 0
    # conversations moved from the fixed paths into a generation
    conversations_moved: int = 0
    staging_removed: bool = False
    # conversations being erased (their erasure finishes them; nothing to migrate)
    skipped: list[str] = field(default_factory=list)


def store_version(root: str | Path | StorePath | StoreLayout) -> int:
    """The version of the store at ``root``: its manifest's; without a manifest (a first build
    that has not finished) 1 when any marker or ``_staging/`` is of version 1, else the current."""
    layout = as_layout(root)
    manifest = layout.read_manifest()
    if manifest:
        return int(manifest.get("version", LEGACY_STORE_VERSION))
    old = layout.v1_staging_dir.is_dir() or any(m.version < MARKER_VERSION for m in layout.iter_markers())
    return LEGACY_STORE_VERSION if old else STORE_VERSION


def migrate_if_needed(root: str | Path | StorePath | StoreLayout) -> MigrationReport | None:
    """:func:`migrate_store` when the store is older than this code (None: nothing to do)."""
    layout = as_layout(root)
    if not layout.is_store() or store_version(layout) >= STORE_VERSION:
        return None
    return migrate_store(layout)


def _copy(src: AnyPath, dest: AnyPath) -> None:
    """One file to a new name (bytes; works alike on local disk and object stores)."""
    if not isinstance(dest, StorePath):
        dest.parent.mkdir(parents=True, exist_ok=True)
    dest.write_bytes(src.read_bytes())


def migrate_conversation(layout: StoreLayout, marker: CommitMarker) -> CommitMarker:
    """``marker`` as a version-2 marker, its files moved into a generation when it named the fixed
    paths; the new marker is written. The caller holds the conversation's write lock."""
    if marker.version >= MARKER_VERSION and marker.generation is not None:
        return marker
    lineage = marker.lineage or new_lineage()  # markers older than lineages get one now
    if marker.generation is not None:  # a generation-era marker: only the format changes
        new = marker.model_copy(update={"version": MARKER_VERSION, "lineage": lineage})
        layout.write_marker(new)
        return new
    key = marker.key
    gen = new_generation(None)
    fixed_index = [f for f in layout.index_dir(key).iterdir() if not f.is_dir()] if layout.index_dir(key).is_dir() else []
    # the indexes first, as every commit writes them (index/<key>/<gen>/ is how commits find generations)
    for f in fixed_index:
        _copy(f, layout.index_dir(key, gen) / f.name)
    own_parts = [t for t in table_names() if t not in marker.location and layout.v1_part_path(t, key).exists()]
    for t in own_parts:
        _copy(layout.v1_part_path(t, key), layout.part_path(t, key, gen))
    new = marker.model_copy(update={"version": MARKER_VERSION, "generation": gen, "lineage": lineage})
    layout.write_marker(new)  # from here on readers load the generation
    for t in own_parts:
        layout.v1_part_path(t, key).unlink(missing_ok=True)
    for f in fixed_index:
        f.unlink(missing_ok=True)
    return new


def migrate_store(root: str | Path | StorePath | StoreLayout) -> MigrationReport:
    """Bring the store at ``root`` to version 2 (see the module doc). Holds the store lock (no
    compaction or erasure meanwhile) and each conversation's write lock while moving it, so it
    may run while the store is served or appended to. Idempotent."""
    layout = as_layout(root)
    report = MigrationReport(from_version=store_version(layout))
    with store_lock(layout):
        for seen in list(layout.iter_markers()):
            if seen.version >= MARKER_VERSION:
                continue
            try:
                with conversation_write_lock(layout, seen.conversation_id):
                    current = layout.read_marker(seen.key)  # an append may have committed meanwhile
                    if current is None or current.version >= MARKER_VERSION:
                        continue
                    report.conversations_moved += current.generation is None
                    migrate_conversation(layout, current)
                    report.markers_rewritten += 1
            except ConversationDeleting:
                report.skipped.append(seen.conversation_id)
        if layout.v1_staging_dir.is_dir():
            remove_tree(layout.v1_staging_dir)
            report.staging_removed = True
        manifest = layout.read_manifest()
        if manifest and int(manifest.get("version", LEGACY_STORE_VERSION)) < STORE_VERSION:
            atomic_write_text(layout.manifest_path, json.dumps({**manifest, "version": STORE_VERSION}, indent=1,
                                                               sort_keys=True))
    return report


__all__ = ["MigrationReport", "migrate_conversation", "migrate_if_needed", "migrate_store", "store_version"]
