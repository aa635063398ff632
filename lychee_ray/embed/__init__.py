"""Text embedders: the protocol and factory, the local and OpenAI-compatible backends, the batcher.

Public face of the package; the backends import their heavy libraries (torch, sentence-transformers,
onnxruntime, openai) only when a model is built.
"""

from lychee_ray.embed.base import Embedder
from lychee_ray.embed.factory import get_embedder
from lychee_ray.embed.batcher import AsyncBatchEmbedder, embed_batch

__all__ = ["AsyncBatchEmbedder", "Embedder", "embed_batch", "get_embedder"]
