"""Sections for the query side: planner, recall channels, fusion, rerank, selection, answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, create_model

from lychee_ray.config.base import Section, packaged_default


class PlannerConfig(Section):
    """Query planner (DESIGN §1 step 4): one LLM call (openai) or deterministic rules."""

    # At most this many routes per plan; extra routes an LLM returns are dropped.
    max_routes: int = Field(ge=1)
    # Search texts kept per route (all routes' texts are embedded in one batched call).
    max_search_texts: int = Field(ge=1)
    # rules: routes added for known entities named in the question (by first mention).
    max_entity_routes: int = Field(ge=0)
    # openai: known entity names shown to the planner (most-referenced first) so its routes use
    # the store's spelling; 0 shows none.
    context_entities: int = Field(ge=0)
    max_completion_tokens: int = Field(ge=64)
    # openai: tries for a plan call whose replies are unusable (invalid JSON, schema violation, cut off
    # at max_completion_tokens); then the question becomes the only route. A weak model's run-away
    # plan repeats at temperature 0, and each try costs a prompt plus up to max_completion_tokens.
    # Transport errors (429, 5xx, timeouts) still get llm.max_attempts.
    max_invalid_attempts: int = Field(ge=1)
    # The asking agent's recent turns (``recent_turns`` of search/query; the paper's H_q) are shown
    # to both planners up to this many tokens, newest kept; 0 = ignored.
    recent_turns_tokens: int = Field(ge=0)


class RecallConfig(Section):
    """Recall channels (DESIGN §1 step 5); depths are per route and channel."""

    record_depth: int = Field(ge=0)  # (a) record vectors
    node_depth: int = Field(ge=0)  # (b) nodes matched by vector, besides exact key matches
    node_record_depth: int = Field(ge=0)  # (b) records returned by the node channel
    per_node_records: int = Field(ge=1)  # (b) cap on records taken from one node (best by similarity)
    time_depth: int = Field(ge=0)  # (c) time filter
    # (c) records up to this many days outside the constraint still count (ranked after overlapping ones).
    time_slack_days: int = Field(ge=0)
    # (c) records also match by their session date (ranked after content-time matches).
    time_use_session_date: bool
    # (c) raw turns match by their session date.
    time_include_turns: bool
    turn_depth: int = Field(ge=0)  # (d) raw turn vectors
    bm25_depth: int = Field(ge=0)  # (e) lexical BM25 over record and turn texts
    turn_bm25_depth: int = Field(ge=0)  # (f) lexical BM25 over the raw turns alone
    bm25_k1: float = Field(ge=0)
    bm25_b: float = Field(ge=0, le=1)
    # A route naming identifiers the conversation holds (codes, ids, e-mails: letters and digits
    # mixed, or joined by _ @ .) gets the items holding them first in every channel's list.
    prefer_identifiers: bool
    # Thread pool running each (conversation, route)'s channels in parallel (0 = in the calling thread;
    # on 2 cores the channels take ~2 ms in all, so more threads buy nothing).
    threads: int = Field(ge=0)
    # FAISS OpenMP threads on the query path: searches are sub-millisecond, threads only add overhead.
    faiss_threads: int = Field(ge=1)

# Multiplier on each recall channel's RRF contribution (1 = plain RRF), one key per channel. The keys
# are those of query.fusion.weights in configs/default.yaml: a channel's weight default is where it
# becomes a configuration key, and the channel registry (lychee_ray/query/channels) checks that
# every registered channel has one and every key a channel. The class is built at runtime from those
# keys; the checker, which cannot see them, gets a plain section under the same name.
_WEIGHT_FIELDS: dict[str, Any] = {
    name: (float, Field(ge=0)) for name in packaged_default("query", "fusion", "weights")}
if TYPE_CHECKING:
    class ChannelWeights(Section):
        """The checker's view: a section whose keys (channel names) are known only at runtime."""
else:
    ChannelWeights = create_model(
        "ChannelWeights",
        __base__=Section,
        __doc__="Multiplier on each recall channel's RRF contribution (1 = plain RRF).",
        __module__=__name__,
        **_WEIGHT_FIELDS,
    )


class FusionConfig(Section):
    """Reciprocal rank fusion across channels and routes (DESIGN §1 step 6)."""

    rrf_k: float = Field(gt=0)  # kappa in 1 / (kappa + rank)
    # The wide pool: fused items kept for rerank and selection (selection never sees only the top k).
    pool_size: int = Field(ge=1)
    weights: ChannelWeights

class RerankConfig(Section):
    """Optional cross-encoder rerank of the fused pool; off by default (no weights ship offline)."""

    enabled: bool
    # Local path (or cached name) of a sentence-transformers CrossEncoder; never downloaded.
    model: str | None
    top_n: int = Field(ge=1)  # pool items reranked (the rest keep their fused order behind them)
    batch_size: int = Field(ge=1)
    # A failed model load is retried on a query after this many seconds; every failure is reported.
    retry_after_s: float = Field(ge=0)

class SelectConfig(Section):
    """Budgeted diversity selection over the fused pool (DESIGN §1 step 6)."""

    # Context tokens of the serialised evidence (offline tokenizer); never exceeded.
    budget_tokens: int = Field(ge=0)
    # MMR: lambda * relevance - (1 - lambda) * max similarity to what is already selected.
    mmr_lambda: float = Field(ge=0, le=1)
    # A raw turn is shown with this many neighbouring turns of the same session on each side (the
    # answer often sits in the reply or the question around the matched turn; LoCoMo: 2 > 1 > 0).
    turn_window: int = Field(ge=0)
    # Raw-turn windows stay inside the centre turn's segment (the unit the encoder read as one event).
    window_within_segment: bool
    # A record and the raw turns it came from are both shown only when the later one adds at least
    # this many content words/numbers the earlier one lacks.
    min_novel_terms: int = Field(ge=1)
    # Source turn ids in the serialised evidence (costs a few tokens per item; the answer step does
    # not need them, the evidence JSON carries them).
    show_source_ids: bool
    # '[type, time]' tags on record lines (records already carry names and absolute dates).
    show_record_tags: bool
    # turns: turn-centred units (records lift their source turns; a turn is shown whole when it
    # fits; records as notes under it or as stand-ins for turns too long to show); items: records
    # and raw-turn windows compete as units (the earlier selection, kept as an ablation).
    units: Literal["turns", "items"]
    # units=turns: share of a record's fused relevance added to each of its source turns.
    record_lift: float = Field(ge=0)
    # units=turns: a turn whose line is longer than this is shown through its records instead.
    max_turn_tokens: int = Field(ge=1)
    # units=turns: tool traffic (agent logs: a tool's result, an assistant turn that only calls
    # tools) that has records is shown through them, as a long turn is — its records keep every
    # field verbatim in a fraction of the JSON's tokens — and a window around another turn stops
    # before it.
    tool_turns_as_records: bool
    # units=turns: records shown under a shown turn at most (each must add min_novel_terms).
    notes_per_turn: int = Field(ge=0)
    # Cost-aware gain: relevance * (median pool cost / item cost) ** exponent (0 = ignore cost).
    cost_exponent: float = Field(ge=0)
    # Redundancy also counts the share of an item's turns the selection already covers, times this
    # weight (0 = cosine similarity only): spreads the budget over more of the conversation.
    source_overlap_weight: float = Field(ge=0)

class AnswerConfig(Section):
    """Answer call (DESIGN §1 step 7)."""

    max_completion_tokens: int = Field(ge=16)
    # rules: evidence sentences returned as the extractive answer.
    rules_max_sentences: int = Field(ge=1)

class CurrentConfig(Section):
    """Memory that stays current on the query path (query/currency.py, query/marks.py)."""

    # Statuses, marks and current-first ranking on (off: records are shown as stored, unmarked).
    enabled: bool
    # A pooled record that a newer one replaced keeps this share of its relevance (the newer one
    # enters the pool with at least its full relevance); a history question ignores it.
    superseded_weight: float = Field(ge=0, le=1)
    # Characters of the replacing record's text a mark quotes.
    mark_chars: int = Field(ge=20)
    # Tokens the selection leaves for marks when the scope has superseded or conflicting records.
    mark_reserve_tokens: int = Field(ge=0)


class QueryConfig(Section):
    """Query side: plan → recall channels → fusion → rerank → selection → answer."""

    planner: PlannerConfig
    recall: RecallConfig
    fusion: FusionConfig
    rerank: RerankConfig
    select: SelectConfig
    answer: AnswerConfig
    current: CurrentConfig
    # Loaded conversations (tables, indexes, BM25) kept in an LRU cache.
    max_conversations: int = Field(ge=1)
