"""One typed configuration object (:class:`LycheeConfig`) made of one section per pipeline stage.

Each key is defined once, on its section's field (type, bounds, default, one-line description and,
for the root sections, its effect: ``store`` or ``runtime``); ``configs/default.yaml`` and the key
reference in docs/configuration.md are generated from them (:mod:`lychee_ray.config.reference`).
Precedence, lowest first: the defaults → each
``--config FILE`` → ``--set key=value`` → environment variables for secrets and endpoints.
Unknown keys are errors.
"""

from lychee_ray.config.appends import AppendsConfig, RenamedConfigKey
from lychee_ray.config.base import DEFAULT_CONFIG_PATH, ConfigError, Effect, Section, deep_merge
from lychee_ray.config.build import (
    AssistantRecordsConfig,
    BuildConfig,
    CalibrationConfig,
    CurrencyConfig,
    DedupConfig,
    EncoderConfig,
    GuardConfig,
    NodesConfig,
    PlacementConfig,
    PressureConfig,
    RulesEncoderConfig,
    SegmenterConfig,
    SurpriseConfig,
    ToolRecordsConfig,
)
from lychee_ray.config.eval import EvalConfig
from lychee_ray.config.inspect import InspectConfig
from lychee_ray.config.loader import load_config, parse_set, ray_address
from lychee_ray.config.models import EmbeddingConfig, LLMConfig, RateLimitConfig, TokenizerConfig
from lychee_ray.config.passages import PassagesConfig
from lychee_ray.config.query import (
    AnswerConfig,
    ChannelWeights,
    CurrentConfig,
    FusionConfig,
    PlannerConfig,
    QueryConfig,
    RecallConfig,
    RerankConfig,
    SelectConfig,
)
from lychee_ray.config.ray import BuildStagesConfig, RayConfig, StageConfig
from lychee_ray.config.root import LycheeConfig, packaged_defaults
from lychee_ray.config.serve import ApiKeyConfig, ServeAutoscalingConfig, ServeConfig
from lychee_ray.config.store import StoreConfig

__all__ = [
    "DEFAULT_CONFIG_PATH", "Effect", "AnswerConfig", "AssistantRecordsConfig", "DedupConfig", "AppendsConfig",
    "CurrencyConfig", "CurrentConfig", "RenamedConfigKey", "ApiKeyConfig", "BuildConfig", "CalibrationConfig",
    "ChannelWeights", "ConfigError", "EmbeddingConfig", "EncoderConfig", "EvalConfig", "InspectConfig", "GuardConfig",
    "FusionConfig", "LLMConfig", "LycheeConfig", "NodesConfig", "PassagesConfig", "PlacementConfig", "PlannerConfig",
    "PressureConfig", "QueryConfig", "RateLimitConfig", "RayConfig", "RecallConfig", "BuildStagesConfig", "StageConfig",
    "RerankConfig", "RulesEncoderConfig", "SegmenterConfig", "Section", "SelectConfig", "ServeAutoscalingConfig",
    "ServeConfig", "StoreConfig", "SurpriseConfig", "TokenizerConfig", "ToolRecordsConfig", "deep_merge", "load_config",
    "packaged_defaults", "parse_set", "ray_address",
]
