"""A store's fingerprint, from each configuration key's declared effect (:data:`~.base.Effect`).

``store`` keys make up the fingerprint; ``runtime`` keys never enter it. A store key that existed
when fingerprints were first taken (:data:`FIRST_STORE_KEYS`, frozen: never edit it) is hashed with its
value. A key added since is hashed only while it differs from its default: adding a key at its
default leaves the fingerprint of every existing store unchanged (the store was built as if the key
had that value), and changing it from its default changes the fingerprint. Nothing is listed by hand.

So a later key's *default* must keep meaning what stores built before the key did; changing it is
a new key (``tests/config/test_fingerprint.py`` pins every store default to make such a change seen).
"""

from __future__ import annotations

import hashlib
import json
from functools import lru_cache
from typing import Any

from pydantic import BaseModel

from lychee_ray.config.base import Effect, declared_effect, section_type

# Paths (in the hashed form: ``encoder.rules.*`` hashed as ``encoder.rules_*``) of the store keys
# fingerprints were first taken with. Frozen: stores built since hash these keys whatever their value.
FIRST_STORE_KEYS: frozenset[str] = frozenset("""
tokenizer.encoding
segmenter.method segmenter.exchange_mode segmenter.auto_without_roles segmenter.exchange_weighting
segmenter.max_segment_tokens segmenter.threshold segmenter.bias segmenter.role_bias segmenter.w_surprise
segmenter.w_cohesion segmenter.w_length segmenter.w_count segmenter.cohesion_scale segmenter.cohesion_max
segmenter.trajectory_window segmenter.center_embeddings segmenter.centering_prior segmenter.surprise.reference
segmenter.surprise.center segmenter.surprise.scale segmenter.surprise.clip_min segmenter.surprise.clip_max
segmenter.surprise.robust_weight segmenter.surprise.robust_window segmenter.surprise.robust_min_history
segmenter.surprise.robust_clip_min segmenter.surprise.robust_clip_max segmenter.surprise.mad_to_sigma
segmenter.surprise.mad_floor segmenter.length_pressure.start segmenter.length_pressure.scale
segmenter.length_pressure.max segmenter.count_pressure.start segmenter.count_pressure.scale
segmenter.count_pressure.max segmenter.fixed_window segmenter.cues.w_question segmenter.cues.w_answer
segmenter.cues.w_lexical segmenter.cues.lexical_window segmenter.cues.min_word_chars segmenter.cues.question_modes
segmenter.cues.answer_modes segmenter.cues.lexical_modes segmenter.cues.question_max_words segmenter.cues.words_window
segmenter.cues.words_min_history segmenter.cues.w_ahead segmenter.cues.ahead_modes segmenter.placement.modes
segmenter.placement.window segmenter.placement.margin segmenter.calibration.blend segmenter.calibration.kind
segmenter.calibration.segment_turns segmenter.calibration.spread segmenter.calibration.mad_floor
segmenter.calibration.window segmenter.calibration.min_history segmenter.calibration.max_rate
encoder.context_records encoder.context_token_budget encoder.max_completion_tokens encoder.max_turn_chars
encoder.day_first encoder.time_from_turns encoder.context_style encoder.guard.enabled encoder.guard.min_grounding
encoder.guard.max_reattributed_turns encoder.guard.echo_jaccard encoder.guard.echo_keep_grounding
encoder.guard.max_filled_entities encoder.guard.time_past_years encoder.guard.time_future_years
encoder.guard.rewrite_relative_text encoder.guard.max_rejected_share encoder.guard.repair_attempts
encoder.guard.repair_mode encoder.dedup.enabled encoder.dedup.min_jaccard encoder.rules_min_words
encoder.rules_max_entities encoder.rules_max_topics encoder.rules_question_min_content_words
encoder.rules_keep_questions encoder.rules_we_mode encoder.rules_image_records encoder.rules_topic_bigrams
encoder.rules_max_records_per_turn encoder.rules_pair_answers encoder.rules_pair_max_answer_words
encoder.rules_assistant.enabled encoder.rules_assistant.condense_min_chars encoder.rules_assistant.max_points
encoder.rules_assistant.key_sentences encoder.rules_assistant.max_chars encoder.rules_assistant.point_chars
encoder.rules_assistant.sentence_chars encoder.rules_assistant.max_artifacts encoder.rules_assistant.artifact_chars
encoder.rules_assistant.artifact_identifiers encoder.rules_assistant.split_requests
nodes.max_records_per_node nodes.event_frame_turn_gap nodes.max_days_per_span nodes.event_frame_text_chars
nodes.max_entity_topic_pairs nodes.min_records_to_embed
""".split())

# Secrets never enter a hash (a fingerprint is printed and stored in manifests).
SECRETS: dict[str, Any] = {"llm": {"api_key"}, "serve": {"token", "keys"}}


def effect_part(model: BaseModel, effect: Effect, inherited: Effect | None = None) -> dict[str, Any]:
    """The keys of ``model`` (a JSON dump, nested as the sections) whose declared effect is ``effect``."""
    dump = model.model_dump(mode="json")
    return _part(type(model), dump, effect, inherited)


def _part(cls: type[BaseModel], dump: dict[str, Any], effect: Effect, inherited: Effect | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, field in cls.model_fields.items():
        own = declared_effect(field, inherited)
        sub = section_type(field)
        if sub is not None:
            part = _part(sub, dump[name], effect, own)
            if part:
                out[name] = part
        elif own == effect:
            out[name] = dump[name]
    return out


def drop_later_keys_at_default(data: dict[str, Any], defaults: dict[str, Any], first: frozenset[str] = FIRST_STORE_KEYS,
                               prefix: str = "") -> dict[str, Any]:
    """``data`` without the keys added after ``first`` that hold their default values.

    A key or nested section added later is one unit: left out while it equals its default (all of
    it), hashed whole otherwise. A root section, and a mapping holding keys of ``first``, are looked
    into key by key (a mapping that loses every key that way goes too)."""
    known = _prefixes(first)
    out: dict[str, Any] = {}
    for k, v in data.items():
        path = f"{prefix}{k}"
        if (path in known or not prefix) and isinstance(v, dict):
            default = defaults.get(k)
            kept = drop_later_keys_at_default(v, default if isinstance(default, dict) else {}, first, f"{path}.")
            if kept or not v:
                out[k] = kept
        elif path in first or k not in defaults or v != defaults[k]:
            out[k] = v
    return out


@lru_cache(maxsize=4)
def _prefixes(first: frozenset[str]) -> frozenset[str]:
    """Every section path above a key of ``first``."""
    return frozenset(".".join(p.split(".")[:i]) for p in first for i in range(1, p.count(".") + 1))


def digest(data: dict[str, Any]) -> str:
    """The 16-hex-digit hash of a JSON-able mapping (key order does not matter)."""
    return hashlib.sha256(json.dumps(data, sort_keys=True).encode()).hexdigest()[:16]
