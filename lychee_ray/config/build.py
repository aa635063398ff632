"""Sections for construction: nodes and the build job (its Ray runtime: :mod:`lychee_ray.config.ray`).

The segmenter and encoder sections live in :mod:`lychee_ray.config.segmenter` and
:mod:`lychee_ray.config.encoder` (re-exported here).
"""

from __future__ import annotations

from pydantic import Field

from lychee_ray.config.base import Section
from lychee_ray.config.encoder import (
    FLAT_RULES_KEYS,
    AssistantRecordsConfig,
    CurrencyConfig,
    DedupConfig,
    EncoderConfig,
    GuardConfig,
    RulesEncoderConfig,
    ToolRecordsConfig,
)
from lychee_ray.config.segmenter import (
    CalibrationConfig,
    CueConfig,
    PlacementConfig,
    PressureConfig,
    SegmenterConfig,
    SurpriseConfig,
)
from lychee_ray.names import OnConflict


class NodesConfig(Section):
    """Evidence nodes derived from record metadata (DESIGN §1 step 3)."""

    # Per-node record list cap (the first records in conversation order are kept).
    max_records_per_node: int = Field(default=200, ge=1,
        description="cap on one node's record list (first records in conversation order kept)")
    # Records of one segment whose source turns are at most this many turns apart share an event frame.
    event_frame_turn_gap: int = Field(default=2, ge=0,
        description="records of a segment at most this many turns apart share an event frame")
    # Day-level time nodes are made for spans up to this many days (longer spans get month nodes only).
    max_days_per_span: int = Field(default=7, ge=1,
        description="day-level time nodes for spans up to this many days; longer spans get months only")
    # Characters of member-record text kept in an event frame's display text (what gets embedded).
    event_frame_text_chars: int = Field(default=600, ge=50,
        description="characters of member-record text in an event frame's (embedded) display text")
    # entity x topic nodes per record at most (keeps the cross product bounded).
    max_entity_topic_pairs: int = Field(default=12, ge=0, description="entity x topic nodes per record at most")
    # Only nodes linking at least this many records get a vector: a one-record node's text adds
    # little over the record's own vector, and there are many of them (all nodes still match by key).
    min_records_to_embed: int = Field(default=2, ge=1,
        description="only nodes linking at least this many records are embedded (all match by key)")

class BuildConfig(Section):
    """Memory construction job."""

    # Encode-call failures that are retried by the LLM layer are not counted here: this is the
    # number of whole-segment attempts (a failed segment is stored as failed after these).
    segment_attempts: int = Field(default=1, ge=1,
        description="whole-segment tries after the LLM layer's own retries; then the segment is stored as failed")
    # Conversations in flight per builder (their segments are sequential; conversations overlap).
    conversations_in_flight: int = Field(default=8, ge=1,
        description="conversations a builder keeps in flight (segments within one stay sequential)")
    # Final step: merge per-conversation Parquet parts, this many conversations per file (0 = off).
    compact_conversations_per_file: int = Field(default=256, ge=0,
        description="final step merges per-conversation Parquet parts, this many per file; 0 = off")
    # A stored conversation whose input rewrites its history (a stored turn changed, removed or
    # reordered): error = quarantine it (stage "conflict"); rebuild = build it again from scratch.
    on_conflict: OnConflict = Field(default="error",
        description=(
            "stored conversation whose input changed/removed/reordered a stored turn: error (quarantine, stage "
            "conflict) | rebuild (from scratch)"))
    # A conversation another writer committed between its decision and its commit (an append, a
    # concurrent run) is decided again; after this many decisions in all it fails at stage "commit"
    # (nothing of it written; a re-run builds it).
    decide_rounds: int = Field(default=3, ge=1,
        description=(
            "a conversation committed by another writer between its decision and its commit is decided again, "
            "this many decisions in all; then it fails at stage commit"))
    # Distinct system prompts whose encoding a process keeps (each is encoded once, its records
    # stored with every conversation that has it; least recently used dropped beyond this).
    system_prompt_cache: int = Field(default=256, ge=1,
        description=(
            "distinct system prompts a process keeps encoded (each encoded once; its records stored with every "
            "conversation that has it)"))
    # `lychee-ray build` without --local / --ray (and without RAY_ADDRESS) runs in this process,
    # without starting Ray, when the input has nothing to build or at most this many conversations
    # and turns to build: Ray's start-up costs more than such a build (ingest/runner_choice.py).
    local_max_conversations: int = Field(default=16, ge=0,
        description=(
            "`build` without --local/--ray (no RAY_ADDRESS): nothing to build, or at most this many conversations"
            " to build ..."))
    local_max_turns: int = Field(default=2000, ge=0,
        description=(
            "... with at most this many turns, runs in-process without starting Ray (its start-up costs more than"
            " such a build)"))


__all__ = [
    "FLAT_RULES_KEYS", "AssistantRecordsConfig", "BuildConfig", "CalibrationConfig", "CueConfig", "CurrencyConfig", "DedupConfig",
    "EncoderConfig", "GuardConfig", "NodesConfig", "PlacementConfig", "PressureConfig", "RulesEncoderConfig", "SegmenterConfig",
    "SurpriseConfig", "ToolRecordsConfig",
]
