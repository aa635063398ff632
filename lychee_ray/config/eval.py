"""Benchmark evaluation (``eval``): the held-out LoCoMo split and the ``lychee-ray eval`` settings."""

from __future__ import annotations


from pydantic import Field, field_validator, model_validator

from lychee_ray.config.base import Section
from lychee_ray.names import JudgeProtocol


class EvalSplitConfig(Section):
    """A fixed held-out split of LoCoMo conversation ids (chosen once; see docs/evaluation.md).

    Query and build defaults may be tuned on ``dev`` only; ``test`` is reported, never tuned on.
    """

    dev: list[str]
    test: list[str]

    @model_validator(mode="after")
    def _disjoint(self) -> EvalSplitConfig:
        if set(self.dev) & set(self.test):
            raise ValueError(f"eval.locomo_split: dev and test share {sorted(set(self.dev) & set(self.test))}")
        return self


class AgentLogEvalConfig(Section):
    """Questions derived from agent logs' tool traffic (``eval-retrieval`` on ``openai`` /
    ``anthropic`` / ``chatgpt`` input; eval/setup/agentlog_questions.py)."""

    # fields of one lookup result asked about (list results: items, one field each)
    lookup_per_result: int = Field(ge=1)
    # questions of each kind (lookup, change, failure) one conversation gives at most
    per_kind: int = Field(ge=1)
    # a lookup answer must occur at most this many times in its conversation's text (specific)
    max_answer_occurrences: int = Field(ge=1)
    # also ask what holds now after each change, and what held before it (categories current and
    # history; eval/setup/current_questions.py)
    current_questions: bool


# eval/baselines/factory.py: BASELINES (the config layer imports no evaluation code)
KNOWN_BASELINES = ("turn_rag", "sentence_rag", "hybrid_rag", "passage_rag", "full_context")


def known_baselines(v: list[str]) -> list[str]:
    """``v`` when every name is a known baseline; ValueError naming the unknown ones."""
    bad = [b for b in v if b not in KNOWN_BASELINES]
    if bad:
        raise ValueError(f"unknown baseline(s) {bad}; known: {list(KNOWN_BASELINES)}")
    return v


class BeamEvalConfig(Section):
    """BEAM (``--format beam`` / ``eval beam``; docs/evaluation.md "BEAM")."""

    # eval-retrieval's baselines on BEAM when --baselines is not given (overrides retrieval_baselines)
    retrieval_baselines: list[str]
    # answer in context: a rubric statement's answer ("LLM response should state: 4 PM" -> "4 PM")
    # counts when it has at most this many words and occurs in the chat (normalised)
    short_answer_max_words: int = Field(ge=1)
    # eval beam with a judge: rubric = the benchmark's LLM judge scoring each rubric statement
    # 0 / 0.5 / 1 (mean = the question's score) | answer = CORRECT/WRONG against the gold answer
    judge: JudgeProtocol
    # rubric judge: a question counts as correct (judge_accuracy) at this score or above
    rubric_pass_score: float = Field(ge=0, le=1)

    @field_validator("retrieval_baselines")
    @classmethod
    def _known_baselines(cls, v: list[str]) -> list[str]:
        return known_baselines(v)


class EvalConfig(Section):
    """Benchmark evaluation (``lychee-ray eval``; DESIGN §5)."""

    # full_context variant: the whole conversation goes into the answer prompt when it has at most
    # this many tokens; a longer one keeps its most recent turns that fit (reported as truncated).
    full_context_max_tokens: int = Field(ge=1)
    # LLM judge model (None = llm.model); temperature 0, its tokens are counted separately.
    judge_model: str | None
    judge_max_completion_tokens: int = Field(ge=16)
    # LoCoMo categories evaluated (the paper's 1,540 questions: 1 multi-hop, 2 temporal, 3 open-domain, 4 single-hop).
    locomo_categories: list[str]
    # Ray Data question pipeline: actor pool size, fractional CPUs per actor, questions per batch,
    # questions answered concurrently inside one actor (threads; LLM calls overlap).
    min_actors: int = Field(ge=1)
    max_actors: int = Field(ge=1)
    actor_num_cpus: float = Field(gt=0)
    batch_size: int = Field(ge=1)
    questions_in_flight: int = Field(ge=1)
    # Finished answers are appended to the run directory every this many questions (resume unit).
    flush_every: int = Field(ge=1)
    # Content coverage (eval-retrieval, eval): a gold turn counts as covered when at least this share
    # of its content words is in the context text; the first threshold is the headline, the others
    # are reported beside it.
    content_coverage_thresholds: list[float] = Field(min_length=1)
    # benchmarks/llm_quality.py: a record whose content words overlap an earlier record's at least this
    # much (Jaccard) counts as a near-duplicate (eval/metrics/record_quality.py).
    near_duplicate_jaccard: float = Field(gt=0, le=1)
    # Baselines eval-retrieval measures next to lychee at the same budget (plain serialisation):
    # turn_rag, sentence_rag, hybrid_rag, passage_rag, full_context (the ceiling; not budgeted).
    retrieval_baselines: list[str]
    # passage_rag: messages are cut at paragraph boundaries into role-labelled passages of at most
    # this many tokens (eval/baselines/passages.py).
    passage_rag_max_tokens: int = Field(ge=16)
    # Query-time overrides reported both ways in an ablation run: when a selected variant has its own
    # build (eager, fixed_window, summary), every selected memory variant also runs with each of these.
    ablation_rule_twins: list[str]
    # The held-out split of LoCoMo conversations; results are reported per half.
    locomo_split: EvalSplitConfig
    agentlog: AgentLogEvalConfig
    beam: BeamEvalConfig

    @field_validator("content_coverage_thresholds")
    @classmethod
    def _fractions(cls, v: list[float]) -> list[float]:
        if any(not 0.0 < t <= 1.0 for t in v):
            raise ValueError("content coverage thresholds are fractions in (0, 1]")
        return v

    @field_validator("retrieval_baselines")
    @classmethod
    def _known_baselines(cls, v: list[str]) -> list[str]:
        return known_baselines(v)
