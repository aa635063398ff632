"""Per-conversation FAISS indexes: inner product over unit vectors, ids = Parquet rows.

Vectors are stored at a precision (``store.vector_precision``, per table: io/store/tables.py says
which tables always keep fp32): ``fp32`` (``IndexFlatIP``), ``fp16`` or ``int8``
(``IndexScalarQuantizer``: 2 or 4 times fewer bytes; every reader decodes to fp32). ``int8`` uses
one fixed range, [-1, 1], for every component of a unit vector: there is nothing to train, any
unit vector fits, and a vector read back and written again keeps its codes, so a fold or an
incremental rewrite never drifts (the search scores move by about 0.002; docs/build-cost.md).

FAISS reads and writes local files only. On a remote store (:mod:`.fs`) an index is written to a
local temporary file and uploaded, and read through a bounded local cache directory
(``store.cache_dir`` / ``store.cache_max_bytes``): a generation's files never change once written
(new commits write new generations), so a cached copy, keyed by its full path, is never stale.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any

import numpy as np

from lychee_ray.config.store import StoreConfig
from lychee_ray.names import VectorPrecision
from lychee_ray.io.store.fs import AnyPath
from lychee_ray.io.store.remote_path import StorePath


# the int8 codes' range: every component of a unit vector lies in it
_INT8_RANGE = (-1.0, 1.0)


def _inner_index(dim: int, precision: VectorPrecision) -> Any:
    import faiss

    if precision == "fp32":
        return faiss.IndexFlatIP(dim)
    if precision == "fp16":
        return faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_fp16, faiss.METRIC_INNER_PRODUCT)
    if precision != "int8":
        raise ValueError(f"unknown vector precision {precision!r}")
    sq = faiss.IndexScalarQuantizer(dim, faiss.ScalarQuantizer.QT_8bit_uniform, faiss.METRIC_INNER_PRODUCT)
    lo, hi = _INT8_RANGE
    sq.sq.rangestat = faiss.ScalarQuantizer.RS_minmax
    faiss.copy_array_to_vector(np.asarray([lo, hi - lo], dtype=np.float32), sq.sq.trained)  # (vmin, vdiff)
    sq.is_trained = True
    return sq


def build_flat_index(vectors: np.ndarray, dim: int, ids: list[int] | None = None, precision: VectorPrecision = "fp32"):
    """``IndexIDMap2`` over an index of ``precision`` (module docstring); ids are row positions in
    the Parquet part (all rows by default)."""
    import faiss

    index = faiss.IndexIDMap2(_inner_index(dim, precision))
    if len(vectors):
        row_ids = np.arange(len(vectors), dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
        index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), row_ids)
    return index


def write_index(index: Any, path: AnyPath) -> None:
    """Write a FAISS index to ``path`` (a local file, or a temporary file uploaded to a remote store)."""
    import faiss

    if not isinstance(path, StorePath):
        faiss.write_index(index, str(path))
        return
    with tempfile.TemporaryDirectory(prefix="lychee-index-") as tmp:
        local = os.path.join(tmp, path.name)
        faiss.write_index(index, local)
        with open(local, "rb") as src, path.fs.open_output_stream(path.path) as dst:
            while chunk := src.read(1 << 22):
                dst.write(chunk)


def read_index(path: AnyPath) -> Any:
    """Read a FAISS index (remote: through the local cache). FileNotFoundError when it is absent."""
    import faiss

    local = cached_copy(path) if isinstance(path, StorePath) else path
    if not os.path.exists(local):
        raise FileNotFoundError(str(path))
    return faiss.read_index(str(local))


def cache_dir(settings: StoreConfig) -> Path:
    """The local directory of cached index files (``store.cache_dir`` of ``settings``)."""
    configured = settings.cache_dir
    if configured:
        return Path(configured)
    base = os.environ.get("LYCHEE_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "lychee_ray")
    return Path(base) / "store"


def cached_copy(path: StorePath) -> Path:
    """A local copy of a remote file, downloaded once and kept under the cache bound (LRU by access);
    the cache is the one of the ``store`` settings the path's root was opened with."""
    d = cache_dir(path.settings)
    d.mkdir(parents=True, exist_ok=True)
    name = hashlib.sha256(f"{path.fs.type_name}:{path.path}".encode()).hexdigest()[:32] + path.suffix
    local = d / name
    if local.exists():
        os.utime(local)  # mark as recently used
        return local
    tmp = d / f".{name}.{uuid.uuid4().hex}.tmp"
    try:
        with path.fs.open_input_stream(path.path) as src, open(tmp, "wb") as dst:
            while chunk := src.read(1 << 22):
                dst.write(chunk)
    except (FileNotFoundError, OSError) as e:
        tmp.unlink(missing_ok=True)
        if not path.exists():
            raise FileNotFoundError(str(path)) from e
        raise
    os.replace(tmp, local)  # concurrent readers of one file both download; either copy is the same bytes
    _evict(d, keep=local, limit=path.settings.cache_max_bytes)
    return local


def _evict(d: Path, keep: Path, limit: int) -> None:
    """Remove least recently used cached files until the cache is within ``limit`` bytes
    (``store.cache_max_bytes``; the file just fetched stays: it is about to be read)."""
    files = []
    for p in d.iterdir():
        if p.name.startswith(".") or p == keep:
            continue
        try:
            st = p.stat()
        except FileNotFoundError:
            continue
        files.append((st.st_mtime, st.st_size, p))
    total = sum(f[1] for f in files) + keep.stat().st_size
    for _, size, p in sorted(files):
        if total <= limit:
            break
        p.unlink(missing_ok=True)
        total -= size


def stored_vectors(index: Any) -> tuple[np.ndarray, np.ndarray]:
    """(row ids, vectors) held by an index of :func:`build_flat_index` — what it was given, read back
    at its precision (merging delta generations, incremental builds)."""
    import faiss

    inner = faiss.downcast_index(index.index)
    if inner.ntotal == 0:
        return np.zeros(0, dtype=np.int64), np.zeros((0, index.d), dtype=np.float32)
    return faiss.vector_to_array(index.id_map).astype(np.int64), inner.reconstruct_n(0, inner.ntotal)
