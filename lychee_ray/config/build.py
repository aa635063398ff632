"""Sections for construction: segmenter, encoder, nodes and the build job (its Ray runtime: :mod:`lychee_ray.config.ray`)."""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import Field, model_validator

from lychee_ray.config.base import Section
from lychee_ray.names import ExchangeMode, ExchangeModeChoice, OnConflict, RepairMode, SegmentationMethod, UnitWithoutRoles, WeMode


class SurpriseConfig(Section):
    """phi(s): calibrated surprise, phi = max(A, robust_weight * R) (docs/segmenter.md)."""

    # s = 1 - cos(e_t, h_k) against the open segment's recent trajectory h_k (trajectory), or against
    # the closer of h_k and its centroid c_k (max: the authors' form).
    reference: Literal["trajectory", "max"]

    # Absolute part A = clip((s - center) / scale, clip_min, clip_max). The paper's centre suits
    # text-embedding-3-small; the default is calibrated for centred MiniLM (A then only fires on outliers).
    center: float
    scale: float = Field(gt=0)
    clip_min: float
    clip_max: float
    # Relative part R = robust z-score of s against the last `robust_window` surprises of the stream.
    # Weighted above the paper's: phi is then mostly data-adaptive, so it transfers across corpora.
    robust_weight: float = Field(ge=0)
    robust_window: int = Field(ge=1)
    robust_min_history: int = Field(ge=1)  # R = 0 until this many surprises were seen
    robust_clip_min: float
    robust_clip_max: float
    mad_to_sigma: float = Field(gt=0)  # MAD -> standard deviation for normal data
    # Smallest sigma for R: keeps near-identical turns (tiny surprise wiggles) from looking like outliers.
    mad_floor: float = Field(gt=0)

class PressureConfig(Section):
    """A ramp: 0 up to `start`, then +1 per `scale` units, capped at `max`."""

    start: float = Field(ge=0)
    scale: float = Field(gt=0)
    max: float = Field(ge=0)

class CueConfig(Section):
    """Surface cues of a unit's text next to the embedding signals (docs/segmenter.md §4).

    Their weights add to the logit of p_t; they were fitted by benchmarks/fit_segmenter_cues.py.
    """

    w_question: float  # on Q_t = 1 when the unit's opening turn asks a question (a new topic is often asked for)
    w_answer: float  # on A_t = 1 when the previous unit ended with a question (this one answers it)
    w_lexical: float  # on X_t = share of the unit's content words absent from the open segment's recent units
    lexical_window: int = Field(ge=1)  # X_t compares against the open segment's last this-many units
    min_word_chars: int = Field(ge=1)  # content words: at least this many characters (a stop-word list without a language)
    # The exchange modes in which each cue counts (elsewhere it is 0): a gate the segmenter can observe
    # in the stream itself (roles present -> role units), chosen by leave-one-corpus-out.
    question_modes: list[ExchangeMode]
    answer_modes: list[ExchangeMode]
    lexical_modes: list[ExchangeMode]
    # Q_t counts only while the stream's recent words per turn (the mean over its last `words_window`
    # non-empty turns, known after `words_min_history`) is at most this: the question cue helps
    # short-utterance chat and hurts long-utterance chat and agent logs. 0 = no gate.
    question_max_words: float = Field(ge=0)
    words_window: int = Field(ge=1)
    words_min_history: int = Field(ge=1)
    # The look-ahead H_t = cos(next unit, unit) - cos(next unit, open segment's trajectory): in these modes
    # a unit is decided only when the next one has arrived (one unit of latency; [] = decide at once).
    w_ahead: float
    ahead_modes: list[ExchangeMode]


class PlacementConfig(Section):
    """Where a semantic cut lands at turn level (docs/segmenter.md §3).

    A unit of two turns (``pair``) can only be cut before its first turn, so a topic that starts at
    its second turn, or at the second turn of the unit before, is cut one turn off. When a cut fires,
    the gap before the unit competes with the gap before the open segment's last turn and the gap
    inside the unit: the gap whose two sides (``window`` turns each, no look-ahead past the unit)
    are least similar wins, if it beats the unit's own gap by ``margin``.
    """

    modes: list[UnitWithoutRoles]  # exchange modes in which a cut may move by one turn ([] = off)
    window: int = Field(ge=1)  # turns on each side of a gap for its coherence
    margin: float = Field(ge=0)  # cosine by which a neighbouring gap must be less coherent than the unit's own


class CalibrationConfig(Section):
    """The cut threshold calibrated from the stream's own decision scores (docs/segmenter.md §3).

    Fixed: cut when the logit z_t > logit(threshold). Stream (lychee_ray/ingest/segment/calibration.py):
    ``quantile`` cuts the top rho of the stream's recent evidence, rho = (turns per unit, measured on the
    stream) / ``segment_turns`` (a segment-length prior); ``robust`` cuts evidence ``spread`` robust
    standard deviations above the stream's median. The threshold used is the blend
    ``(1 - blend) * fixed + blend * stream``; ``blend: 0`` is the fixed rule.
    """

    blend: float = Field(ge=0, le=1)
    # quantile = cut the stream's top rho (rate from segment_turns); robust = cut what lies `spread`
    # robust SDs above the stream's median evidence (scale from the stream, rate from its tail).
    kind: Literal["quantile", "robust"]
    segment_turns: float = Field(gt=0)  # the segment-length prior: expected turns per segment (quantile)
    spread: float  # robust: robust standard deviations above the median evidence
    mad_floor: float = Field(gt=0)  # robust: smallest spread unit (a stream of identical evidence)
    window: int = Field(ge=1)  # scores remembered for the quantile
    min_history: int = Field(ge=1)  # fixed threshold alone until this many scores were seen
    max_rate: float = Field(gt=0, le=1)  # rho is at most this (a unit of many turns is not always cut)


class SegmenterConfig(Section):
    """Online semantic segmenter (DESIGN §1 step 1); calibrated in docs/segmenter.md."""

    # semantic = boundary probability p_t; fixed = every `fixed_window` exchanges (the ablation).
    method: SegmentationMethod
    # role = user turn + replies; pair = two consecutive turns; turn = one turn;
    # auto = role when the conversation has assistant turns, else auto_without_roles.
    exchange_mode: ExchangeModeChoice
    # The unit `auto` uses where no turn answers a user (two-human chat, a corpus without roles):
    # turn (every utterance is a decision point) or pair (two consecutive turns).
    auto_without_roles: UnitWithoutRoles
    # Exchange vector from its turn vectors: mean = normalised mean; tokens = token-weighted mean.
    exchange_weighting: Literal["mean", "tokens"]
    # Hard cap on a segment's tokens (turn text); longer turns are split into pieces.
    max_segment_tokens: int = Field(ge=16)
    # Bound on one turn's cost: only the first this-many characters of a longer turn (a pasted log,
    # a 10 MB blob) are embedded, segmented and encoded; the turn is stored and searchable (raw turns,
    # BM25) in full, and the build reports it as an input warning. 0 = no bound.
    max_turn_chars: int = Field(ge=0)
    threshold: float = Field(gt=0, lt=1)  # delta: cut when p_t > threshold
    bias: float  # b
    # Structural prior added to b where, in role mode, a unit opens with a user turn (a new request:
    # support dialogues shift topic at the user's turn). Learned from roles, not set per corpus.
    role_bias: float
    w_surprise: float  # w_s on phi(s_t)
    w_cohesion: float  # w_c on min(cohesion_max, d_t / cohesion_scale)
    w_length: float  # w_l on the length pressure L_t
    w_count: float  # w_n on the count pressure N_t
    # Ten times the paper's: centred MiniLM cosines are lower and wider spread.
    cohesion_scale: float = Field(gt=0)
    cohesion_max: float = Field(ge=0)
    # h_k = normalised mean of the last `trajectory_window` exchanges of the open segment.
    trajectory_window: int = Field(ge=1)
    # Subtract the running mean of the stream's exchange vectors before the cosines (removes the
    # component all sentences share). The mean is shrunk as sum / (n + centering_prior), so the
    # centring fades in smoothly over the first exchanges instead of switching on at once.
    center_embeddings: bool
    centering_prior: float = Field(ge=0)
    surprise: SurpriseConfig
    # L_t over the tokens already in the open segment; N_t over its turns (the same unit in every exchange mode).
    length_pressure: PressureConfig
    count_pressure: PressureConfig
    fixed_window: int = Field(ge=1)  # exchanges per segment when method = fixed
    cues: CueConfig
    placement: PlacementConfig
    calibration: CalibrationConfig

class GuardConfig(Section):
    """Memory checks on every encode reply (docs/llm-quality.md): grounding, echo, entities, time."""

    # false = only the structural checks (empty text, unknown type, duplicate in one reply) run.
    enabled: bool
    # grounded: at least this share of a record's content words occur in its cited turns (plus the
    # speakers' and known entities' names); otherwise it is re-attributed to the best-matching turns
    # of the segment, or rejected (ungrounded / invalid_citation).
    min_grounding: float = Field(ge=0, le=1)
    # re-attribution cites at most this many turns (the best-matching first).
    max_reattributed_turns: int = Field(ge=1)
    # echo: content-word Jaccard with a reference-context or earlier record at or above this (or equal
    # normalised text) marks a near-copy ...
    echo_jaccard: float = Field(gt=0, le=1)
    # ... which is kept only as a true restatement: at least this share of its words in its own turns.
    echo_keep_grounding: float = Field(ge=0, le=1)
    # entities: names (speakers, known entities, capitalised spans) in the text are added by code
    # when the model left entities empty or omitted a known name; at most this many per record.
    max_filled_entities: int = Field(ge=0)
    # time: a normalised time more than this many years before / after the session date is implausible
    # (recomputed from its expression, else dropped with the expression kept).
    time_past_years: int = Field(ge=0)
    time_future_years: int = Field(ge=0)
    # "yesterday" etc. left in a record's text are rewritten as the absolute date (session date based).
    rewrite_relative_text: bool
    # per segment: more than this share of drafts rejected as echo / ungrounded / invalid citation
    # makes the reply degenerate -> one retry in repair mode, then the segment fails (degenerate_output).
    max_rejected_share: float = Field(ge=0, le=1)
    # retries in repair mode per degenerate segment (0 = fail it at once).
    repair_attempts: int = Field(ge=0)
    # repair prompt: no_records = reference context without its record list; do_not_repeat = the
    # list shown as "already stored, do not repeat" together with the rejected texts.
    repair_mode: RepairMode


class ToolRecordsConfig(Section):
    """Records from agent work (docs/agent-logs.md): how the ``rules`` backend reads tool
    traffic and system prompts. Tools are told apart by name; matching is case-insensitive."""

    # A tool whose name starts with one of these looks something up (its result is a `fact`); any
    # other tool acts (its call and result are an `event`).
    read_prefixes: list[str]
    # A tool whose name contains one of these hands the conversation over (a `failure_pattern`).
    transfer_words: list[str]
    # Tools that only record the agent's own reasoning (the call's arguments are its note).
    note_tools: list[str]
    # Characters of one record's text at most (a long result is split into several records).
    max_record_chars: int = Field(ge=80)
    # Records one tool result gives at most (fields, or list items: the first ones are kept).
    max_records_per_result: int = Field(ge=1)
    # Characters of the request a tool call answered, quoted in its tool_affordance record.
    request_chars: int = Field(ge=20)
    # A call is named in records by its scalar arguments up to this many characters each (longer or
    # nested ones are elided; the call's tool_affordance record lists them all).
    short_arg_chars: int = Field(ge=8)
    # Constraint records one system prompt gives at most (its policy sentences, in order).
    max_policy_records: int = Field(ge=0)
    # A successful call of a tool whose name starts with one of these ends the object it acts on (a
    # cancellation): every earlier record of that object stops being current (docs/current-memory.md).
    end_prefixes: list[str]


class CurrencyConfig(Section):
    """Memory that stays current at write time (ingest/supersede.py, docs/current-memory.md)."""

    # openai: current records of the slots a segment's turns mention, shown in the reference context
    # as candidates its records may replace or contradict (at most this many, best match first) ...
    max_candidates: int = Field(ge=0)
    # ... within this many prompt tokens (besides encoder.context_token_budget).
    candidate_tokens: int = Field(ge=0)
    # Characters of a candidate's record text shown.
    candidate_chars: int = Field(ge=20)
    # rules: link the user's statements by explicit change and denial cues (ingest/text_links.py).
    text_cues: bool
    # Words each side of a value that say what it is about.
    cue_window: int = Field(ge=1)
    # A changed value replaces an earlier value of the same kind and unit sharing this many of those
    # words (one more for a value without a word for a unit: 78%, 250ms, a date, an amount) ...
    change_min_shared: int = Field(ge=1)
    # ... not counting words in more than this share of the user's statements so far (the
    # conversation's everyday words), once there are at least cue_min_statements of them.
    cue_max_df: float = Field(gt=0, le=1)
    cue_min_statements: int = Field(ge=1)
    # A denial ("I've never ...") conflicts with a statement holding at least this many of its words ...
    denial_min_shared: int = Field(ge=1)
    # ... and at least this share of them.
    denial_min_share: float = Field(ge=0, le=1)


class AssistantRecordsConfig(Section):
    """Assistant chats in the ``rules`` backend (docs/llm-quality.md "Assistant chats"): assistant
    answers condensed, one record per code block / table / drafted document, the user's statements
    out of their questions."""

    # false = every assistant sentence a record and user questions kept whole, as for any speaker.
    enabled: bool
    # An assistant turn with at least this many characters of prose, or with any code block, table or
    # drafted document, is condensed; a shorter one keeps a record per sentence.
    condense_min_chars: int = Field(ge=0)
    # Headings / list-item leads an answer record lists at most.
    max_points: int = Field(ge=0)
    # Sentences stating a figure or name the user's turns did not say, added to the answer record.
    key_sentences: int = Field(ge=0)
    # An answer record's text at most (characters); one point, one key sentence at most.
    max_chars: int = Field(ge=80)
    point_chars: int = Field(ge=20)
    sentence_chars: int = Field(ge=40)
    # Artifact records per turn at most (the rest are joined into the last one).
    max_artifacts: int = Field(ge=1)
    # An artifact record's text at most (characters), and the identifiers / names / figures it lists.
    artifact_chars: int = Field(ge=80)
    artifact_identifiers: int = Field(ge=1)
    # A user's statements inside a question ("I secured 5 interviews, how can I ...?") become
    # statement records of their own; the question is recorded as asked (type event).
    split_requests: bool


class DedupConfig(Section):
    """Near-duplicate drafts of one encode reply collapse into one record with all their sources
    (ingest/encode/dedup.py; both backends)."""

    enabled: bool
    # Near-duplicate: same type and artifact kind, content-word Jaccard at or above this, and the same
    # specifics (numbers, names, identifiers, time) — drafts whose specifics differ never collapse.
    min_jaccard: float = Field(gt=0, le=1)


class RulesEncoderConfig(Section):
    """The ``rules`` encoder backend (no LLM): sentence rules over each turn (ingest/encode/rules)."""

    # Sentences shorter than this many words are merged or dropped as filler.
    min_words: int = Field(ge=1)
    max_entities: int = Field(ge=0)
    max_topics: int = Field(ge=0)
    # Questions with fewer content words are dropped as chit-chat.
    question_min_content_words: int = Field(ge=0)
    # Keep other questions as "A asked: ..." records.
    keep_questions: bool
    # "we" → "A and B" only on contact words (auto), always (pair) or never (keep).
    we_mode: WeMode
    # One record per "[image: ...]" caption.
    image_records: bool
    # Adjacent word pairs ("support group") as topics.
    topic_bigrams: bool
    # Records per turn at most (0 = unlimited).
    max_records_per_turn: int = Field(ge=0)
    # Fold a short answer (at most this many words) into the record of the question
    # That ended the previous turn of the same segment ("A asked: ...? B answered: ...").
    pair_answers: bool
    pair_max_answer_words: int = Field(ge=1)
    # Assistant chats: condensed answers, artifacts, statements out of questions.
    assistant: AssistantRecordsConfig


# The flat encoder.rules_* keys read before encoder.rules existed (one release: mapped, with a warning).
FLAT_RULES_KEYS: dict[str, str] = {f"rules_{k}": k for k in RulesEncoderConfig.model_fields}


class EncoderConfig(Section):
    """Segment encoder (DESIGN §1 step 2): one LLM call per segment."""

    # Reference context rho_k = (d_{k-1}; last m records), truncated to a fixed token budget so that
    # prompts do not grow with the conversation's history.
    context_records: int = Field(ge=0)
    context_token_budget: int = Field(ge=0)
    # Completion budget per encode call (records JSON).
    max_completion_tokens: int = Field(ge=64)
    # Turn text longer than this is cut in the prompt (the raw turn stays indexed in full).
    max_turn_chars: int = Field(ge=100)
    # The rules backend (no LLM).
    rules: RulesEncoderConfig
    # Read "05/08/2023" as 5 August (day first) instead of 8 May.
    day_first: bool
    # A record without its own time takes the first time named in its source turns (LLM records;
    # rules records already carry per-sentence times, so this would smear one turn's date over all).
    time_from_turns: bool
    # atomic = one record per fact (the method); summary = ONE summary record per segment (the
    # paper's "summary-level records" ablation; `lychee-ray eval --variant summary`).
    mode: Literal["atomic", "summary"]
    # openai backend: an encode reply is rejected as written in the wrong language (retried, then the
    # segment is stored as failed with its raw turns kept) when at least this share of the segment's
    # turn letters are one script (Latin, CJK, Cyrillic, ...) and at least this share of a record's
    # letters are another. A cheap check without a language model; 0 disables it.
    wrong_script_share: float = Field(ge=0, le=1)
    # How rho_k is shown: guarded = labelled as context for resolving names/dates that must not be
    # copied (records listed as "already stored"); plain = the paper's bare "Recent records" list.
    context_style: Literal["guarded", "plain"]
    guard: GuardConfig
    tools: ToolRecordsConfig
    dedup: DedupConfig
    currency: CurrencyConfig

    @model_validator(mode="before")
    @classmethod
    def _flat_rules_keys(cls, data: Any) -> Any:
        """The flat ``encoder.rules_*`` keys of older configs, mapped to ``encoder.rules.*`` with one
        warning naming them (the flat key wins over ``encoder.rules``, which holds the defaults)."""
        if not isinstance(data, dict) or not any(k in FLAT_RULES_KEYS for k in data):
            return data
        data = dict(data)
        rules = dict(data.get("rules") or {})
        moved = [k for k in data if k in FLAT_RULES_KEYS]
        for k in moved:
            rules[FLAT_RULES_KEYS[k]] = data.pop(k)
        data["rules"] = rules
        warnings.warn("deprecated configuration keys (read for one more release): "
                      + ", ".join(f"encoder.{k} -> encoder.rules.{FLAT_RULES_KEYS[k]}" for k in moved),
                      FutureWarning, stacklevel=2)
        return data

    @staticmethod
    def fingerprint_form(dump: dict[str, Any]) -> dict[str, Any]:
        """An encoder section dump with ``rules`` flattened to the ``rules_*`` keys it had: stores
        built before the section existed keep their fingerprint."""
        rules = dump.get("rules")
        if not isinstance(rules, dict):
            return dump
        out = {k: v for k, v in dump.items() if k != "rules"}
        out.update({f"rules_{k}": v for k, v in rules.items()})
        return out

class NodesConfig(Section):
    """Evidence nodes derived from record metadata (DESIGN §1 step 3)."""

    # Per-node record list cap (the first records in conversation order are kept).
    max_records_per_node: int = Field(ge=1)
    # Records of one segment whose source turns are at most this many turns apart share an event frame.
    event_frame_turn_gap: int = Field(ge=0)
    # Day-level time nodes are made for spans up to this many days (longer spans get month nodes only).
    max_days_per_span: int = Field(ge=1)
    # Characters of member-record text kept in an event frame's display text (what gets embedded).
    event_frame_text_chars: int = Field(ge=50)
    # entity x topic nodes per record at most (keeps the cross product bounded).
    max_entity_topic_pairs: int = Field(ge=0)
    # Only nodes linking at least this many records get a vector: a one-record node's text adds
    # little over the record's own vector, and there are many of them (all nodes still match by key).
    min_records_to_embed: int = Field(ge=1)

class BuildConfig(Section):
    """Memory construction job."""

    # Encode-call failures that are retried by the LLM layer are not counted here: this is the
    # number of whole-segment attempts (a failed segment is stored as failed after these).
    segment_attempts: int = Field(ge=1)
    # Conversations in flight per builder (their segments are sequential; conversations overlap).
    conversations_in_flight: int = Field(ge=1)
    # Final step: merge per-conversation Parquet parts, this many conversations per file (0 = off).
    compact_conversations_per_file: int = Field(ge=0)
    # A stored conversation whose input rewrites its history (a stored turn changed, removed or
    # reordered): error = quarantine it (stage "conflict"); rebuild = build it again from scratch.
    on_conflict: OnConflict
    # A conversation another writer committed between its decision and its commit (an append, a
    # concurrent run) is decided again; after this many decisions in all it fails at stage "commit"
    # (nothing of it written; a re-run builds it).
    decide_rounds: int = Field(ge=1)
    # Distinct system prompts whose encoding a process keeps (each is encoded once, its records
    # stored with every conversation that has it; least recently used dropped beyond this).
    system_prompt_cache: int = Field(ge=1)
    # `lychee-ray build` without --local / --ray (and without RAY_ADDRESS) runs in this process,
    # without starting Ray, when the input has nothing to build or at most this many conversations
    # and turns to build: Ray's start-up costs more than such a build (ingest/runner_choice.py).
    local_max_conversations: int = Field(ge=0)
    local_max_turns: int = Field(ge=0)
