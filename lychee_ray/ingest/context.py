"""The one factory of build contexts: what a build or an append embeds and encodes with.

:func:`make_context` serves a build (embedders batched across the conversations in flight) and a
long-lived appending process (``batched=False``: a notebook, a Serve replica), whose appends each
run on their own event loop.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import numpy as np

from lychee_ray.ingest.encode.base import SegmentEncoder
from lychee_ray.ingest.encode.factory import make_encoder
from lychee_ray.ingest.pipeline import BuildContext
from lychee_ray.config import LycheeConfig
from lychee_ray.embed import AsyncBatchEmbedder, Embedder, get_embedder
from lychee_ray.embed.memo import with_memo
from lychee_ray.llm.client import LLMClient
from lychee_ray.llm.ratelimit import RateLimiter
from lychee_ray.names import LLMBackend


def make_context(
    cfg: LycheeConfig, backend: LLMBackend, embedder: Embedder | None = None, limiter: RateLimiter | None = None,
    encoder: SegmentEncoder | None = None, *, batched: bool = True, llm_client: LLMClient | None = None,
) -> BuildContext:
    """Embedders + encoder + usage ledger for one process.

    A build (``batched``): embedding calls are batched across the conversations in flight. Without
    ``embedder``: the configured one for turns and, for records and nodes, the one of
    ``embedding.memory_quantization``, both on ``embedding.build_threads`` threads and behind a memo
    of ``embedding.memo_texts`` texts. A given ``embedder`` (tests, benchmarks) embeds everything.

    Appends (``batched=False``; ``embedder`` required): each append runs on its own event loop (or
    the caller's), so ``embedder`` is called directly in a worker thread instead of through a
    cross-request batcher. ``encoder``: one already made (its client and ledger are shared), else
    made for ``backend`` (``openai``: over ``llm_client`` when given — an append shares the
    caller's — and ``limiter``); the encode calls are recorded in its client's ledger.
    """
    encoder = encoder or make_encoder(cfg, backend, limiter, llm_client=llm_client)
    if not batched:
        if embedder is None:
            raise ValueError("an append context needs its embedder")
        direct = embedder

        async def embed(texts: Sequence[str]) -> np.ndarray:
            return np.asarray(await asyncio.to_thread(direct.encode, list(texts)), dtype=np.float32)

        ctx = BuildContext(cfg=cfg, embed=embed, embed_dim=direct.dim, embedder_name=direct.name, encoder=encoder)
    else:
        if embedder is None:
            ecfg = cfg.embedding.for_build()
            turns_model = with_memo(get_embedder(ecfg, cfg.llm), cfg.embedding.memo_texts)
            memory_model = with_memo(get_embedder(ecfg, cfg.llm, memory=True), cfg.embedding.memo_texts)
        else:
            turns_model = memory_model = embedder
        batcher = AsyncBatchEmbedder(turns_model, cfg.embedding.batch_wait_ms, cfg.embedding.max_batch_texts)
        memory = batcher if memory_model is turns_model else AsyncBatchEmbedder(
            memory_model, cfg.embedding.batch_wait_ms, cfg.embedding.max_batch_texts)
        ctx = BuildContext(cfg=cfg, embed=batcher.embed, embed_dim=turns_model.dim, embedder_name=turns_model.name,
                           encoder=encoder, embed_memory=memory.embed)
    client = getattr(encoder, "client", None)
    if client is not None:
        ctx.ledger = client.ledger
    return ctx


__all__ = ["make_context"]
