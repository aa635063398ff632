"""Where a store lives: a local directory, or any ``pyarrow.fs`` filesystem (S3, GCS, HDFS, ...).

A store root is a local path (``out/locomo``, ``file:///data/locomo``) or a URI whose scheme
``pyarrow.fs.FileSystem.from_uri`` knows (``s3://bucket/prefix``, ``gs://...``, ``hdfs://...``,
``abfs://...``). :func:`store_root` turns either into a path object the store code uses alike:

* a local root is a plain :class:`pathlib.Path` (the local code path is unchanged: ``os.replace``
  for atomic writes, ``flock`` for locks);
* a remote root is a :class:`~lychee_ray.io.store.remote_path.StorePath`, a small ``pathlib``-like
  object over a ``pyarrow.fs`` filesystem that offers exactly the operations the store needs (join,
  list, glob, read, write, delete, stat). Writes are single objects (``open_output_stream``): an
  object appears whole when its upload completes, which is the only atomicity the commit protocol
  needs (layout.py).

Everything else that differs between the two kinds lives in the helpers below (Parquet reads and
writes, tree removal, replace, exclusive create), so the store modules call one function either way.

Credentials and endpoints come the standard way: the AWS variables / config files / instance
metadata for S3 (``AWS_ENDPOINT_URL`` points it at an S3-compatible store such as MinIO), Google's
application default credentials for GCS, ``pyarrow.fs`` options in the URI's query
(``s3://bucket/prefix?endpoint_override=host:9000&scheme=http``).
:func:`~lychee_ray.io.store.remote_path.display_uri` removes user info and secret-looking query
values before a root is shown in a message, a log or the manifest.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from urllib.parse import urlsplit

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from lychee_ray.config.store import StoreConfig
from lychee_ray.io.store.remote_path import StorePath


def is_remote(root: str | Path) -> bool:
    """True for a URI with a scheme other than ``file://`` (the store lives in a ``pyarrow.fs`` filesystem)."""
    s = str(root)
    return "://" in s and not s.startswith("file://")


AnyPath = Path | StorePath


def _local_root(root: str | Path) -> Path:
    """The ``Path`` of a root that is not remote (``file://`` URIs are local paths)."""
    if isinstance(root, Path):
        return root
    s = str(root)
    return Path(urlsplit(s).path) if s.startswith("file://") else Path(s)


def store_root(root: str | Path | StorePath, settings: StoreConfig | None = None) -> AnyPath:
    """The path object of a store root: :class:`StorePath` for a remote URI (carrying ``settings``,
    or the ones it already has, or the packaged defaults), ``Path`` otherwise."""
    if isinstance(root, StorePath):
        return root if settings is None else root.with_settings(settings)
    if not isinstance(root, Path) and is_remote(root):
        return StorePath.from_uri(str(root), settings)
    return _local_root(root)


def root_string(root: str | Path | StorePath) -> str:
    """A root as a string that :func:`store_root` maps back to the same place (an absolute local
    path, or the URI with its query, secrets included — for passing to workers, never for display)."""
    if isinstance(root, StorePath):
        return root.uri(with_query=True)
    if is_remote(root):
        return str(root)
    return str(_local_root(root).resolve())


def sorted_entries(path: AnyPath, pattern: str | None = None) -> list[AnyPath]:
    """The paths directly below ``path`` (``pattern`` None) or matching the glob ``pattern`` below
    it, sorted; either kind of path (each kind sorts among its own: a listing never mixes them)."""
    if isinstance(path, StorePath):
        remote = path.iterdir() if pattern is None else path.glob(pattern)
        return [*sorted(remote)]
    local = path.iterdir() if pattern is None else path.glob(pattern)
    return [*sorted(local)]


# ------------------------------------------------------------------------------------------------
# operations that differ between local and remote paths
# ------------------------------------------------------------------------------------------------


def _fs_args(path: AnyPath) -> tuple[str, pafs.FileSystem | None]:
    return (path.path, path.fs) if isinstance(path, StorePath) else (str(path), None)


def read_parquet(path: AnyPath, columns: list[str] | None = None) -> pa.Table:
    """A whole Parquet file (FileNotFoundError when absent)."""
    p, fs = _fs_args(path)
    if fs is not None and not path.exists():  # pyarrow's message differs per filesystem; readers test for this
        raise FileNotFoundError(str(path))
    return pq.read_table(p, filesystem=fs, columns=columns)


def parquet_file(path: AnyPath) -> pq.ParquetFile:
    """A Parquet file opened for row-group access."""
    if isinstance(path, StorePath):
        return pq.ParquetFile(path.fs.open_input_file(path.path))
    return pq.ParquetFile(path)


def write_parquet(table: pa.Table, path: AnyPath) -> None:
    """Write ``table`` as one Parquet file (one object on object stores)."""
    p, fs = _fs_args(path)
    pq.write_table(table, p, filesystem=fs)


def parquet_writer(path: AnyPath, schema: pa.Schema) -> pq.ParquetWriter:
    """A ParquetWriter on ``path`` (``with`` it; on object stores the object appears on close)."""
    p, fs = _fs_args(path)
    return pq.ParquetWriter(p, schema, filesystem=fs)


def remove_tree(path: AnyPath) -> None:
    """Remove a file or a directory tree; absent is fine."""
    if isinstance(path, StorePath):
        if path.is_dir():
            path.rmtree()
        else:
            path.unlink(missing_ok=True)
        return
    import shutil

    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def temp_sibling(path: AnyPath, tag: str) -> AnyPath:
    """Where to write ``path``'s new content before :func:`replace`: a hidden sibling locally; the
    path itself on an object store, where one object write is already all-or-nothing."""
    return path if isinstance(path, StorePath) else path.with_name(f".{path.name}.{tag}.tmp")


def replace(tmp: AnyPath, path: AnyPath) -> None:
    """Make ``tmp`` (from :func:`temp_sibling`) the content of ``path`` atomically."""
    if tmp == path:
        return
    if isinstance(path, StorePath):  # not reached with temp_sibling; a copy is the best an object store can do
        if not isinstance(tmp, StorePath):
            raise TypeError(f"{tmp} and {path} are not in one filesystem")
        path.fs.move(tmp.path, path.path)
        return
    import os

    os.replace(tmp, path)


def create_exclusive(path: AnyPath, text: str) -> bool:
    """Create ``path`` with ``text`` unless it exists; True when this call created it.

    Local: ``O_EXCL`` (atomic). Object stores without conditional writes: check, then write — two
    writers racing within one round trip may both win; callers use it for claims whose loss is
    detected later (a duplicate input id), never for mutual exclusion (see :mod:`.locks` for that).
    """
    if isinstance(path, StorePath):
        if path.exists():
            return False
        path.write_text(text)
        return True
    import os

    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w", encoding="utf-8") as fh:
        fh.write(text)
    return True


def tree_size(path: AnyPath) -> tuple[int, int]:
    """(files, bytes) of a file or of everything below a directory."""
    if isinstance(path, StorePath):
        infos = [i for i in path._children(recursive=True) if i.type == pafs.FileType.File] if path.is_dir() else (
            [path._info()] if path.is_file() else [])
        return len(infos), sum(int(i.size or 0) for i in infos)
    if path.is_dir():
        files = [p for p in path.rglob("*") if p.is_file()]
        return len(files), sum(p.stat().st_size for p in files)
    return (1, path.stat().st_size) if path.is_file() else (0, 0)


def listing_state(path: AnyPath) -> float:
    """A number that changes when a file directly under ``path`` is added, removed or rewritten
    (a directory's mtime locally; a hash of the names and mtimes of its objects on object stores)."""
    if isinstance(path, StorePath):
        items = sorted((i.path, i.mtime.timestamp() if i.mtime else 0.0, i.size or 0) for i in path._children())
        digest = hashlib.sha1(repr(items).encode("utf-8")).digest()
        return float(int.from_bytes(digest[:6], "big")) if items else 0.0
    try:
        return path.stat().st_mtime
    except FileNotFoundError:
        return 0.0


__all__ = ["AnyPath", "create_exclusive", "is_remote", "listing_state", "parquet_file", "parquet_writer", "read_parquet",
           "remove_tree", "replace", "root_string", "sorted_entries", "store_root", "temp_sibling", "tree_size",
           "write_parquet"]
