"""Section for the segment encoder (``encoder``): the memory guard, tool records, currency, dedup, rules."""

from __future__ import annotations

import warnings
from typing import Any, Literal

from pydantic import Field, model_validator

from lychee_ray.config.base import Section
from lychee_ray.names import RepairMode, WeMode


class GuardConfig(Section):
    """Memory checks on every encode reply (docs/llm-quality.md): grounding, echo, entities, time."""

    # false = only the structural checks (empty text, unknown type, duplicate in one reply) run.
    enabled: bool = Field(default=True, description="false = only empty text / unknown type / duplicate-in-reply checks")
    # grounded: at least this share of a record's content words occur in its cited turns (plus the
    # speakers' and known entities' names); otherwise it is re-attributed to the best-matching turns
    # of the segment, or rejected (ungrounded / invalid_citation).
    min_grounding: float = Field(default=0.5, ge=0, le=1,
        description="share of a record's content words that must occur in its cited turns (+ speaker/entity names)")
    # re-attribution cites at most this many turns (the best-matching first).
    max_reattributed_turns: int = Field(default=2, ge=1,
        description="an unsupported or missing citation is re-attributed to at most this many best-matching turns")
    # echo: content-word Jaccard with a reference-context or earlier record at or above this (or equal
    # normalised text) marks a near-copy ...
    echo_jaccard: float = Field(default=0.6, gt=0, le=1,
        description="content-word Jaccard with a reference-context / earlier record at or above this = near-copy")
    # ... which is kept only as a true restatement: at least this share of its words in its own turns.
    echo_keep_grounding: float = Field(default=0.8, ge=0, le=1,
        description="a near-copy is kept (true restatement) only when this share of its words is in its own turns")
    # entities: names (speakers, known entities, capitalised spans) in the text are added by code
    # when the model left entities empty or omitted a known name; at most this many per record.
    max_filled_entities: int = Field(default=8, ge=0,
        description="names code adds to a record whose entities are empty or miss a known name")
    # time: a normalised time more than this many years before / after the session date is implausible
    # (recomputed from its expression, else dropped with the expression kept).
    time_past_years: int = Field(default=120, ge=0,
        description="a record time more than this many years before the session date is implausible")
    time_future_years: int = Field(default=20, ge=0, description="... or more than this many years after it")
    # "yesterday" etc. left in a record's text are rewritten as the absolute date (session date based).
    rewrite_relative_text: bool = Field(default=True, description="\"yesterday\" left in a record's text becomes the absolute date")
    # per segment: more than this share of drafts rejected as echo / ungrounded / invalid citation
    # makes the reply degenerate -> one retry in repair mode, then the segment fails (degenerate_output).
    max_rejected_share: float = Field(default=0.5, ge=0, le=1,
        description="more than this share of a reply's drafts rejected (echo/ungrounded/citation) = degenerate")
    # retries in repair mode per degenerate segment (0 = fail it at once).
    repair_attempts: int = Field(default=1, ge=0,
        description="re-encodes of a degenerate segment in repair mode, then it fails as degenerate_output")
    # repair prompt: no_records = reference context without its record list; do_not_repeat = the
    # list shown as "already stored, do not repeat" together with the rejected texts.
    repair_mode: RepairMode = Field(default="no_records",
        description="no_records (rho without its record list) | do_not_repeat (list shown as already stored)")


class ToolRecordsConfig(Section):
    """Records from agent work (docs/agent-logs.md): how the ``rules`` backend reads tool
    traffic and system prompts. Tools are told apart by name; matching is case-insensitive."""

    # A tool whose name starts with one of these looks something up (its result is a `fact`); any
    # other tool acts (its call and result are an `event`).
    read_prefixes: list[str] = Field(
        default=["get", "search", "list", "find", "lookup", "look", "fetch", "read", "query", "retrieve", "check", "calculate",
                 "count", "view", "show", "describe"],
        description="a tool named so looks something up (fact); others act (event)")
    # A tool whose name contains one of these hands the conversation over (a `failure_pattern`).
    transfer_words: list[str] = Field(default=["transfer", "escalate", "handoff", "hand_off"],
        description="a tool named with one of these hands over to a human (failure_pattern)")
    # Tools that only record the agent's own reasoning (the call's arguments are its note).
    note_tools: list[str] = Field(default=["think"], description="tools that only hold the agent's reasoning (their arguments are a note)")
    # Characters of one record's text at most (a long result is split into several records).
    max_record_chars: int = Field(default=320, ge=80,
        description="one record's text at most; a longer tool result is split into several records")
    # Records one tool result gives at most (fields, or list items: the first ones are kept).
    max_records_per_result: int = Field(default=8, ge=1,
        description="records one tool result gives at most (fields or list items, first ones kept)")
    # Characters of the request a tool call answered, quoted in its tool_affordance record.
    request_chars: int = Field(default=120, ge=20, description="characters of the user's request quoted in a tool_affordance record")
    # A call is named in records by its scalar arguments up to this many characters each (longer or
    # nested ones are elided; the call's tool_affordance record lists them all).
    short_arg_chars: int = Field(default=40, ge=8,
        description="records name a call by its scalar arguments up to this long (longer/nested ones elided)")
    # Constraint records one system prompt gives at most (its policy sentences, in order).
    max_policy_records: int = Field(default=60, ge=0,
        description="constraint records one system prompt gives at most (its rule sentences, in order)")
    # A successful call of a tool whose name starts with one of these ends the object it acts on (a
    # cancellation): every earlier record of that object stops being current (docs/current-memory.md).
    end_prefixes: list[str] = Field(default=["cancel", "delete", "remove", "close", "terminate", "revoke", "deactivate"],
        description="a successful call of such a tool ends its object: its earlier records stop being current")


class CurrencyConfig(Section):
    """Memory that stays current at write time (ingest/supersede.py, docs/current-memory.md)."""

    # openai: current records of the slots a segment's turns mention, shown in the reference context
    # as candidates its records may replace or contradict (at most this many, best match first) ...
    max_candidates: int = Field(default=8, ge=0,
        description=(
            "openai: current records of slots the segment mentions, shown as ones its records may "
            "replace/contradict"))
    # ... within this many prompt tokens (besides encoder.context_token_budget).
    candidate_tokens: int = Field(default=400, ge=0, description="... within this many prompt tokens (besides context_token_budget)")
    # Characters of a candidate's record text shown.
    candidate_chars: int = Field(default=160, ge=20, description="characters of a candidate's record text shown")
    # Statements of value (core/statements.py) are read from each person's records and an
    # assistant's records about its user, and put into slots by meaning (ingest/value_slots.py).
    statements: bool = Field(default=True,
        description=(
            "read the values people state (counts, money, %, durations, dates, times, identifiers, states) and "
            "link a newer value of a slot to the ones it replaces"))
    # Content words of a statement's subject phrase ("shipping address", "chapters thesis").
    subject_words: int = Field(default=4, ge=1, description="content words of a statement's subject phrase at most")
    # Content words of the statement's sentence kept as its context ("accuracy" of "conditional
    # probability problems"), which the slot comparison embeds with the subject.
    context_words: int = Field(default=8, ge=0, description="content words of a statement's sentence kept as its context")
    # Two statements of one kind and unit are of one slot when the cosine of their subject phrases'
    # embeddings (the record model) is at least this.
    slot_min_similarity: float = Field(default=0.7, ge=0, le=1,
        description="subject phrases of one slot: cosine of their embeddings at least this (same kind and unit)")
    # ... the embedded text is the subject phrase and its sentence's other content words ("accuracy:
    # conditional probability problems"); false: the subject phrase alone.
    slot_context: bool = Field(default=True,
        description="slots compare a statement's subject with its sentence's other words (false: the subject alone)")
    # Denials ("I've never ...") and the statement they contradict (ingest/text_links.py).
    text_cues: bool = Field(default=True,
        description="link a denial (\"I've never ...\") and an earlier statement that says it happened as conflicting")
    # A denial ("I've never ...") and a statement of the same person conflict when the statement shares
    # at least this many of the denied words ...
    denial_min_shared: int = Field(default=2, ge=1,
        description="a denial is compared with the person's statements sharing at least this many of its words ...")
    # ... (at most this many of them, most shared first) ...
    denial_candidates: int = Field(default=8, ge=1, description="... at most this many of them, most shared first ...")
    # ... and the cosine of the denied phrase's and the statement's embeddings is at least this.
    denial_min_similarity: float = Field(default=0.6, ge=-1, le=1,
        description="... and they conflict when the cosine of the denied phrase's and the statement's embeddings is at least this")
    # ... that say the denied verb as done or being done ("never written ..." against "I wrote ...",
    # "I'm trying to write ...", not "I reviewed ...") ...
    denial_same_verb: bool = Field(default=True,
        description="... that say the denied verb as done or being done (not another verb of the same topic) ...")
    # A denial conflicts with at most this many of them (the nearest in meaning).
    denial_max_links: int = Field(default=3, ge=1, description="a denial conflicts with at most this many statements (the nearest)")


class AssistantRecordsConfig(Section):
    """Assistant chats in the ``rules`` backend (docs/llm-quality.md "Assistant chats"): assistant
    answers condensed, one record per code block / table / drafted document, the user's statements
    out of their questions."""

    # false = every assistant sentence a record and user questions kept whole, as for any speaker.
    enabled: bool = Field(default=True,
        description="false = every assistant sentence a record and user questions kept whole, as for any speaker")
    # An assistant turn with at least this many characters of prose, or with any code block, table or
    # drafted document, is condensed; a shorter one keeps a record per sentence.
    condense_min_chars: int = Field(default=1200, ge=0,
        description=(
            "an assistant turn with this much prose (characters), or any code block / table / drafted document, "
            "is condensed; shorter ones (an agent's replies: 99 % under 1,100) keep a record per sentence"))
    # Headings / list-item leads an answer record lists at most.
    max_points: int = Field(default=8, ge=0, description="headings / list-item leads an answer record lists at most")
    # Sentences stating a figure or name the user's turns did not say, added to the answer record.
    key_sentences: int = Field(default=2, ge=0,
        description="answer sentences stating a figure or name the user did not say, kept in the answer record")
    # An answer record's text at most (characters); one point, one key sentence at most.
    max_chars: int = Field(default=600, ge=80, description="an answer record's text at most (characters)")
    point_chars: int = Field(default=80, ge=20, description="one point at most")
    sentence_chars: int = Field(default=220, ge=40, description="one key sentence at most")
    # Artifact records per turn at most (the rest are joined into the last one).
    max_artifacts: int = Field(default=6, ge=1,
        description=(
            "artifact records (code block, table, drafted document) per turn at most; the rest joined into the "
            "last"))
    # An artifact record's text at most (characters), and the identifiers / names / figures it lists.
    artifact_chars: int = Field(default=600, ge=80, description="an artifact record's text at most (characters)")
    artifact_identifiers: int = Field(default=16, ge=1, description="names, paths, figures an artifact record lists at most")
    # A user's statements inside a question ("I secured 5 interviews, how can I ...?") become
    # statement records of their own; the question is recorded as asked (type event).
    split_requests: bool = Field(default=True,
        description="a user's statements inside a question become records of their own; the question is type event")


class DedupConfig(Section):
    """Near-duplicate drafts of one encode reply collapse into one record with all their sources
    (ingest/encode/dedup.py; both backends)."""

    enabled: bool = Field(default=True)
    # Near-duplicate: same type and artifact kind, content-word Jaccard at or above this, and the same
    # specifics (numbers, names, identifiers, time) — drafts whose specifics differ never collapse.
    min_jaccard: float = Field(default=0.8, gt=0, le=1,
        description=(
            "same type + artifact kind, content-word Jaccard >= this, and the same numbers / names / identifiers "
            "/ time"))


class RulesEncoderConfig(Section):
    """The ``rules`` encoder backend (no LLM): sentence rules over each turn (ingest/encode/rules)."""

    # Sentences shorter than this many words are merged or dropped as filler.
    min_words: int = Field(default=4, ge=1, description="shorter sentences are merged with a neighbour or dropped as filler")
    max_entities: int = Field(default=8, ge=0, description="entities kept per record")
    max_topics: int = Field(default=6, ge=0, description="topic keywords kept per record")
    # Questions with fewer content words are dropped as chit-chat.
    question_min_content_words: int = Field(default=2, ge=0, description="shorter questions are dropped as chit-chat")
    # Keep other questions as "A asked: ..." records.
    keep_questions: bool = Field(default=True, description="keep other questions as \"A asked: ...\" records")
    # "we" → "A and B" only on contact words (auto), always (pair) or never (keep).
    we_mode: WeMode = Field(default="auto", description="\"we\" -> \"A and B\" on contact words (auto) | always (pair) | never (keep)")
    # One record per "[image: ...]" caption.
    image_records: bool = Field(default=True, description="one record per \"[image: ...]\" caption")
    # Adjacent word pairs ("support group") as topics.
    topic_bigrams: bool = Field(default=True, description="adjacent word pairs (\"support group\") as topics")
    # Records per turn at most (0 = unlimited).
    max_records_per_turn: int = Field(default=0, ge=0, description="records per turn at most; 0 = unlimited")
    # Fold a short answer (at most this many words) into the record of the question
    # That ended the previous turn of the same segment ("A asked: ...? B answered: ...").
    pair_answers: bool = Field(default=True, description="fold a short answer into the record of the question before it (same segment)")
    pair_max_answer_words: int = Field(default=15, ge=1, description="longest answer (words) folded into its question's record")
    # Assistant chats: condensed answers, artifacts, statements out of questions.
    assistant: AssistantRecordsConfig = Field(default_factory=AssistantRecordsConfig,
        description=(
            "assistant chats (docs/llm-quality.md \"Assistant chats\"): answers condensed, artifacts, user "
            "statements"))


# The flat encoder.rules_* keys read before encoder.rules existed (one release: mapped, with a warning).
FLAT_RULES_KEYS: dict[str, str] = {f"rules_{k}": k for k in RulesEncoderConfig.model_fields}


class EncoderConfig(Section):
    """Segment encoder (DESIGN §1 step 2): one LLM call per segment."""

    # Reference context rho_k = (d_{k-1}; last m records), truncated to a fixed token budget so that
    # prompts do not grow with the conversation's history.
    context_records: int = Field(default=8, ge=0, description="m: last records of earlier segments shown as reference context (rho_k)")
    context_token_budget: int = Field(default=600, ge=0,
        description="rho_k (resolution state + those records) is truncated to this many tokens")
    # Completion budget per encode call (records JSON).
    max_completion_tokens: int = Field(default=2048, ge=64, description="completion budget of one encode call")
    # Turn text longer than this is cut in the prompt (the raw turn stays indexed in full).
    max_turn_chars: int = Field(default=4000, ge=100, description="a longer turn is cut in the prompt (the raw turn stays indexed in full)")
    # An LLM backend's reply may leave out a code block, table or drafted document of a chat turn (a
    # small model often does; one past max_turn_chars it never saw): the rules backend's deterministic
    # artifact record of it is added, and counted in the build's quality stats (artifacts_added).
    artifact_floor: bool = Field(default=True,
        description=("LLM backends: a code block, table or drafted document of a chat turn that no record of the reply "
                     "describes gets the rules backend's artifact record (counted as artifacts_added)"))
    # The rules backend (no LLM).
    rules: RulesEncoderConfig = Field(default_factory=RulesEncoderConfig,
        description="the rules backend (no LLM): sentence rules over each turn")
    # Read "05/08/2023" as 5 August (day first) instead of 8 May.
    day_first: bool = Field(default=False, description="read \"05/08/2023\" as 5 August instead of 8 May")
    # A record without its own time takes the first time named in its source turns (LLM records;
    # rules records already carry per-sentence times, so this would smear one turn's date over all).
    time_from_turns: bool = Field(default=True, description="an LLM record without its own time takes the first time in its source turns")
    # atomic = one record per fact (the method); summary = ONE summary record per segment (the
    # paper's "summary-level records" ablation; `lychee-ray eval --variant summary`).
    mode: Literal["atomic", "summary"] = Field(default="atomic",
        description="atomic (one record per fact) | summary (ONE summary record per segment: the paper's ablation)")
    # openai backend: an encode reply is rejected as written in the wrong language (retried, then the
    # segment is stored as failed with its raw turns kept) when at least this share of the segment's
    # turn letters are one script (Latin, CJK, Cyrillic, ...) and at least this share of a record's
    # letters are another. A cheap check without a language model; 0 disables it.
    wrong_script_share: float = Field(default=0.8, ge=0, le=1,
        description=(
            "openai: reply rejected (retried, then segment failed) when >= this share of the turns' letters are "
            "one script and of a record's another; 0 = off"))
    # openai: tries of an encode call whose reply is cut at max_completion_tokens (finish_reason=length;
    # counted within llm.max_attempts): the same prompt under the same limit is cut the same way, so a
    # further try mostly costs another whole reply.
    truncated_attempts: int = Field(default=1, ge=1, json_schema_extra={"effect": "runtime"},
        description="openai: tries of an encode call whose reply is cut at max_completion_tokens (within llm.max_attempts)")
    # openai: what becomes of a reply still cut after those tries: salvage = its complete records are
    # kept and the segment is stored as salvaged (ingest/encode/salvage.py; a reply cut before its
    # first complete record fails the segment); fail = the segment fails with error kind truncated.
    # A failure policy like llm.max_attempts, not a way of building memory: a runtime key.
    truncated_reply: Literal["salvage", "fail"] = Field(default="salvage", json_schema_extra={"effect": "runtime"},
        description=(
            "openai: a reply still cut at max_completion_tokens keeps its complete records, segment status "
            "salvaged (salvage) | the segment fails as truncated (fail)"))
    # How rho_k is shown: guarded = labelled as context for resolving names/dates that must not be
    # copied (records listed as "already stored"); plain = the paper's bare "Recent records" list.
    context_style: Literal["guarded", "plain"] = Field(default="guarded",
        description=(
            "rho_k shown as \"use to resolve names/dates, already stored, do not copy\" (guarded) | the paper's "
            "bare list (plain)"))
    guard: GuardConfig = Field(default_factory=GuardConfig,
        description="memory checks on every encode reply (docs/llm-quality.md); counts in manifest/summary/stats")
    tools: ToolRecordsConfig = Field(default_factory=ToolRecordsConfig,
        description="agent logs (docs/agent-logs.md): records from tool traffic and system prompts (rules backend)")
    dedup: DedupConfig = Field(default_factory=DedupConfig,
        description=(
            "near-duplicate drafts of one encode reply collapse into one record with all their sources (both "
            "backends)"))
    currency: CurrencyConfig = Field(default_factory=CurrencyConfig, description="memory that stays current (docs/current-memory.md)")

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
