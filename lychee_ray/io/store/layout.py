"""Where everything of a memory store lives, and the commit protocol's file-level rules.

Layout (DESIGN §2)::

    ROOT/manifest.json
    ROOT/records/<key>.parquet   nodes/  turns/  segments/  usage/     one part per conversation
                                                                      (or a row group of compact-*.parquet)
    ROOT/errors/<run>-<n>.parquet                                     quarantined inputs / stages, warnings
    ROOT/index/<key>/{records,nodes,turns}.faiss + ids.json           IndexIDMap2(IndexFlatIP)
    ROOT/commits/<key>.json                                           commit marker (last write)
    ROOT/_staging/<key>.<uuid>/                                       a commit being assembled
    ROOT/_claims/<run>/<key>.json                                     which run builds which conversation

A conversation is visible to readers only through its commit marker. A commit stages every file,
removes the old marker, moves the files into place and writes the new marker last, so a reader
never sees half a conversation and a crash leaves at worst an invisible, re-buildable one.
This module is the only place that spells these paths.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import uuid
from pathlib import Path
from typing import Any, Iterator

STORE_VERSION = 1
TABLES = ("records", "nodes", "turns", "segments", "usage")
INDEXES = ("records", "nodes", "turns")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
# the key is the readable id plus a short hash that keeps two ids apart after unsafe characters are replaced
_KEY_PREFIX_CHARS = 80
_KEY_HASH_CHARS = 10


class NotAStoreError(FileNotFoundError):
    """A path that is not a memory store (it has no ``commits/`` directory)."""

    def __init__(self, root: str | Path) -> None:
        super().__init__(f"not a memory store (no commits/): {root}")
        self.root = Path(root)


def conversation_key(conversation_id: str) -> str:
    """File-system-safe, collision-free name for a conversation id (readable prefix + hash)."""
    digest = hashlib.sha1(conversation_id.encode("utf-8")).hexdigest()[:_KEY_HASH_CHARS]
    return f"{_UNSAFE.sub('_', conversation_id)[:_KEY_PREFIX_CHARS]}-{digest}"


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` so that readers see the old or the new content, never a mix."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


class StoreLayout:
    """Paths of one store directory. Every module asks this class; none spells a path itself."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    # -- directories and files ------------------------------------------------------------------
    @property
    def manifest_path(self) -> Path:
        return self.root / "manifest.json"

    @property
    def commits_dir(self) -> Path:
        return self.root / "commits"

    @property
    def errors_dir(self) -> Path:
        return self.root / "errors"

    @property
    def staging_dir(self) -> Path:
        return self.root / "_staging"

    def claims_dir(self, run_id: str) -> Path:
        return self.root / "_claims" / run_id

    def claim_path(self, run_id: str, key: str) -> Path:
        return self.claims_dir(run_id) / f"{key}.json"

    def table_dir(self, table: str) -> Path:
        return self.root / table

    def part_path(self, table: str, key: str) -> Path:
        """One conversation's own (not yet compacted) Parquet part of ``table``."""
        return self.table_dir(table) / f"{key}.parquet"

    def index_dir(self, key: str) -> Path:
        return self.root / "index" / key

    def marker_path(self, key: str) -> Path:
        return self.commits_dir / f"{key}.json"

    def create(self) -> None:
        """Make the directories a writer needs."""
        for d in (*(self.table_dir(t) for t in TABLES), self.errors_dir, self.root / "index", self.commits_dir,
                  self.staging_dir):
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

    def read_marker(self, key: str) -> dict[str, Any] | None:
        """The commit marker of one conversation key, or None when it is not (fully) committed."""
        try:
            return json.loads(self.marker_path(key).read_text(encoding="utf-8"))
        except (FileNotFoundError, json.JSONDecodeError):
            return None

    def iter_markers(self) -> Iterator[dict[str, Any]]:
        """Commit markers of all visible conversations, in key order."""
        for p in sorted(self.commits_dir.glob("*.json")):
            try:
                yield json.loads(p.read_text(encoding="utf-8"))
            except (json.JSONDecodeError, FileNotFoundError):
                continue  # a marker being replaced right now; it is not visible yet

    def commit_state(self) -> tuple[float, float]:
        """(mtime of the manifest, mtime of commits/): changes when a build commits (0.0 = absent)."""
        def mtime(p: Path) -> float:
            try:
                return p.stat().st_mtime
            except FileNotFoundError:
                return 0.0

        return mtime(self.manifest_path), mtime(self.commits_dir)


def iter_markers(root: str | Path) -> Iterator[dict[str, Any]]:
    """Commit markers of all visible conversations of the store at ``root``, in key order."""
    return StoreLayout(root).iter_markers()
