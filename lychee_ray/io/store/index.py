"""Per-conversation FAISS indexes: exact inner product over unit vectors, ids = Parquet rows."""

from __future__ import annotations

import numpy as np


def build_flat_index(vectors: np.ndarray, dim: int, ids: list[int] | None = None):
    """``IndexIDMap2(IndexFlatIP)``; ids are row positions in the Parquet part (all rows by default)."""
    import faiss

    index = faiss.IndexIDMap2(faiss.IndexFlatIP(dim))
    if len(vectors):
        row_ids = np.arange(len(vectors), dtype=np.int64) if ids is None else np.asarray(ids, dtype=np.int64)
        index.add_with_ids(np.ascontiguousarray(vectors, dtype=np.float32), row_ids)
    return index
