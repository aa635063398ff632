"""Scores and results of ``lychee-ray eval`` (DESIGN §5): per question, per variant, per category.

Evidence (id) recall (LongMemEval: answer-session recall), content coverage of the context text
and answer-in-context (:mod:`lychee_ray.eval.metrics.context`), LoCoMo's official F1 and the
Mem0/LoCoMo BLEU-1 (:mod:`lychee_ray.eval.metrics.locomo`), judge accuracy and, with the rubric
judge (BEAM), the mean rubric score; overall, per category
and per split (``eval.locomo_split``). Costs: construction tokens per conversation (store usage
tables, or the offline estimate for ``rules``: :mod:`lychee_ray.eval.runners.costs`), query tokens per
question (plan + answer, prompt + completion) with the query prompt (planner + answer prompt) next
to the context tokens, LLM calls, wall time, store bytes, index build time.
"""

from __future__ import annotations

import os
import statistics
import uuid
from pathlib import Path
from typing import Any
from collections.abc import Sequence

import pyarrow as pa
import pyarrow.parquet as pq

from lychee_ray.config import LycheeConfig
from lychee_ray.core.conversation import QAItem
from lychee_ray.eval.metrics.context import content_scores, thresholds_key
from lychee_ray.eval.metrics.evidence import evidence_recall, is_abstention, mean, session_recall
from lychee_ray.eval.metrics.locomo import bleu1, locomo_f1, locomo_f1_single
from lychee_ray.eval.runners.stores import StoreInfo
from lychee_ray.eval.setup.datasets import Dataset, category_name, conversation_split
from lychee_ray.eval.setup.layout import RunLayout
from lychee_ray.eval.setup.rows import SCORED_SCHEMA, AnswerRow, RowScores
from lychee_ray.eval.setup.variants import Variant
from lychee_ray.names import LOCOMO, LONGMEMEVAL

# Decimal places of the reported metric fractions (recall, F1, BLEU-1, accuracies).
METRIC_DIGITS = 4


# What results.json and report.md say about the answer metrics.
ANSWER_METRICS_NOTE = ("F1: LoCoMo's official definition (snap-research/locomo task_eval/evaluation.py): commas and "
                       "punctuation deleted, lowercase, a/an/the/and removed, Porter-stemmed tokens; category 1 split on "
                       "commas (mean over gold parts of the best prediction part), category-3 gold cut at ';', category 5 "
                       "not scored. BLEU-1: nltk sentence_bleu, weights (1,0,0,0), SmoothingFunction().method1, "
                       "lower-cased word_tokenize tokens (the Mem0/A-Mem evaluation; regex sentence split, no punkt).")


def score_row(row: AnswerRow | dict[str, Any], q: QAItem, dataset: str, turn_session: dict[str, str],
              thresholds: Sequence[float]) -> RowScores:
    """Per-question metrics (added to answers.parquet; ``content`` holds every threshold's content recall)."""
    covered = row.get("evidence_turn_ids") or []
    abst = bool(row.get("abstention"))
    if dataset == LONGMEMEVAL:
        rec = None if abst else session_recall(q.answer_session_ids, covered, turn_session)
        turn_rec = None if abst else evidence_recall(q.evidence, covered)
    else:
        rec = evidence_recall(q.evidence, covered)
        turn_rec = rec
    gold = list(dict.fromkeys(q.evidence))
    cov = set(covered)
    wc = row.get("gold_word_coverage")
    content: dict[str, float | None] = (content_scores(wc, [t in cov for t in gold], thresholds) if wc and len(wc) == len(gold) and not abst
               else {thresholds_key(t): None for t in thresholds})
    f1 = b1 = None
    if not abst and (q.answer or not q.meta.get("rubric")):  # a BEAM preference question: a rubric, no gold answer
        f1 = (locomo_f1(row.get("answer"), q.answer, q.category) if dataset == LOCOMO
              else locomo_f1_single(row.get("answer"), q.answer))
        b1 = bleu1(row.get("answer"), q.answer)
    v = row.get("judge_verdict")
    return {
        "evidence_recall": rec, "evidence_turn_recall": turn_rec, "content_recall": content[thresholds_key(thresholds[0])],
        "content": content, "f1": f1, "bleu1": b1,
        "judge_correct": None if v is None else v == "CORRECT",
        "abstained": is_abstention(row.get("answer")) if abst else None,
    }


def _r(x: float | None, nd: int = METRIC_DIGITS) -> float | None:
    return None if x is None else round(x, nd)


def _tok_mean(rows: list[dict[str, Any]], *keys: str) -> float:
    return round(sum(sum(int(r.get(k) or 0) for k in keys) for r in rows) / max(1, len(rows)), 1)


def summarise_rows(rows: list[dict[str, Any]], judged: bool) -> dict[str, Any]:
    """Questions, evidence recall, content coverage, answer-in-context, F1, BLEU-1, judge accuracy (and
    abstention accuracy), context / plain / query-prompt tokens of scored rows."""
    out: dict[str, Any] = {"questions": len(rows), "evidence_recall": _r(mean(r["evidence_recall"] for r in rows))}
    keys = list(dict.fromkeys(k for r in rows for k in (r.get("content") or {})))
    for k in keys:
        out[k] = _r(mean((r.get("content") or {}).get(k) for r in rows))
    out["answer_in_context"] = _r(mean(None if r.get("answer_in_context") is None or r.get("abstention")
                                       else float(r["answer_in_context"]) for r in rows))
    out.update({
        "f1": _r(mean(r["f1"] for r in rows)),
        "bleu1": _r(mean(r["bleu1"] for r in rows)),
        "judge_accuracy": _r(mean(float(r["judge_correct"]) if r["judge_correct"] is not None else None for r in rows))
        if judged else None,
        "context_tokens": _tok_mean(rows, "context_tokens"),
        "plain_context_tokens": _tok_mean(rows, "plain_context_tokens"),
        "query_prompt_tokens": _tok_mean(rows, "plan_prompt_tokens", "answer_prompt_tokens"),
    })
    if judged and any(r.get("judge_score") is not None for r in rows):  # the rubric judge (BEAM)
        out["rubric_score"] = _r(mean(r.get("judge_score") for r in rows))
    # the budget spent on content, and the per-question median query prompt
    out["plain_share"] = (_r(out["plain_context_tokens"] / out["context_tokens"]) if out["context_tokens"] else None)
    prompts = [int(r.get("plan_prompt_tokens") or 0) + int(r.get("answer_prompt_tokens") or 0) for r in rows]
    out["query_prompt_tokens_median"] = float(statistics.median(prompts)) if prompts else None
    abst = [r for r in rows if r.get("abstention")]
    if abst:
        if judged:
            out["abstention_accuracy"] = _r(mean(float(r["judge_correct"]) if r["judge_correct"] is not None else None
                                                 for r in abst))
        else:  # LLM-free: the answer declines
            out["abstention_accuracy"] = _r(mean(float(bool(r["abstained"])) for r in abst))
        out["abstention_questions"] = len(abst)
    return out


def _per_category(dataset: Dataset, rows: list[dict[str, Any]], judged: bool) -> dict[str, Any]:
    cats = sorted({r["category"] for r in rows}, key=lambda c: (len(c), c))
    return {c: {"name": category_name(dataset.name, c), **summarise_rows([r for r in rows if r["category"] == c], judged)}
            for c in cats}


def aggregate(dataset: Dataset, variant: Variant, rows: list[dict[str, Any]], judged: bool, *, backend: str,
              costs: dict[str, dict[str, Any]] | None, store: StoreInfo | None, query_wall_s: float,
              cfg: LycheeConfig | None = None) -> dict[str, Any]:
    """results.json entry of one variant (``rows`` already scored); ``cfg`` gives the split (defaults when None)."""
    cfg = cfg if cfg is not None else LycheeConfig.model_validate({})  # every key from default.yaml
    res = summarise_rows(rows, judged)
    res["per_category"] = _per_category(dataset, rows, judged)
    if dataset.name == LOCOMO:
        res["per_split"] = {}
        for sp in ("dev", "test"):
            part = [r for r in rows if conversation_split(cfg, r["conversation_id"]) == sp]
            if part:
                res["per_split"][sp] = {**summarise_rows(part, judged), "per_category": _per_category(dataset, part, judged)}
    turns_only = variant.turns_only
    con = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0, "calls": 0, "real_calls": 0, "segments": 0,
           "build_s": 0.0, "store_bytes": 0, "estimated": False}
    for c in (costs or {}).values():
        for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "calls", "real_calls", "segments", "build_s"):
            con[k] += c[k]
        con["store_bytes"] += c["turns_bytes"] if turns_only else c["store_bytes"]
        con["estimated"] = con["estimated"] or bool(c.get("estimated"))
    if turns_only:  # no LLM in its construction: raw turns + turn vectors only
        for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "calls", "real_calls", "segments"):
            con[k] = 0
        con["estimated"] = False
    built = len(costs or {}) or 1
    nq = max(1, len(rows))
    q_calls = sum(int(r["llm_calls"] or 0) for r in rows)
    j_calls = sum(int(r["judge_calls"] or 0) for r in rows)
    build_wall = 0.0
    if store is not None and not turns_only:
        build_wall = con["build_s"] if store.reused_from else float(store.build_wall_s_total or con["build_s"])
    res.update({
        "construction_tokens_per_conversation": round((con["prompt_tokens"] + con["completion_tokens"]) / built, 1),
        "construction_tokens": {
            "prompt_per_conversation": round(con["prompt_tokens"] / built, 1),
            "completion_per_conversation": round(con["completion_tokens"] / built, 1),
            "cached_per_conversation": round(con["cached_tokens"] / built, 1),
            "encode_calls_per_conversation": round(con["calls"] / built, 2),
            "estimated": con["estimated"],
            "note": ("offline count of the encode prompts/records the openai encoder would send for these segments "
                     "(rules backend makes no LLM calls)") if con["estimated"] else
                    ("raw turns and turn vectors only: no LLM in construction" if turns_only else "provider-reported usage"),
        },
        "query_tokens_per_question": round(sum(int(r["query_tokens"] or 0) for r in rows) / nq, 1),
        "query_tokens": {
            "plan_prompt": round(sum(int(r["plan_prompt_tokens"] or 0) for r in rows) / nq, 1),
            "plan_completion": round(sum(int(r["plan_completion_tokens"] or 0) for r in rows) / nq, 1),
            "answer_prompt": round(sum(int(r["answer_prompt_tokens"] or 0) for r in rows) / nq, 1),
            "answer_completion": round(sum(int(r["answer_completion_tokens"] or 0) for r in rows) / nq, 1),
            "context": round(sum(int(r["context_tokens"] or 0) for r in rows) / nq, 1),
            "query_prompt": _tok_mean(rows, "plan_prompt_tokens", "answer_prompt_tokens"),
            "estimated": any(bool(r["tokens_estimated"]) for r in rows),
        },
        "judge_tokens_per_question": round(sum(int(r["judge_prompt_tokens"] or 0) + int(r["judge_completion_tokens"] or 0)
                                               for r in rows) / nq, 1) if judged else None,
        "llm_calls": int(con["real_calls"]) + q_calls,
        "llm_calls_detail": {"construction": int(con["real_calls"]), "construction_equivalent": int(con["calls"]),
                             "query": q_calls, "judge": j_calls},
        "wall_s": round(build_wall + query_wall_s, 2),
        "wall_detail_s": {"build": round(build_wall, 2), "query": round(query_wall_s, 2),
                          "build_source": ("none (raw turns only)" if turns_only or store is None else
                                           "sum of per-conversation build times in the commit markers (store reused)"
                                           if store.reused_from else "measured build wall time in this run directory")},
        "store_bytes": int(con["store_bytes"]),
        "index_build_s": round(con["build_s"], 3) if not turns_only else 0.0,
        "segments_per_conversation": round(con["segments"] / built, 2),
        "latency_ms_mean": _r(mean(r["latency_ms"] for r in rows), 1),
        "failed_questions": sum(1 for r in rows if r.get("answer_error")),
        "context_truncated": sum(1 for r in rows if r.get("context_truncated")),
        "store": str(store.path) if store is not None and store.path else None,
        "description": variant.description,
    })
    return res


def write_answers_table(run_dir: Path, rows: list[dict[str, Any]]) -> Path:
    """``answers.parquet``: every scored answer row of the run (written atomically)."""
    t = pa.Table.from_pylist([{k: r.get(k) for k in SCORED_SCHEMA.names} for r in rows], schema=SCORED_SCHEMA)
    layout = RunLayout(run_dir)
    tmp = layout.root / f".answers.{uuid.uuid4().hex}.tmp"
    pq.write_table(t, tmp)
    os.replace(tmp, layout.answers_table_path)
    return layout.answers_table_path


__all__ = ["ANSWER_METRICS_NOTE", "aggregate", "score_row", "summarise_rows", "write_answers_table"]
