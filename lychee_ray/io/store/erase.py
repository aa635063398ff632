"""Erasure: remove a conversation, or all of a user's conversations, from every file of a store.

:func:`erase_conversation` and :func:`erase_user` remove, for each conversation erased:

* its commit marker (first: from then on no reader that re-scans the markers sees it);
* every path :meth:`StoreLayout.conversation_paths` lists — its own Parquet parts of every table,
  its FAISS indexes and id maps, staging directories, build claims, and whatever per-conversation
  state a writer keeps there;
* its rows in shared ``compact-*.parquet`` files (the row groups its marker locates, plus any row
  whose ``conversation_id`` matches): each such file is written anew under a new name without
  them, the other conversations' markers are re-pointed one by one (atomically, each under its
  write lock), and only then is the old file deleted — a reader holding an old marker finds the
  old file or none (and re-reads the markers), never another conversation's rows;
* its rows in ``errors/`` (files rewritten without them, or removed when nothing is left);
* and it updates ``manifest.json``: counts recomputed from the markers, plus one entry in its
  ``erasures`` log (time, scope, how many conversations and rows, a hash of the id — never the id).

Concurrency (:mod:`.locks`): erasures hold the store lock (one at a time: each may rewrite shared
files). For each conversation the ``deleting`` flag is set first (appends refuse with
``ConversationDeleting``), then its write lock is taken (an append already committing finishes
first and is erased with the rest). The flag holds a journal (the marker), so an erasure that
crashed is finished by running it again; until then appends keep refusing.

Not covered: copies outside the store directory (input files, backups, logs of other tools), and
``errors/`` rows of a failed build when erasing by user (error rows carry no user id; erase those
conversations by id).
"""

from __future__ import annotations

import hashlib
import json
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Literal

import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, Field

from lychee_ray.io.store.fs import (
    AnyPath,
    parquet_file,
    parquet_writer,
    read_parquet,
    remove_tree,
    replace,
    sorted_entries,
    temp_sibling,
    tree_size,
    write_parquet,
)
from lychee_ray.io.store.remote_path import StorePath
from lychee_ray.io.store.layout import (
    NotAStoreError,
    StoreLayout,
    as_layout,
    atomic_write_text,
    conversation_key,
)
from lychee_ray.io.store.locks import (
    LockHandle,
    flock_path,
    pending_erasures,
    read_journal,
    release,
    store_lock,
)
from lychee_ray.io.store.marker import CommitMarker, TableLocation
from lychee_ray.io.store.tables import table_names
from lychee_ray.io.store.writer import StoreWriter
from lychee_ray.names import Scope

EraseScope = Scope  # what an erasure removes: one conversation, or a user's
# manifest fields write_manifest computes from the markers; everything else in the manifest is kept
_COMPUTED = frozenset({"version", "written_at", "backend", "models", "embedding_dim", "fingerprint", "counts", "tokens"})
_ID_HASH_CHARS = 16


class EraseReport(BaseModel):
    """What an erasure removed (also the body of ``DELETE /v1/conversations/{id}`` and ``/v1/users/{id}``)."""

    scope: EraseScope
    conversations: int = Field(description="committed conversations erased")
    conversation_ids: list[str] = Field(description="their ids (returned to the caller, never stored)")
    rows_removed: dict[str, int] = Field(description="rows removed per table (records, nodes, turns, segments, "
                                                     "usage, errors)")
    files_removed: int = Field(description="files deleted (own parts, index files, markers, emptied shared files)")
    files_rewritten: int = Field(description="shared files (compacted tables, errors/) written anew without the rows")
    bytes_freed: int = Field(description="bytes the store shrank by")
    seconds: float


class NothingToErase(KeyError):
    """No trace of the conversation (or user) in the store. ``kind`` is ``"not_found"``."""

    kind: Literal["not_found"] = "not_found"

    def __init__(self, scope: EraseScope, ident: str) -> None:
        super().__init__(f"unknown {scope} {ident!r}: nothing to delete")
        self.scope: EraseScope = scope
        self.ident = ident


def erase_conversation(root: str | Path | StorePath | StoreLayout, conversation_id: str, *,
                       owner: str | None = None) -> EraseReport:
    """Remove every trace of ``conversation_id`` from the store at ``root`` (see the module doc).

    ``owner``: erase it only if it belongs to this user (checked under the store lock: a
    conversation re-created for another owner meanwhile is not touched). Raises
    :class:`NothingToErase` when the store holds nothing of it (or it is not ``owner``'s),
    :class:`NotAStoreError` when ``root`` is not a store. Running it again after a crash finishes
    the erasure.
    """
    layout = _open(root)
    with store_lock(layout):
        key = conversation_key(conversation_id)
        marker = layout.read_marker(key)
        target = _journal(marker) if marker is not None else read_journal(layout.deleting_path(key))
        if target is None and any(p.exists() for p in layout.conversation_paths(key)):
            target = {"conversation_id": conversation_id, "key": key}  # files of an unfinished build
        if owner is not None and (target is None or _owner(target) != owner):
            raise NothingToErase("conversation", conversation_id)
        return _erase(layout, "conversation", conversation_id, [target] if target else [], {conversation_id})


def erase_user(root: str | Path | StorePath | StoreLayout, user_id: str) -> EraseReport:
    """Remove every conversation whose owner is ``user_id`` (a conversation without a user id is
    owned by its own id, as everywhere). :class:`NothingToErase` when the user has none."""
    layout = _open(root)
    with store_lock(layout):
        targets = {m.conversation_id: _journal(m) for m in layout.iter_markers() if m.owner == user_id}
        for j in pending_erasures(layout):  # conversations of a crashed erasure of this user
            if _owner(j) == user_id:
                targets.setdefault(j["conversation_id"], j)
        return _erase(layout, "user", user_id, list(targets.values()), set(targets))


def _open(root: str | Path | StorePath | StoreLayout) -> StoreLayout:
    layout = as_layout(root)
    if not layout.is_store():
        # (a layout's own root names it: str() of a layout object is not a path)
        raise NotAStoreError(root.root if isinstance(root, StoreLayout) else root)
    return layout


def _journal(marker: CommitMarker) -> dict[str, Any]:
    """The erasure journal entry of a committed conversation (what a re-run needs to find its rows:
    ids, key and compacted locations; kept in its ``deleting`` flag file, :mod:`.locks`)."""
    return {"conversation_id": marker.conversation_id, "user_id": marker.user_id, "key": marker.key,
            "location": {t: loc.model_dump() for t, loc in marker.location.items()}}


def _owner(journal: dict[str, Any]) -> str:
    """The owner of a journal entry (its own id when it has no user id, as for markers)."""
    return journal.get("user_id") or journal["conversation_id"]


class _Tally:
    """Running counts of one erasure."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {t: 0 for t in (*table_names(), "errors")}
        self.files_removed = self.files_rewritten = self.bytes_freed = 0

    def remove(self, path: AnyPath, table: str | None = None) -> None:
        """Delete a file or directory tree, counting its files, bytes and (for a part) rows."""
        if path.is_dir():
            files, size = tree_size(path)
            remove_tree(path)
            self.files_removed += files
            self.bytes_freed += size
            return
        try:
            size = path.stat().st_size
        except FileNotFoundError:
            return
        if table is not None:
            try:
                self.rows[table] += parquet_file(path).metadata.num_rows
            except (OSError, pa.ArrowInvalid):
                pass  # an unreadable part: removed all the same
        path.unlink(missing_ok=True)
        self.files_removed += 1
        self.bytes_freed += size


def _erase(layout: StoreLayout, scope: EraseScope, ident: str, targets: list[dict[str, Any]], ids: set[str]) -> EraseReport:
    """The erasure proper; the caller holds the store lock."""
    t0 = time.perf_counter()
    tally = _Tally()
    now = datetime.now(timezone.utc).isoformat()
    journals = [{"conversation_id": t["conversation_id"], "user_id": t.get("user_id"), "key": t["key"],
                 "location": t.get("location") or {}, "erasing_since": t.get("erasing_since", now)} for t in targets]
    for j in journals:  # the flag first: from here on appends to these conversations refuse
        atomic_write_text(layout.deleting_path(j["key"]), json.dumps(j))
    held: list[tuple[LockHandle, AnyPath]] = []
    try:
        for j in journals:
            path = layout.write_lock_path(j["key"])
            handle = flock_path(path)
            assert handle is not None  # a blocking wait returns a lock
            held.append((handle, path))  # waits for an append that is committing right now
            m = layout.read_marker(j["key"])  # ... which may have committed a new generation
            if m is not None:
                j["location"] = _journal(m)["location"]
                atomic_write_text(layout.deleting_path(j["key"]), json.dumps(j))
        table_of = {layout.table_dir(t): t for t in table_names()}  # a conversation's own parts (any generation)
        for j in journals:
            for p in layout.conversation_paths(j["key"]):  # the marker first: invisible from here on
                tally.remove(p, table_of.get(p.parent) if p.suffix == ".parquet" else None)
        _rewrite_compacted(layout, journals, ids, tally)
        _rewrite_errors(layout, ids, tally)
        if not journals and not any(tally.rows.values()) and not tally.files_removed:
            raise NothingToErase(scope, ident)
        _update_manifest(layout, scope, ident, len(journals), tally, now)
    finally:
        for fd, path in held:
            release(fd, path)  # lock files of erased conversations go too
    for j in journals:  # done: only now may a write to these ids start a new conversation
        layout.deleting_path(j["key"]).unlink(missing_ok=True)
    return EraseReport(scope=scope, conversations=len(journals), conversation_ids=sorted(j["conversation_id"] for j in journals),
                       rows_removed=tally.rows, files_removed=tally.files_removed, files_rewritten=tally.files_rewritten,
                       bytes_freed=tally.bytes_freed, seconds=round(time.perf_counter() - t0, 4))


def _rewrite_compacted(layout: StoreLayout, journals: list[dict[str, Any]], ids: set[str], tally: _Tally) -> None:
    """Write every shared compacted file that holds erased rows anew without them, re-point the
    other conversations' markers, then delete the old files."""
    id_set = pa.array(sorted(ids), pa.string())
    remap: dict[str, dict[tuple[str, int], tuple[str, int]]] = {t: {} for t in table_names()}
    old_files: list[AnyPath] = []
    for table in table_names():
        drop = {(loc["file"], int(loc["row_group"])) for j in journals
                for t, loc in j["location"].items() if t == table and isinstance(loc, dict)}
        for f in sorted_entries(layout.table_dir(table), "compact-*.parquet"):
            pf = parquet_file(f)
            match_rows = "conversation_id" in pf.schema_arrow.names and len(id_set) > 0
            keep: list[tuple[int, pa.Table | None]] = []  # (old row group, filtered rows | None = as is)
            removed, changed = 0, False
            for rg in range(pf.num_row_groups):
                if (f.name, rg) in drop:  # (an empty row group too: no marker may point at it afterwards)
                    removed += pf.metadata.row_group(rg).num_rows
                    changed = True
                    continue
                if match_rows:
                    col = pf.read_row_group(rg, columns=["conversation_id"]).column(0)
                    hit = pc.fill_null(pc.is_in(col, value_set=id_set), False)
                    n = pc.sum(hit).as_py() or 0
                    if n:  # stray rows of an erased conversation in another's row group
                        removed, changed = removed + n, True
                        keep.append((rg, pf.read_row_group(rg).filter(pc.invert(hit))))
                        continue
                keep.append((rg, None))
            if not changed:
                continue
            tally.rows[table] += removed
            if not keep:
                old_files.append(f)
                continue
            new = layout.table_dir(table) / f"compact-{uuid.uuid4().hex[:12]}.parquet"  # as compact.py names them
            tmp = temp_sibling(new, "new")
            with parquet_writer(tmp, pf.schema_arrow) as w:
                for i, (rg, rows) in enumerate(keep):
                    part = rows if rows is not None else pf.read_row_group(rg)
                    w.write_table(part, row_group_size=max(1, part.num_rows))  # one row group each, as before
                    remap[table][(f.name, rg)] = (new.name, i)
            replace(tmp, new)
            tally.files_rewritten += 1
            tally.bytes_freed -= new.stat().st_size
            old_files.append(f)
    if any(remap.values()):
        _repoint_markers(layout, remap)
    for f in old_files:  # no marker points here any more
        tally.remove(f)


def _moved(marker: CommitMarker, remap: dict[str, dict[tuple[str, int], tuple[str, int]]]) -> dict[str, TableLocation]:
    """The marker's locations that moved to a rewritten file (table -> new location)."""
    out = {}
    for table, loc in marker.location.items():
        if table in remap:
            to = remap[table].get((loc.file, loc.row_group))
            if to is not None:
                out[table] = TableLocation(file=to[0], row_group=to[1])
    return out


def _repoint_markers(layout: StoreLayout, remap: dict[str, dict[tuple[str, int], tuple[str, int]]]) -> None:
    """Re-point every marker whose rows moved, each under its conversation's write lock (an append
    committing a new generation of it meanwhile wins: its marker is re-read under the lock)."""
    for m in list(layout.iter_markers()):
        if not _moved(m, remap):
            continue
        path = layout.write_lock_path(m.key)
        fd = flock_path(path)
        assert fd is not None  # a blocking wait returns a lock
        try:
            cur = layout.read_marker(m.key)
            moved = _moved(cur, remap) if cur is not None else {}
            if cur is not None and moved:
                layout.write_marker(cur.with_location(moved))
        finally:
            release(fd, path)


def _rewrite_errors(layout: StoreLayout, ids: set[str], tally: _Tally) -> None:
    """``errors/`` parts without the erased conversations' rows (emptied parts are removed)."""
    if not ids or not layout.errors_dir.is_dir():
        return
    id_set = pa.array(sorted(ids), pa.string())
    for f in sorted_entries(layout.errors_dir, "*.parquet"):
        t = read_parquet(f)
        if "conversation_id" not in t.column_names:
            continue
        hit = pc.fill_null(pc.is_in(t.column("conversation_id"), value_set=id_set), False)
        n = pc.sum(hit).as_py() or 0
        if not n:
            continue
        tally.rows["errors"] += n
        rest = t.filter(pc.invert(hit))
        if rest.num_rows == 0:
            tally.remove(f)
            continue
        size = f.stat().st_size
        tmp = temp_sibling(f, uuid.uuid4().hex)
        write_parquet(rest, tmp)
        replace(tmp, f)
        tally.files_rewritten += 1
        tally.bytes_freed += size - f.stat().st_size


def _update_manifest(layout: StoreLayout, scope: EraseScope, ident: str, conversations: int, tally: _Tally,
                     at: str) -> None:
    """Counts recomputed from the remaining markers; one ``erasures`` entry (the id only hashed)."""
    old = layout.read_manifest()
    log = list(old.get("erasures") or [])
    log.append({"at": at, "scope": scope, "conversations": conversations, "rows": sum(tally.rows.values()),
                "id_sha256": hashlib.sha256(ident.encode("utf-8")).hexdigest()[:_ID_HASH_CHARS]})
    info = {k: v for k, v in old.items() if k not in _COMPUTED}
    info["erasures"] = log
    StoreWriter(layout).write_manifest(info)


__all__ = ["EraseReport", "EraseScope", "NothingToErase", "erase_conversation", "erase_user"]
