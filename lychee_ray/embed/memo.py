"""A bounded memory of texts already embedded (``embedding.memo_texts``), in front of an embedder.

Why: a build embeds many texts that recur across conversations — topic and time nodes ("painting",
"May 2023"), short replies — and a long-lived builder (a Ray actor) meets them again and again. An
embedder that gives a text the same vector whatever it is batched with (fp32 to ~1e-7; the int8
model runs one text at a time for that reason) returns the same vectors with or without the memo.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from lychee_ray.embed.base import Embedder, dedup_texts


class MemoEmbedder:
    """:class:`~lychee_ray.embed.base.Embedder` that embeds only texts it has not kept (LRU of ``max_texts``)."""

    def __init__(self, inner: Embedder, max_texts: int) -> None:
        self.inner = inner
        self.name = inner.name
        self.dim = inner.dim
        self.max_texts = max_texts
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    @property
    def runtime(self) -> str:
        return str(getattr(self.inner, "runtime", "?"))

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        """Unit vectors of ``texts``: kept ones from the memo, the rest from the embedder (one call)."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        uniq, inverse = dedup_texts(texts)
        out = np.empty((len(uniq), self.dim), dtype=np.float32)
        todo: list[int] = []
        with self._lock:
            for i, t in enumerate(uniq):
                v = self._kept.get(t)
                if v is None:
                    todo.append(i)
                else:
                    self._kept.move_to_end(t)
                    out[i] = v
            self.hits += len(uniq) - len(todo)
            self.misses += len(todo)
        if todo:
            fresh = np.asarray(self.inner.encode([uniq[i] for i in todo]), dtype=np.float32)
            out[todo] = fresh
            with self._lock:
                for i, v in zip(todo, fresh, strict=False):
                    self._kept[uniq[i]] = v
                while len(self._kept) > self.max_texts:
                    self._kept.popitem(last=False)
        return out[inverse]


def with_memo(embedder: Embedder, max_texts: int) -> Embedder:
    """``embedder`` behind a memo of ``max_texts`` texts (itself when 0)."""
    return MemoEmbedder(embedder, max_texts) if max_texts > 0 else embedder


__all__ = ["MemoEmbedder", "with_memo"]
