"""Optional cross-encoder rerank of the fused pool (DESIGN §1 step 6), off by default.

No reranker weights ship offline, so the stage is configured explicitly (``query.rerank.enabled``
and ``query.rerank.model``, a local path or cached name; nothing is downloaded). When it fails —
the model cannot load, or scoring raises — the query still answers with the fused order and the
failure is logged and reported in the result. A failed load is not retried on every query (it can
cost seconds) but after ``retry_after_s``; until then each query reports the same error, so the
stage is never disabled silently.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Callable, Sequence

from pydantic import BaseModel

from lychee_ray.config import RerankConfig

log = logging.getLogger(__name__)


class RerankReport(BaseModel):
    """What the rerank stage did for one query."""

    enabled: bool = False
    applied: bool = False
    model: str | None = None
    reranked: int = 0
    error: str | None = None


class RerankError(RuntimeError):
    """The reranker could not score (load or inference failure)."""


def _load_cross_encoder(name: str) -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    from sentence_transformers import CrossEncoder

    return CrossEncoder(name, device="cpu", local_files_only=True)


@dataclass
class CrossEncoderReranker:
    """Scores (question, evidence text) pairs with a sentence-transformers CrossEncoder."""

    cfg: RerankConfig
    loader: Callable[[str], Any] = _load_cross_encoder  # injectable for tests

    def __post_init__(self) -> None:
        self._model: Any = None
        self._error: str | None = None
        self._failed_at = 0.0
        self._lock = threading.Lock()

    def _get_model(self) -> Any:
        with self._lock:
            if self._model is not None:
                return self._model
            if self._error is not None and time.monotonic() - self._failed_at < self.cfg.retry_after_s:
                raise RerankError(self._error)
            if not self.cfg.model:
                self._error, self._failed_at = "query.rerank.enabled is set but query.rerank.model is not", time.monotonic()
                raise RerankError(self._error)
            try:
                self._model = self.loader(self.cfg.model)
            except Exception as e:  # noqa: BLE001 — any load failure is reported, the query goes on
                self._error = f"cannot load cross-encoder {self.cfg.model!r}: {type(e).__name__}: {e}"[:500]
                self._failed_at = time.monotonic()
                raise RerankError(self._error) from e
            self._error = None
            return self._model

    def score(self, question: str, texts: Sequence[str]) -> list[float]:
        """One relevance score per text (higher = more relevant)."""
        model = self._get_model()
        try:
            scores = model.predict([(question, t) for t in texts], batch_size=self.cfg.batch_size, show_progress_bar=False)
        except Exception as e:  # noqa: BLE001
            raise RerankError(f"cross-encoder scoring failed: {type(e).__name__}: {e}"[:500]) from e
        return [float(s) for s in scores]


def rerank_order(reranker: CrossEncoderReranker | None, cfg: RerankConfig, question: str,
                 texts: Sequence[str]) -> tuple[list[int], RerankReport]:
    """New order of the pool (indexes): the top ``top_n`` by cross-encoder score, then the rest.

    On any failure the fused order is kept and the report carries the error.
    """
    identity = list(range(len(texts)))
    report = RerankReport(enabled=cfg.enabled, model=cfg.model)
    if not cfg.enabled or reranker is None or not texts:
        return identity, report
    n = min(cfg.top_n, len(texts))
    try:
        scores = reranker.score(question, list(texts[:n]))
    except RerankError as e:
        log.warning("rerank skipped, keeping the fused order: %s", e)
        report.error = str(e)
        return identity, report
    head = sorted(range(n), key=lambda i: (-scores[i], i))
    report.applied, report.reranked = True, n
    return head + identity[n:], report


__all__ = ["CrossEncoderReranker", "RerankError", "RerankReport", "rerank_order"]
