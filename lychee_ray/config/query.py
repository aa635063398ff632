"""Sections for the query side: planner, recall channels, fusion, rerank, selection, answer."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import Field, create_model

from lychee_ray.config.base import Section


class PlannerConfig(Section):
    """Query planner (DESIGN §1 step 4): one LLM call (openai) or deterministic rules."""

    # At most this many routes per plan; extra routes an LLM returns are dropped.
    max_routes: int = Field(default=4, ge=1, description="routes per plan at most (extra LLM routes are dropped)")
    # Search texts kept per route (all routes' texts are embedded in one batched call).
    max_search_texts: int = Field(default=3, ge=1, description="search texts per route (all routes' texts are embedded in one batch)")
    # rules: routes added for known entities named in the question (by first mention).
    max_entity_routes: int = Field(default=2, ge=0, description="rules: extra routes for known entities named in the question")
    # openai: known entity names shown to the planner (most-referenced first) so its routes use
    # the store's spelling; 0 shows none.
    context_entities: int = Field(default=8, ge=0,
        description="openai: known entity names shown to the planner (0 = none); speakers first, then the most-linked")
    max_completion_tokens: int = Field(default=600, ge=64)
    # openai: tries for a plan call whose replies are unusable (invalid JSON, schema violation, cut off
    # at max_completion_tokens); then the question becomes the only route. A weak model's run-away
    # plan repeats at temperature 0, and each try costs a prompt plus up to max_completion_tokens.
    # Transport errors (429, 5xx, timeouts) still get llm.max_attempts.
    max_invalid_attempts: int = Field(default=1, ge=1,
        description=(
            "openai: an unusable plan reply (bad JSON, cut off) is not retried: the question becomes the only "
            "route"))
    # The asking agent's recent turns (``recent_turns`` of search/query; the paper's H_q) are shown
    # to both planners up to this many tokens, newest kept; 0 = ignored.
    recent_turns_tokens: int = Field(default=300, ge=0,
        description=(
            "recent_turns of a search/query (the asking agent's H_q) shown to both planners up to this many "
            "tokens, newest kept; 0 = ignored"))


class RecallConfig(Section):
    """Recall channels (DESIGN §1 step 5); depths are per route and channel."""

    # (a) record vectors
    record_depth: int = Field(default=60, ge=0, description="(a) record vectors (FAISS)")
    # (b) nodes matched by vector, besides exact key matches
    node_depth: int = Field(default=8, ge=0, description="(b) evidence nodes matched by vector, besides exact key matches")
    # (b) records returned by the node channel
    node_record_depth: int = Field(default=60, ge=0, description="(b) records returned by the node channel")
    # (b) cap on records taken from one node (best by similarity)
    per_node_records: int = Field(default=40, ge=1, description="(b) records taken from one node at most (most similar first)")
    # (c) time filter
    time_depth: int = Field(default=40, ge=0, description="(c) records whose time overlaps the route's constraint")
    # (c) records up to this many days outside the constraint still count (ranked after overlapping ones).
    time_slack_days: int = Field(default=0, ge=0,
        description="(c) records this many days outside the constraint still count (ranked after)")
    # (c) records also match by their session date (ranked after content-time matches).
    time_use_session_date: bool = Field(default=True,
        description="(c) records also match by their session date (after content-time matches)")
    # (c) raw turns match by their session date.
    time_include_turns: bool = Field(default=True, description="(c) raw turns match by their session date")
    # (d) raw turn vectors
    turn_depth: int = Field(default=60, ge=0, description="(d) raw turn vectors (FAISS)")
    # (e) lexical BM25 over record and turn texts
    bm25_depth: int = Field(default=60, ge=0, description="(e) lexical BM25 over record and turn texts")
    # (f) lexical BM25 over the raw turns alone
    turn_bm25_depth: int = Field(default=60, ge=0,
        description="(f) lexical BM25 over the raw turns alone (with (d): the hybrid turn RAG inside the method)")
    bm25_k1: float = Field(default=1.2, ge=0)
    bm25_b: float = Field(default=0.75, ge=0, le=1)
    # Depth that grows with the memory (query/depth.py): a conversation of more records and turns than
    # the reference is searched to (size / reference) ** growth times every depth above and the pool.
    depth_reference_items: int = Field(default=2500, ge=0,
        description=("records + turns of a conversation searched to the depths as set; a larger one is searched "
                     "deeper (0 = never)"))
    depth_growth: float = Field(default=0.5, ge=0, le=1,
        description="depths and the fused pool grow as ((records + turns) / depth_reference_items) ** this")
    # A route naming identifiers the conversation holds (codes, ids, e-mails: letters and digits
    # mixed, or joined by _ @ .) gets the items holding them first in every channel's list.
    prefer_identifiers: bool = Field(default=True,
        description=(
            "a route naming ids/codes the conversation holds (FQ8APE, jo@x.com) ranks the items holding them "
            "first in every channel"))
    # Thread pool running each (conversation, route)'s channels in parallel (0 = in the calling thread;
    # on 2 cores the channels take ~2 ms in all, so more threads buy nothing).
    threads: int = Field(default=2, ge=0, description="thread pool running each route's channels in parallel; 0 = in the calling thread")
    # FAISS OpenMP threads on the query path: searches are sub-millisecond, threads only add overhead.
    faiss_threads: int = Field(default=1, ge=1, description="FAISS OpenMP threads on the query path (searches are sub-millisecond)")

# Multiplier on each recall channel's RRF contribution (1 = plain RRF), one key per channel: a
# channel's weight default here is where it becomes a configuration key, and the channel registry
# (lychee_ray/query/channels) checks that every registered channel has one and every key a channel.
# The class is built at runtime from these keys; the checker, which cannot see them, gets a plain
# section under the same name.
CHANNEL_WEIGHT_DEFAULTS: dict[str, tuple[float, str | None]] = {
    "records": (1.0, None),
    "nodes": (1.0, None),
    "time": (1.0, None),
    "turns": (1.0, None),
    "bm25": (1.0, None),
    "turn_bm25": (0.5, "chosen on the dev split (benchmarks/tune_retrieval.py; docs/evaluation.md)"),
}
_WEIGHT_FIELDS: dict[str, Any] = {
    name: (float, Field(default=value, ge=0, description=doc)) for name, (value, doc) in CHANNEL_WEIGHT_DEFAULTS.items()}
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

    # kappa in 1 / (kappa + rank)
    rrf_k: float = Field(default=60.0, gt=0, description="kappa in RRF = sum 1 / (kappa + rank)")
    # The wide pool: fused items kept for rerank and selection (selection never sees only the top k).
    pool_size: int = Field(default=200, ge=1, description="the wide fused pool handed to rerank and selection")
    weights: ChannelWeights = Field(default_factory=ChannelWeights, description="multiplier on each channel's RRF contribution")

class RerankConfig(Section):
    """Optional cross-encoder rerank of the fused pool; off by default (no weights ship offline)."""

    enabled: bool = Field(default=False, description="optional cross-encoder; no reranker weights ship offline")
    # Local path (or cached name) of a sentence-transformers CrossEncoder; never downloaded.
    model: str | None = Field(default=None, description="local path/name of a sentence-transformers CrossEncoder (never downloaded)")
    # pool items reranked (the rest keep their fused order behind them)
    top_n: int = Field(default=50, ge=1, description="pool items reranked; the rest follow in fused order")
    batch_size: int = Field(default=32, ge=1)
    # A failed model load is retried on a query after this many seconds; every failure is reported.
    retry_after_s: float = Field(default=60.0, ge=0, description="a failed model load is retried after this long; each failure is reported")

class SelectConfig(Section):
    """Budgeted diversity selection over the fused pool (DESIGN §1 step 6)."""

    # Context tokens of the serialised evidence (offline tokenizer); never exceeded.
    budget_tokens: int = Field(default=2000, ge=0,
        description="context tokens of the serialised evidence (offline tokenizer); never exceeded")
    # MMR: lambda * relevance - (1 - lambda) * max similarity to what is already selected.
    mmr_lambda: float = Field(default=0.85, ge=0, le=1,
        description="MMR: lambda * relevance - (1 - lambda) * max similarity to the selection")
    # A raw turn is shown with this many neighbouring turns of the same session on each side (the
    # answer often sits in the reply or the question around the matched turn; LoCoMo: 2 > 1 > 0).
    turn_window: int = Field(default=2, ge=0, description="a raw turn is shown with this many same-session neighbours on each side")
    # Raw-turn windows stay inside the centre turn's segment (the unit the encoder read as one event).
    window_within_segment: bool = Field(default=True,
        description="raw-turn windows stay inside the centre turn's segment (the event the encoder read as one)")
    # A record and the raw turns it came from are both shown only when the later one adds at least
    # this many content words/numbers the earlier one lacks.
    min_novel_terms: int = Field(default=2, ge=1,
        description="record + its source turns both shown only if the later adds this many new content words/numbers")
    # Source turn ids in the serialised evidence (costs a few tokens per item; the answer step does
    # not need them, the evidence JSON carries them).
    show_source_ids: bool = Field(default=False,
        description=(
            "source turn ids in the serialised evidence (the answer step does not need them; the evidence JSON "
            "has them)"))
    # '[type, time]' tags on record lines (records already carry names and absolute dates).
    show_record_tags: bool = Field(default=False,
        description="'[type, time]' tags on record lines (records already say names and absolute dates)")
    # turns: turn-centred units (records lift their source turns; a turn is shown whole when it
    # fits; records as notes under it or as stand-ins for turns too long to show); items: records
    # and raw-turn windows compete as units (the earlier selection, kept as an ablation).
    units: Literal["turns", "items"] = Field(default="turns",
        description=(
            "turns: records lift their source turns, a turn is shown whole when it fits, records as notes or "
            "stand-ins for turns too long to show | items: records and raw-turn windows compete as units "
            "(ablation)"))
    # units=turns: share of a record's fused relevance added to each of its source turns.
    record_lift: float = Field(default=1.0, ge=0,
        description="units=turns: share of a record's fused relevance added to each of its source turns")
    # units=turns: a turn whose line is longer than this is shown through its records (and a long
    # turn through its best passage) instead. Long assistant answers shown whole crowd a budget with
    # one exchange; conversational turns stay far below it (docs/evaluation.md "BEAM").
    max_turn_tokens: int = Field(default=150, ge=1,
        description="units=turns: a turn line longer than this is shown through its records (or its best passage) instead")
    # units=turns: tool traffic (agent logs: a tool's result, an assistant turn that only calls
    # tools) that has records is shown through them, as a long turn is — its records keep every
    # field verbatim in a fraction of the JSON's tokens — and a window around another turn stops
    # before it.
    tool_turns_as_records: bool = Field(default=True,
        description=(
            "units=turns: tool traffic with records (tool results, call-only turns) is shown through them "
            "(compact, every field kept); windows stop before it"))
    # units=turns: records shown under a shown turn at most (each must add min_novel_terms).
    notes_per_turn: int = Field(default=1, ge=0,
        description=(
            "units=turns: records shown under a shown turn at most (each must add min_novel_terms, e.g. a "
            "resolved date)"))
    # Cost-aware gain: relevance * (median pool cost / item cost) ** exponent (0 = ignore cost).
    cost_exponent: float = Field(default=0.4, ge=0,
        description="gain = relevance * (median pool cost / item cost) ** exponent; 0 = ignore cost")
    # Redundancy also counts the share of an item's turns the selection already covers, times this
    # weight (0 = cosine similarity only): spreads the budget over more of the conversation.
    source_overlap_weight: float = Field(default=0.0, ge=0,
        description="redundancy also counts the share of an item's turns already covered (x weight)")

class ExtractiveWeights(Section):
    """Weights of the ``rules`` answer's sentence choice (query/extractive.py), chosen on the LoCoMo dev split."""

    words: float = Field(default=1.0, ge=0, description="share of the question's terms the sentence has")
    meaning: float = Field(default=0.5, ge=0, description="cosine of its line's stored vector with the question's")
    type: float = Field(default=0.2, ge=0, description="it holds a value of the kind the question asks for")
    relevance: float = Field(default=0.3, ge=0, description="its unit's relevance in the selection")
    record: float = Field(default=0.05, ge=0, description="it is a record (names and dates resolved)")
    gap: float = Field(default=0.05, ge=0, description="per sentence between the one matching the question and the one answering")


class AnswerConfig(Section):
    """Answer call (DESIGN §1 step 7)."""

    max_completion_tokens: int = Field(default=256, ge=16)
    # rules: evidence sentences returned as the extractive answer.
    rules_max_sentences: int = Field(default=1, ge=1, description="rules: evidence sentences returned as the extractive answer")
    # rules: how a sentence is chosen (query/extractive.py).
    rules_weights: ExtractiveWeights = Field(default_factory=lambda: ExtractiveWeights(),
        description="rules: weights of the extractive answer's choice (query/extractive.py)")
    # rules: a sentence sharing no word with the question is a candidate only this close in meaning.
    rules_min_meaning: float = Field(default=0.5, ge=-1, le=1,
        description="rules: a sentence sharing no word with the question answers only when its line is this close in meaning")
    # rules: how far before the answering sentence one that matches the question may lead to it.
    rules_follow_sentences: int = Field(default=3, ge=0,
        description="rules: sentences before an answering one, in its unit, that may lead to it (a question, a remark)")

class CurrentConfig(Section):
    """Memory that stays current on the query path (query/currency.py, query/marks.py)."""

    # Statuses, marks and current-first ranking on (off: records are shown as stored, unmarked).
    enabled: bool = Field(default=True, description="statuses, marks on lines that show a replaced value, current value first")
    # A pooled record that a newer one replaced keeps this share of its relevance (the newer one
    # enters the pool with at least its full relevance); a history question ignores it.
    superseded_weight: float = Field(default=1.0, ge=0, le=1,
        description=(
            "a pooled record a newer one replaced keeps this share of its relevance (the newer one enters with at"
            " least its full relevance either way); history questions ignore it"))
    # What holds now enters the pool with this much more than the relevance of what it replaced (and a
    # turn a superseded record was made from brings the replacing record's turn): shown before it.
    current_margin: float = Field(default=0.01, ge=0,
        description="what holds now gets this much more relevance than what it replaced (shown first); 0: the same")
    # Characters of the replacing record's text a mark quotes.
    mark_chars: int = Field(default=60, ge=20,
        description="characters of the replacing record (its slot value, else its text) a mark quotes")
    # A raw-turn line a superseded or conflicting record was made from takes the record's mark ...
    mark_stated_turns: bool = Field(default=True,
        description="a raw-turn line (or passage) a superseded or conflicting record was made from takes its mark")
    # ... a passage of the turn only when it holds this share of the record's words.
    stated_min_share: float = Field(default=0.5, ge=0, le=1,
        description="... a passage of the turn only when it holds this share of the record's words")
    # A record answering a user's turn whose statement is superseded or conflicting (made from the
    # turn and the assistant's reply) says so: the advice was given for the old value.
    mark_answers: bool = Field(default=True,
        description="a record answering a user turn whose statement is superseded or conflicting says so")
    # Tokens the selection leaves for marks when the scope has superseded or conflicting records.
    mark_reserve_tokens: int = Field(default=60, ge=0,
        description="tokens the selection leaves for marks when the scope has superseded or conflicting records")


class QueryConfig(Section):
    """Query side: plan → recall channels → fusion → rerank → selection → answer."""

    planner: PlannerConfig = Field(default_factory=PlannerConfig)
    recall: RecallConfig = Field(default_factory=RecallConfig, description="depths are per route and channel")
    fusion: FusionConfig = Field(default_factory=FusionConfig)
    rerank: RerankConfig = Field(default_factory=RerankConfig)
    select: SelectConfig = Field(default_factory=SelectConfig)
    answer: AnswerConfig = Field(default_factory=AnswerConfig)
    current: CurrentConfig = Field(default_factory=CurrentConfig, description="memory that stays current (docs/current-memory.md)")
    # Loaded conversations (tables, indexes, BM25) kept in an LRU cache.
    max_conversations: int = Field(default=64, ge=1, description="loaded conversations (tables, FAISS indexes, BM25) kept in an LRU cache")
