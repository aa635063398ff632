"""Typed rows of ``lychee-ray eval``: a question as the answerers receive it, an answer row, its scores.

Rows stay plain dicts at run time (they cross process boundaries as JSON and are stored as Parquet);
the ``TypedDict`` classes name their fields once, and the Arrow schemas below match them.
"""

from __future__ import annotations

from typing import TypedDict

import pyarrow as pa


class QuestionPayload(TypedDict):
    """One benchmark question as sent to an answerer (JSON-serialisable)."""

    question_id: str
    conversation_id: str
    question: str
    answer: str
    category: str
    question_date: str | None
    abstention: bool
    evidence: list[str]  # gold evidence turn ids (content coverage is measured against their text)
    rubric: list[str]  # rubric statements (BEAM): the rubric judge scores them; their short answers are checked in context


class AnswerRow(TypedDict):
    """One finished (or failed) answer of one variant: answer, evidence, tokens, judge verdict."""

    variant: str
    variant_key: str
    question_id: str
    conversation_id: str
    category: str
    question: str
    gold: str
    answer: str
    answer_error: str | None
    abstention: bool
    evidence_ids: list[str]
    evidence_turn_ids: list[str]
    context_tokens: int
    plain_context_tokens: int  # the context's plain text (no ids or headers): what content coverage reads
    gold_word_coverage: list[float | None]  # per gold turn: share of its content words in the plain context
    answer_in_context: bool | None
    context_truncated: bool
    plan_prompt_tokens: int
    plan_completion_tokens: int
    answer_prompt_tokens: int
    answer_completion_tokens: int
    query_tokens: int
    llm_calls: int
    tokens_estimated: bool
    plan_fallback: bool
    judge_verdict: str | None
    judge_reason: str | None
    judge_prompt_tokens: int
    judge_completion_tokens: int
    judge_calls: int
    judge_error: str | None
    judge_score: float | None  # rubric judge: the mean statement score (0..1); None for a CORRECT/WRONG judge
    latency_ms: float
    answered_at: float


class RowScores(TypedDict):
    """Per-question metrics added to an :class:`AnswerRow` (answers.parquet)."""

    evidence_recall: float | None
    evidence_turn_recall: float | None
    content_recall: float | None  # at the headline threshold (eval.content_coverage_thresholds[0])
    content: dict[str, float | None]  # content_recall_<pct> at every threshold (summaries only, not stored)
    f1: float | None
    bleu1: float | None
    judge_correct: bool | None
    abstained: bool | None


ANSWER_SCHEMA = pa.schema([
    pa.field("variant", pa.string()),
    pa.field("variant_key", pa.string()),
    pa.field("question_id", pa.string()),
    pa.field("conversation_id", pa.string()),
    pa.field("category", pa.string()),
    pa.field("question", pa.string()),
    pa.field("gold", pa.string()),
    pa.field("answer", pa.string()),
    pa.field("answer_error", pa.string()),
    pa.field("abstention", pa.bool_()),
    pa.field("evidence_ids", pa.list_(pa.string())),
    pa.field("evidence_turn_ids", pa.list_(pa.string())),
    pa.field("context_tokens", pa.int64()),
    pa.field("plain_context_tokens", pa.int64()),
    pa.field("gold_word_coverage", pa.list_(pa.float64())),
    pa.field("answer_in_context", pa.bool_()),
    pa.field("context_truncated", pa.bool_()),
    pa.field("plan_prompt_tokens", pa.int64()),
    pa.field("plan_completion_tokens", pa.int64()),
    pa.field("answer_prompt_tokens", pa.int64()),
    pa.field("answer_completion_tokens", pa.int64()),
    pa.field("query_tokens", pa.int64()),
    pa.field("llm_calls", pa.int64()),
    pa.field("tokens_estimated", pa.bool_()),
    pa.field("plan_fallback", pa.bool_()),
    pa.field("judge_verdict", pa.string()),
    pa.field("judge_reason", pa.string()),
    pa.field("judge_prompt_tokens", pa.int64()),
    pa.field("judge_completion_tokens", pa.int64()),
    pa.field("judge_calls", pa.int64()),
    pa.field("judge_error", pa.string()),
    pa.field("judge_score", pa.float64()),
    pa.field("latency_ms", pa.float64()),
    pa.field("answered_at", pa.float64()),
])

SCORE_FIELDS = [pa.field("evidence_recall", pa.float64()), pa.field("evidence_turn_recall", pa.float64()),
                pa.field("content_recall", pa.float64()), pa.field("f1", pa.float64()), pa.field("bleu1", pa.float64()),
                pa.field("judge_correct", pa.bool_()), pa.field("abstained", pa.bool_())]

# answers.parquet: every answer row with its scores
SCORED_SCHEMA = pa.schema(list(ANSWER_SCHEMA) + SCORE_FIELDS)

__all__ = ["ANSWER_SCHEMA", "SCORED_SCHEMA", "SCORE_FIELDS", "AnswerRow", "QuestionPayload", "RowScores"]
