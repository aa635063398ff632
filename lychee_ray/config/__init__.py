"""One typed configuration object (:class:`LycheeConfig`) made of one section per pipeline stage.

Defaults live only in ``configs/default.yaml`` (every key, with a comment; shipped inside the
package as ``lychee_ray/config/default.yaml``). Precedence, lowest first: ``default.yaml`` → each
``--config FILE`` → ``--set key=value`` → environment variables for secrets and endpoints.
Unknown keys are errors.
"""

from lychee_ray.config.appends import AppendsConfig, RenamedConfigKey
from lychee_ray.config.base import DEFAULT_CONFIG_PATH, ConfigError, Section, deep_merge, packaged_defaults
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
from lychee_ray.config.root import FINGERPRINT_OMIT_AT_DEFAULT, LycheeConfig
from lychee_ray.config.serve import ApiKeyConfig, ServeAutoscalingConfig, ServeConfig
from lychee_ray.config.store import StoreConfig

__all__ = [
    "DEFAULT_CONFIG_PATH", "FINGERPRINT_OMIT_AT_DEFAULT", "AnswerConfig", "AssistantRecordsConfig", "DedupConfig", "AppendsConfig", "CurrencyConfig", "CurrentConfig", "RenamedConfigKey", "ApiKeyConfig", "BuildConfig", "CalibrationConfig", "ChannelWeights",
    "ConfigError", "EmbeddingConfig", "EncoderConfig", "EvalConfig", "InspectConfig", "GuardConfig", "FusionConfig", "LLMConfig", "LycheeConfig",
    "NodesConfig", "PassagesConfig", "PlacementConfig", "PlannerConfig", "PressureConfig", "QueryConfig", "RateLimitConfig", "RayConfig", "RecallConfig",
    "BuildStagesConfig", "StageConfig",
    "RerankConfig", "RulesEncoderConfig", "SegmenterConfig", "Section", "SelectConfig", "ServeAutoscalingConfig", "ServeConfig", "StoreConfig",
    "SurpriseConfig", "TokenizerConfig", "ToolRecordsConfig", "deep_merge", "load_config", "packaged_defaults", "parse_set", "ray_address",
]
