"""The local embedding model straight from the ONNX cache: no torch, no sentence-transformers.

Why: importing torch and sentence-transformers and loading the model cost 7–11 s (~10 s of CPU)
before the first vector: a one-shot ``lychee-ray query`` before a 20 ms search, and every builder
actor and Serve replica at start. Once the model has been exported (by a build,
``lychee-ray serve`` or an earlier query), the cached ONNX file is all that embedding needs, plus
the model's fast tokenizer (its ``tokenizer.json``, run by the ``tokenizers`` library: the same
token ids as sentence-transformers' own preprocessing — ``tests/embed/test_embed.py`` compares them).

:func:`load_cached` returns None whenever it cannot promise the vectors
:class:`~lychee_ray.embed.local.LocalEmbedder` would give (a model directory without
``tokenizer.json``, a pipeline other than Transformer → mean Pooling → Normalize, lower-casing
done by sentence-transformers, left padding, no cached export, a missing package); the caller then
loads ``LocalEmbedder``, which exports the model for next time.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import numpy as np

from lychee_ray.config import EmbeddingConfig
from lychee_ray.embed.agreement import checked_agreement
from lychee_ray.embed.base import dedup_texts, normalise_rows
from lychee_ray.embed.local import DEFAULT_MODEL_NAME, offline_minilm_path
from lychee_ray.embed.onnx import OnnxEncoder, Tokenize, onnx_paths, weights_key
from lychee_ray.names import LOCAL_EMBEDDING

log = logging.getLogger(__name__)

# sentence-transformers module types this loader reproduces (the export's pipeline)
_TRANSFORMER, _POOLING, _NORMALIZE = "Transformer", "Pooling", "Normalize"
# Pooling config switches other than mean pooling: any of them on means another pooling
_OTHER_POOLING = ("pooling_mode_cls_token", "pooling_mode_max_tokens", "pooling_mode_mean_sqrt_len_tokens",
                  "pooling_mode_weightedmean_tokens", "pooling_mode_lasttoken")


@dataclass(frozen=True)
class ModelFiles:
    """What the ONNX cache key and the tokenizer need, read from a model directory."""

    name_or_path: str  # as sentence-transformers is given it (part of the cache key)
    directory: Path
    arch: str  # the transformers class the export ran (config.json's single architecture)
    max_seq_length: int


def _json(path: Path) -> Any:
    """A JSON file's content, or None when it is missing or unreadable."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def _mean_pooling(directory: Path) -> bool:
    cfg = _json(directory / "config.json")
    if not isinstance(cfg, dict):
        return False
    if "pooling_mode" in cfg:
        return cfg["pooling_mode"] == "mean"
    return bool(cfg.get("pooling_mode_mean_tokens")) and not any(cfg.get(k) for k in _OTHER_POOLING)


def model_files(name_or_path: str) -> ModelFiles | None:
    """The model at ``name_or_path`` when it is a local sentence-transformers directory of the one
    pipeline the export handles, with a fast tokenizer; else None."""
    root = Path(name_or_path)
    modules = _json(root / "modules.json")
    if not root.is_dir() or not isinstance(modules, list) or not (root / "tokenizer.json").is_file():
        return None
    types = [str(m.get("type", "")).rsplit(".", 1)[-1] for m in modules if isinstance(m, dict)]
    if types[:2] != [_TRANSFORMER, _POOLING] or any(t != _NORMALIZE for t in types[2:]):
        return None
    if modules[0].get("path") or not _mean_pooling(root / str(modules[1].get("path", ""))):
        return None
    sbert = _json(root / "sentence_bert_config.json") or {}
    arch = (_json(root / "config.json") or {}).get("architectures") or []
    max_len = sbert.get("max_seq_length")
    tok_max = (_json(root / "tokenizer_config.json") or {}).get("model_max_length")
    if (sbert.get("do_lower_case") or len(arch) != 1 or not isinstance(max_len, int)
            or (isinstance(tok_max, int) and tok_max < max_len)):
        return None
    return ModelFiles(name_or_path, root, str(arch[0]), max_len)


def _token_text(value: Any) -> str | None:
    """A special token as tokenizer_config.json / special_tokens_map.json write it (text or object)."""
    if isinstance(value, dict):
        value = value.get("content")
    return value if isinstance(value, str) else None


def load_tokenizer(files: ModelFiles) -> Tokenize | None:
    """The model's fast tokenizer set up as sentence-transformers calls it: special tokens added,
    truncated to ``max_seq_length``, padded on the right to the batch's longest text."""
    from tokenizers import Tokenizer

    tcfg = _json(files.directory / "tokenizer_config.json") or {}
    if tcfg.get("padding_side", "right") != "right":
        return None
    pad = _token_text(tcfg.get("pad_token")) or _token_text(
        (_json(files.directory / "special_tokens_map.json") or {}).get("pad_token"))
    tok = Tokenizer.from_file(str(files.directory / "tokenizer.json"))
    pad_id = tok.token_to_id(pad) if pad else None
    if pad_id is None:
        return None
    tok.no_truncation()
    tok.no_padding()
    tok.enable_truncation(max_length=files.max_seq_length)
    tok.enable_padding(pad_id=pad_id, pad_type_id=0, pad_token=pad)

    def tokenize(texts: list[str]) -> dict[str, np.ndarray]:
        encs = tok.encode_batch(list(texts))
        return {"input_ids": np.array([e.ids for e in encs], dtype=np.int64),
                "attention_mask": np.array([e.attention_mask for e in encs], dtype=np.int64),
                "token_type_ids": np.array([e.type_ids for e in encs], dtype=np.int64)}

    return tokenize


class CachedOnnxEmbedder:
    """An embedder (the :class:`~lychee_ray.embed.local.LocalEmbedder` interface) over a cached ONNX export."""

    def __init__(self, name: str, encoder: OnnxEncoder, batch_size: int) -> None:
        self.name = name
        self._onnx = encoder
        self._batch = batch_size
        self.runtime = "onnx" if encoder.quantize == "none" else f"onnx-{encoder.quantize}"
        self.dim = int(encoder.encode(["dimension probe"], 1).shape[1])
        self._lock = threading.Lock()  # as LocalEmbedder: one model call at a time
        self.texts_embedded = 0

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts`` (identical texts embedded once)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        uniq, inverse = dedup_texts(texts)
        with self._lock:
            vecs = self._onnx.encode(uniq, self._batch)
            self.texts_embedded += len(uniq)
        return normalise_rows(vecs)[inverse]


def _versions() -> tuple[str, str] | None:
    """torch's and onnxruntime's versions as the export recorded them, read without importing torch."""
    try:
        return metadata.version("torch"), metadata.version("onnxruntime")
    except metadata.PackageNotFoundError:
        return None


def _threads(cfg: EmbeddingConfig) -> int:
    """The intra-op threads :class:`~lychee_ray.embed.local.LocalEmbedder` would give ONNX Runtime:
    ``embedding.num_threads``, else torch's setting when torch is loaded (a Serve replica limits it,
    ``serve.torch_threads``), else ``OMP_NUM_THREADS`` as torch would read it (Ray sets it in its
    workers from their CPU share), else 0 = ONNX Runtime's default (one per physical core, as torch's)."""
    if cfg.num_threads:
        return cfg.num_threads
    torch = sys.modules.get("torch")
    if torch is not None:
        return int(torch.get_num_threads())
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", "0")))
    except ValueError:
        return 0


def load_cached(cfg: EmbeddingConfig, quantize: str = "none") -> CachedOnnxEmbedder | None:
    """The configured local model run from its cached ONNX export (int8 for ``quantize="int8"``,
    checked against fp32 like :class:`~lychee_ray.embed.local.LocalEmbedder` does), or None when
    only the full loader can give its vectors."""
    if cfg.backend != LOCAL_EMBEDDING or cfg.runtime != "onnx" or cfg.device != "cpu":
        return None
    versions = _versions()
    files = model_files(cfg.model or offline_minilm_path())
    if versions is None or files is None:
        return None
    key = weights_key(files.arch, files.name_or_path, files.max_seq_length, *versions)
    if key is None:
        return None
    fp32, path = onnx_paths(cfg.onnx_cache_dir, files.arch, key, quantize)
    if not path.exists() or not fp32.exists():
        return None
    try:
        tokenize = load_tokenizer(files)
        if tokenize is None:
            return None
        threads = _threads(cfg)
        enc = OnnxEncoder(path, tokenize, quantize, threads=threads, spinning=cfg.allow_spinning,
                          length_sort_window=cfg.length_sort_window)
        if quantize != "none":
            worst = checked_agreement(enc, path, lambda: OnnxEncoder(fp32, tokenize, threads=1), cfg.batch_size)
            if worst < cfg.query_quantization_min_cosine:
                log.warning("ONNX %s quantization of the embedding model not used (its vectors are too far from fp32 "
                            "on this CPU: cosine %.3f < embedding.query_quantization_min_cosine %s); using fp32 ONNX",
                            quantize, worst, cfg.query_quantization_min_cosine)
                enc = OnnxEncoder(fp32, tokenize, threads=threads, spinning=cfg.allow_spinning,
                                 length_sort_window=cfg.length_sort_window)
        return CachedOnnxEmbedder(cfg.model or DEFAULT_MODEL_NAME, enc, cfg.batch_size)
    except Exception as e:  # noqa: BLE001 — a cache problem must not stop the query: the full loader still works
        log.warning("the cached ONNX embedding model could not be loaded (%s); loading the model in full", e)
        return None


__all__ = ["CachedOnnxEmbedder", "ModelFiles", "load_cached", "load_tokenizer", "model_files"]
