"""The whole configuration: one :class:`LycheeConfig` made of the stage sections."""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from pydantic import Field, model_validator

from lychee_ray.config.appends import AppendsConfig, move_legacy_keys
from lychee_ray.config.base import Section
from lychee_ray.config.build import BuildConfig, EncoderConfig, NodesConfig, SegmenterConfig
from lychee_ray.config.eval import EvalConfig
from lychee_ray.config.fingerprint import SECRETS, digest, drop_later_keys_at_default, effect_part
from lychee_ray.config.inspect import InspectConfig
from lychee_ray.config.models import EmbeddingConfig, LLMConfig, TokenizerConfig
from lychee_ray.config.passages import PassagesConfig
from lychee_ray.config.query import QueryConfig
from lychee_ray.config.ray import RayConfig
from lychee_ray.config.serve import ServeConfig
from lychee_ray.config.store import StoreConfig

class LycheeConfig(Section):
    """The whole effective configuration."""

    embedding: EmbeddingConfig = Field(default_factory=EmbeddingConfig, json_schema_extra={"effect": "runtime"})
    llm: LLMConfig = Field(default_factory=LLMConfig, json_schema_extra={"effect": "runtime"})
    tokenizer: TokenizerConfig = Field(default_factory=TokenizerConfig, json_schema_extra={"effect": "store"})
    segmenter: SegmenterConfig = Field(default_factory=SegmenterConfig, json_schema_extra={"effect": "store"},
        description="online semantic segmenter (DESIGN §1 step 1); calibration: docs/segmenter.md")
    encoder: EncoderConfig = Field(default_factory=EncoderConfig, json_schema_extra={"effect": "store"})
    nodes: NodesConfig = Field(default_factory=NodesConfig, json_schema_extra={"effect": "store"})
    passages: PassagesConfig = Field(default_factory=PassagesConfig, json_schema_extra={"effect": "store"},
        description=(
            "long turns searched by their passages (docs/data-format.md \"Long turns\"): the raw-turn channels "
            "(dense and lexical) index them, a hit shows that passage"))
    build: BuildConfig = Field(default_factory=BuildConfig, json_schema_extra={"effect": "runtime"})
    ray: RayConfig = Field(default_factory=RayConfig, json_schema_extra={"effect": "runtime"})
    query: QueryConfig = Field(default_factory=QueryConfig, json_schema_extra={"effect": "runtime"})
    serve: ServeConfig = Field(default_factory=ServeConfig, json_schema_extra={"effect": "runtime"},
        description="query service: Ray Serve + FastAPI (lychee-ray serve; DESIGN section 4)")
    eval: EvalConfig = Field(default_factory=EvalConfig, json_schema_extra={"effect": "runtime"},
        description="lychee-ray eval (DESIGN section 5): variants, judge, costs, report")
    inspect: InspectConfig = Field(default_factory=InspectConfig, json_schema_extra={"effect": "runtime"},
        description="the web inspector: lychee-ray inspect, and /ui of lychee-ray serve (docs/inspector.md)")
    store: StoreConfig = Field(default_factory=StoreConfig, json_schema_extra={"effect": "runtime"},
        description="a store on object storage (--out s3://bucket/prefix, gs://, hdfs://; docs/cluster.md)")
    appends: AppendsConfig = Field(default_factory=AppendsConfig, json_schema_extra={"effect": "runtime"},
        description=(
            "appends to a stored conversation (MemoryStore.append, POST .../turns, build increments' deltas; "
            "docs/incremental.md)"))

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        """Old places of the ``appends`` keys are read (and warned about) for one release."""
        return move_legacy_keys(data) if isinstance(data, dict) else data

    def fingerprint(self, *sections: str) -> str:
        """Stable hash of the named sections (all when none), secrets excluded; keys outside
        :data:`~.fingerprint.FIRST_STORE_KEYS` count only where they differ from their defaults."""
        names = set(sections) or set(type(self).model_fields)
        excluded = {k: v for k, v in SECRETS.items() if k in names}
        data = self.model_dump(mode="json", include=names, exclude=excluded)
        defaults = _default_dump(type(self), frozenset(names))
        return digest(drop_later_keys_at_default(_hashed_form(data), _hashed_form(defaults)))

    def store_fingerprint(self) -> str:
        """What decides a store's content: the hash of every key whose declared effect is ``store``."""
        defaults = effect_part(_defaults(type(self)), "store")
        data = effect_part(self, "store")
        return digest(drop_later_keys_at_default(_hashed_form(data), _hashed_form(defaults)))

    def redacted(self) -> dict[str, Any]:
        """Config as a dict with secrets masked (for printing and manifests)."""
        data = self.model_dump(mode="json")
        if data["llm"].get("api_key"):
            data["llm"]["api_key"] = "***"
        if data["serve"].get("token"):
            data["serve"]["token"] = "***"
        for k in data["serve"].get("keys") or []:
            k["sha256"] = "***"
        return data




@lru_cache(maxsize=8)
def _defaults(cls: type[LycheeConfig]) -> LycheeConfig:
    return cls()


def _default_dump(cls: type[LycheeConfig], names: frozenset[str]) -> dict[str, Any]:
    return _defaults(cls).model_dump(mode="json", include=set(names), exclude={k: v for k, v in SECRETS.items() if k in names})


def _hashed_form(data: dict[str, Any]) -> dict[str, Any]:
    """``encoder.rules`` hashed as the flat keys it replaced: stores built before it keep their fingerprint."""
    if isinstance(data.get("encoder"), dict):
        data = {**data, "encoder": EncoderConfig.fingerprint_form(data["encoder"])}
    return data


def packaged_defaults() -> dict[str, Any]:
    """A fresh copy of every default, as plain data (what ``configs/default.yaml`` holds)."""
    return _defaults(LycheeConfig).model_dump(mode="json")
