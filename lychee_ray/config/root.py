"""The whole configuration: one :class:`LycheeConfig` made of the stage sections."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import model_validator

from lychee_ray.config.appends import AppendsConfig, move_legacy_keys
from lychee_ray.config.base import Section, bind_default_paths, packaged_default
from lychee_ray.config.build import BuildConfig, EncoderConfig, NodesConfig, SegmenterConfig
from lychee_ray.config.eval import EvalConfig
from lychee_ray.config.inspect import InspectConfig
from lychee_ray.config.models import EmbeddingConfig, LLMConfig, TokenizerConfig
from lychee_ray.config.passages import PassagesConfig
from lychee_ray.config.query import QueryConfig
from lychee_ray.config.ray import RayConfig
from lychee_ray.config.serve import ServeConfig
from lychee_ray.config.store import StoreConfig

# Keys added after stores were built: left out of fingerprints while at their default value, so a
# store built before the key existed still matches (and is reused) when the key is not changed.
FINGERPRINT_OMIT_AT_DEFAULT: tuple[tuple[str, str], ...] = (
    ("encoder", "mode"), ("segmenter", "max_turn_chars"), ("encoder", "wrong_script_share"), ("encoder", "tools"),
    ("passages", "max_tokens"), ("passages", "max_turn_chars"), ("passages", "roles"),
    ("encoder", "currency"),
)


class LycheeConfig(Section):
    """The whole effective configuration."""

    embedding: EmbeddingConfig
    llm: LLMConfig
    tokenizer: TokenizerConfig
    segmenter: SegmenterConfig
    encoder: EncoderConfig
    nodes: NodesConfig
    passages: PassagesConfig
    build: BuildConfig
    ray: RayConfig
    query: QueryConfig
    serve: ServeConfig
    eval: EvalConfig
    inspect: InspectConfig
    store: StoreConfig
    appends: AppendsConfig

    @model_validator(mode="before")
    @classmethod
    def _legacy_keys(cls, data: Any) -> Any:
        """Old places of the ``appends`` keys are read (and warned about) for one release."""
        return move_legacy_keys(data) if isinstance(data, dict) else data

    def fingerprint(self, *sections: str) -> str:
        """Stable hash of the named sections (all when none), secrets excluded."""
        data = self.model_dump(mode="json", include=set(sections) or None, exclude={"llm": {"api_key"}, "serve": {"token", "keys"}})
        if "encoder" in data:  # encoder.rules hashed as the flat keys it replaced: stores keep their fingerprint
            data["encoder"] = EncoderConfig.fingerprint_form(data["encoder"])
        omitted: set[str] = set()
        for sec, key in FINGERPRINT_OMIT_AT_DEFAULT:
            # keys added later: existing stores keep their fingerprint
            if key in data.get(sec, {}) and data[sec][key] == packaged_default(sec, key):
                del data[sec][key]
                omitted.add(sec)
        for sec in omitted:  # a section added later, all at its defaults, is left out whole
            if not data[sec]:
                del data[sec]
        if sections:
            data = {k: data[k] for k in sections if k in data}
        return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]

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


bind_default_paths(LycheeConfig)
