"""An OpenAI-compatible ``/v1/embeddings`` endpoint as an embedder (e.g. text-embedding-3-small)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from lychee_ray.config import EmbeddingConfig, LLMConfig
from lychee_ray.embed.base import dedup_texts, normalise_rows


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
        uniq, inverse = dedup_texts(texts)
        out: list[list[float]] = []
        for i in range(0, len(uniq), self._batch):
            chunk = uniq[i : i + self._batch]
            resp = self._client.embeddings.create(model=self.name, input=chunk)
            out.extend(d.embedding for d in sorted(resp.data, key=lambda d: d.index))
        self.texts_embedded += len(uniq)
        m = normalise_rows(np.asarray(out, dtype=np.float32))
        self._dim = m.shape[1]
        return m[inverse]


__all__ = ["OpenAIEmbedder"]
