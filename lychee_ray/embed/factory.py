"""The factory that builds the configured embedder, once per process and configuration.

The local model loads from its cached ONNX export without torch or sentence-transformers when it can
(:func:`~lychee_ray.embed.onnx_cache.load_cached`); the backends' modules import their heavy
libraries (torch, sentence-transformers, onnxruntime, openai) only when a model is built.
"""

from __future__ import annotations

import logging
import threading

from lychee_ray.config import EmbeddingConfig, LLMConfig
from lychee_ray.embed.base import Embedder
from lychee_ray.embed.local import LocalEmbedder
from lychee_ray.embed.onnx_cache import load_cached
from lychee_ray.embed.openai import OpenAIEmbedder
from lychee_ray.names import LOCAL_EMBEDDING

log = logging.getLogger(__name__)

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
    if cfg.backend == LOCAL_EMBEDDING and cfg.runtime == "onnx" and cfg.device == "cpu":
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
    if cfg.backend == LOCAL_EMBEDDING:
        # the full loader (torch + sentence-transformers) only when no export is cached yet:
        # it exports the model, so every later process skips it
        emb: Embedder = load_cached(cfg, quantize) or LocalEmbedder(cfg, quantize=quantize)
    else:
        emb = OpenAIEmbedder(cfg, llm or LLMConfig())
    log.info("embedder %s (dim %s) ready", emb.name, emb.dim)
    return emb


__all__ = ["get_embedder"]
