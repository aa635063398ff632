"""Garbage of crashed writers: files no commit marker names, removed once they are old enough.

A commit writes its generation's files first and its marker last (layout.py), so a writer killed in
between leaves files no reader trusts. The conversation's next commit removes them; when there is
no next commit (the re-run finds the conversation already built, or the input is gone), the sweep
at the end of every build run does (:func:`collect_garbage`), and so does
``lychee-ray verify --collect-garbage``. What it removes:

* per-conversation parts, index generations and segmenter states of a generation its conversation's
  marker names neither as its base nor as one of its deltas (or of a conversation with no marker at
  all), and version-1 fixed-path files of a conversation whose marker names a generation (a
  migration that died before removing them);
* ``compact-*.parquet`` files no marker locates (a compaction or erasure that died half-way);
* ``_claims/`` of runs that never finished (``_staging/`` of version-1 stores goes with :mod:`.migrate`).

Only files older than ``store.garbage_min_age_s`` go: a writer that is committing right now has
files without a marker too, and it finishes (or renews its lease) well within that age.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from lychee_ray.io.store.fs import AnyPath, remove_tree, tree_size
from lychee_ray.io.store.remote_path import StorePath
from lychee_ray.io.store.tables import table_names
from lychee_ray.io.store.layout import (
    SEGSTATE_DIR,
    StoreLayout,
    as_layout,
    is_generation,
    split_generation_name,
)


@dataclass
class GarbageReport:
    """What a sweep found and removed."""

    files_removed: int = 0
    bytes_freed: int = 0
    paths: list[str] = field(default_factory=list)


def _newest_mtime(path: AnyPath) -> float:
    """The newest modification time of a file or of any file below a directory (0.0: none)."""
    if isinstance(path, StorePath):
        if path.is_dir():
            return max((m for _, _, m in _walk_stats(path)), default=0.0)
        try:
            return path.stat().st_mtime
        except FileNotFoundError:
            return 0.0
    if path.is_dir():
        return max((p.stat().st_mtime for p in path.rglob("*") if p.is_file()), default=path.stat().st_mtime)
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


def _walk_stats(path: StorePath) -> list[tuple[StorePath, int, float]]:
    import pyarrow.fs as pafs

    out = []
    for i in path._children(recursive=True):
        if i.type == pafs.FileType.File:
            out.append((path._from_info(i), int(i.size or 0),
                        i.mtime.timestamp() if i.mtime is not None else 0.0))
    return out


def _index_dirs(index_root: AnyPath) -> list[tuple[AnyPath, list[AnyPath]]]:
    """Each conversation's index directory with its entries (generation directories, older fixed
    files). On an object store from one recursive listing (pages of 1,000 keys) rather than one
    LIST per conversation, which at thousands of conversations is what a sweep would cost."""
    if not isinstance(index_root, StorePath):
        return [(k, sorted(k.iterdir()) if k.is_dir() else []) for k in sorted(index_root.iterdir())] \
            if index_root.is_dir() else []
    base = index_root.path.rstrip("/") + "/"
    dirs: dict[str, AnyPath] = {}
    children: dict[str, list[AnyPath]] = {}
    for info in index_root._children(recursive=True):
        parts = info.path[len(base):].split("/") if info.path.startswith(base) else []
        if len(parts) == 1:
            dirs[parts[0]] = index_root._from_info(info)
            children.setdefault(parts[0], [])
        elif len(parts) == 2:
            children.setdefault(parts[0], []).append(index_root._from_info(info))
    return [(dirs.get(k, index_root / k), sorted(children[k])) for k in sorted(children)]


def garbage_paths(root: str | Path | StorePath | StoreLayout, min_age_s: float | None = None) -> list[AnyPath]:
    """Files and directories of the store at ``root`` that no marker names and that are older than
    ``min_age_s`` (default: the layout's ``store.garbage_min_age_s``)."""
    layout = as_layout(root)
    age = layout.settings.garbage_min_age_s if min_age_s is None else min_age_s
    cutoff = time.time() - age
    markers = {m.key: m for m in layout.iter_markers()}
    live = {k: set(m.generations) for k, m in markers.items()}  # a base and its deltas
    located = {(t, loc.file) for m in markers.values() for t, loc in m.location.items()}
    found: list[AnyPath] = []

    def dead(key: str, gen: str | None) -> bool:
        return key not in live or gen not in live[key]

    for table in table_names():
        for f in layout.table_dir(table).iterdir() if layout.table_dir(table).is_dir() else []:
            if f.name.startswith("compact-"):
                if (table, f.name) not in located:
                    found.append(f)
                continue
            parsed = split_generation_name(f.name, ".parquet")
            if parsed is not None and dead(*parsed):
                found.append(f)
    for kdir, children in _index_dirs(layout.root / "index"):
        if kdir.name not in live:
            found.append(kdir)
            continue
        for g in children:
            if g.is_dir() and is_generation(g.name):
                if g.name not in live[kdir.name]:
                    found.append(g)
            elif live[kdir.name]:  # a version-1 fixed-path index file a migration died before removing
                found.append(g)
    sdir = layout.root / SEGSTATE_DIR
    for f in sdir.iterdir() if sdir.is_dir() else []:
        parsed = split_generation_name(f.name, ".json")
        if parsed is not None and parsed[1] is not None and dead(*parsed):
            found.append(f)
    claims = layout.root / "_claims"
    found += list(claims.iterdir()) if claims.is_dir() else []
    return [p for p in found if _newest_mtime(p) < cutoff]


def collect_garbage(root: str | Path | StorePath | StoreLayout, min_age_s: float | None = None) -> GarbageReport:
    """Remove :func:`garbage_paths`; returns what went."""
    report = GarbageReport()
    for p in garbage_paths(root, min_age_s):
        files, size = tree_size(p)
        remove_tree(p)
        report.files_removed += files
        report.bytes_freed += size
        report.paths.append(str(p))
    return report


__all__ = ["GarbageReport", "collect_garbage", "garbage_paths"]
