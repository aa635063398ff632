"""What an embedder is (the factory that builds the configured one is :mod:`.factory`).

An embedder maps texts to L2-normalised float32 rows, works in batches and embeds identical texts
once per call. Two exist: :class:`~lychee_ray.embed.local.LocalEmbedder` (a local
sentence-transformers model, offline MiniLM by default, optionally run by ONNX Runtime) and
:class:`~lychee_ray.embed.openai.OpenAIEmbedder` (an OpenAI-compatible ``/embeddings`` endpoint).
The local model loads from its cached ONNX export without torch or sentence-transformers when it can
(:class:`~lychee_ray.embed.onnx_cache.CachedOnnxEmbedder`: the same vectors, ~10 s of CPU sooner —
paid by every builder actor, Serve replica and one-shot query); the first load exports it.
"""

from __future__ import annotations

from typing import Protocol
from collections.abc import Sequence

import numpy as np

from lychee_ray.config import EmbeddingConfig
from lychee_ray.names import LOCAL_EMBEDDING

# The local embedder's name (recorded in the store's manifest) when ``embedding.model`` is not set.
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


class Embedder(Protocol):
    """Anything that maps texts to unit vectors."""

    name: str

    @property
    def dim(self) -> int:
        """The vectors' width (read-only: the remote embedder learns it from its first reply)."""
        ...

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return an ``(len(texts), dim)`` float32 array of L2-normalised rows."""
        ...


def normalise_rows(m: np.ndarray) -> np.ndarray:
    """``m`` as float32 with every row scaled to unit length (an all-zero row stays zero)."""
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # an all-zero vector stays zero rather than becoming NaN
    return m / norms


def dedup_texts(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Unique texts in first-seen order and the index of each input into them."""
    index: dict[str, int] = {}
    inverse = np.empty(len(texts), dtype=np.int64)
    for i, t in enumerate(texts):
        inverse[i] = index.setdefault(t, len(index))
    return list(index), inverse


def embedder_name(cfg: EmbeddingConfig) -> str:
    """The name the configured embedder will have (stores record it; builds fingerprint it),
    known without loading the model."""
    if cfg.backend == LOCAL_EMBEDDING:
        return cfg.model or DEFAULT_MODEL_NAME
    return cfg.openai_model


__all__ = ["DEFAULT_MODEL_NAME", "Embedder", "dedup_texts", "embedder_name", "normalise_rows"]
