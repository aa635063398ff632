"""What an embedder is, and the factory that builds the configured one.

An embedder maps texts to L2-normalised float32 rows, works in batches and embeds identical texts
once per call. Two exist: :class:`~lychee_ray.embed.local.LocalEmbedder` (a local
sentence-transformers model, offline MiniLM by default, optionally run by ONNX Runtime) and
:class:`~lychee_ray.embed.openai.OpenAIEmbedder` (an OpenAI-compatible ``/embeddings`` endpoint).
The local model loads from its cached ONNX export without torch or sentence-transformers when it can
(:class:`~lychee_ray.embed.onnx_cache.CachedOnnxEmbedder`: the same vectors, ~10 s of CPU sooner —
paid by every builder actor, Serve replica and one-shot query); the first load exports it.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol
from collections.abc import Sequence

import numpy as np

from lychee_ray.config import EmbeddingConfig, LLMConfig

log = logging.getLogger(__name__)

# The local embedder's name (recorded in the store's manifest) when ``embedding.model`` is not set.
DEFAULT_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"


class Embedder(Protocol):
    """Anything that maps texts to unit vectors."""

    name: str
    dim: int

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
    if cfg.backend == "local":
        return cfg.model or DEFAULT_MODEL_NAME
    return cfg.openai_model


_CACHE: dict[str, Embedder] = {}
_CACHE_LOCK = threading.Lock()


def get_embedder(cfg: EmbeddingConfig, llm: LLMConfig | None = None, *, queries: bool = False,
                 memory: bool = False, private: bool = False) -> Embedder:
    """Build (once per process and config) the configured embedder. ``queries=True`` is the one for
    query texts: with the local onnx runtime it applies ``embedding.query_quantization``;
    ``memory=True`` the one for a build's record and node texts (``embedding.memory_quantization``).
    ``private=True``: a new instance of its own, not shared (a local model runs one call at a
    time, so work that must not wait behind another's — background encoding — gets its own)."""
    quantize = "none"
    if cfg.backend == "local" and cfg.runtime == "onnx" and cfg.device == "cpu":
        quantize = cfg.query_quantization if queries else cfg.memory_quantization if memory else "none"
    key = f"{cfg.model_dump_json()}|{quantize}"
    if private:
        return _build(cfg, llm, quantize)
    with _CACHE_LOCK:
        if key not in _CACHE:
            _CACHE[key] = _build(cfg, llm, quantize)
        return _CACHE[key]


def _build(cfg: EmbeddingConfig, llm: LLMConfig | None, quantize: str) -> Embedder:
    """A new embedder of ``cfg`` (see :func:`get_embedder`)."""
    # imported here: each backend's module imports this one (and only the chosen one is needed)
    if cfg.backend == "local":
        from lychee_ray.embed.local import LocalEmbedder
        from lychee_ray.embed.onnx_cache import load_cached

        # the full loader (torch + sentence-transformers) only when no export is cached yet:
        # it exports the model, so every later process skips it
        emb: Embedder = load_cached(cfg, quantize) or LocalEmbedder(cfg, quantize=quantize)
    else:
        from lychee_ray.embed.openai import OpenAIEmbedder

        emb = OpenAIEmbedder(cfg, llm or LLMConfig())
    log.info("embedder %s (dim %s) ready", emb.name, emb.dim)
    return emb


__all__ = ["Embedder", "dedup_texts", "embedder_name", "get_embedder", "normalise_rows"]
