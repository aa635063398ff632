"""Retrieval quality of the selected context (DESIGN §5), no LLM needed.

For every question with gold evidence (LoCoMo: categories 1–4) and every system — lychee (rules
planner) and the baselines of :mod:`lychee_ray.eval.baselines.retrieval` at the same token budget — one
:class:`Coverage`:

- **id coverage** (``recall``, ``any``, ``all``): share of the gold evidence turns cited by the
  selection (a record covers its source turns, a raw-turn window every turn in it);
- **content coverage** (``content_recall_50``, ``content_recall_80`` …): share of gold turns with at
  least that share of their content words in the selection's plain text
  (:mod:`lychee_ray.eval.metrics.context`); ``content_coverage``: the mean share itself over the
  gold turns (the text of the units citing a turn: a unit that cites a turn without carrying its
  words earns its id, not its content);
- **by role** (``gold_role_recall``): id coverage of the gold turns of each role (user / assistant),
  over the questions that have gold of that role;
- **answer in context**: the normalised gold answer occurs in the plain text; a question graded by
  a rubric (BEAM) is checked on its rubric's short answers that occur in the chat instead
  (:mod:`lychee_ray.eval.metrics.rubric`; None when it has none);
- **tokens**: the context as the answer prompt shows it (lychee: its compact serialisation with
  session-date headers; the baselines: plain lines), its plain text and their ratio
  (``plain_share``: the budget spent on content), and the query prompt = planner prompt + answer
  prompt (offline count with the same prompts an LLM would get; the baselines have no planner),
  as a mean and a median.

Summaries are overall, per category and per split (``eval.locomo_split``: dev / test); a data set
without a split (BEAM) is summarised per conversation instead. ``full_context`` also reports how
many questions' whole conversation fits the budget (``fits_budget``) and its figures over those
(``at_budget``; None when none fits).

A question's date: its own ``question_date`` when the dataset has one, else the conversation's
last session date (LoCoMo has none).
"""

from __future__ import annotations

import logging
import statistics
import time
from functools import partial
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable, Sequence

import numpy as np

from lychee_ray.core.conversation import QAItem
from lychee_ray.core.status import CURRENT_STATUS
from lychee_ray.embed import get_embedder
from lychee_ray.eval.baselines.factory import EMBEDDING_BASELINES, make_baseline
from lychee_ray.eval.baselines.retrieval import (
    FullContext,
    MergedTurns,
    TurnUnits,
    lychee_plain_context,
    merged_turns,
    qualified,
)
from lychee_ray.eval.metrics.context import (
    answer_in_context,
    citing_texts,
    content_scores,
    gold_word_coverage,
    normalized_context,
)
from lychee_ray.eval.metrics.beam_current import beam_current_scores, qualified_groups
from lychee_ray.eval.metrics.current import current_scores
from lychee_ray.eval.metrics.evidence import coverage
from lychee_ray.eval.metrics.locomo import locomo_normalize
from lychee_ray.eval.metrics.rubric import answers_in_context, short_answers
from lychee_ray.eval.setup.datasets import conversation_split
from lychee_ray.config.eval import AgentLogEvalConfig
from lychee_ray.eval.setup.agentlog_questions import QuestionLimits, derive_questions
from lychee_ray.eval.setup.current_questions import derive_current_questions
from lychee_ray.io.adapters import read_input
from lychee_ray.io.adapters.registry import adapter
from lychee_ray.llm.prompts import prompt_tokens_estimate
from lychee_ray.query.answer import AnswerReply, answer_messages
from lychee_ray.query.engine import QueryEngine as MemoryStore  # the query side is all an evaluation uses
from lychee_ray.query.view import ConversationView
from lychee_ray.text.dates import as_datetime
from lychee_ray.text.tokens import count_tokens
from lychee_ray.names import CONVERSATION_SCOPE, RULES_BACKEND, Scope
from lychee_ray.query.request import QueryRequest

log = logging.getLogger(__name__)

LOCOMO_CATEGORIES = ("1", "2", "3", "4")  # the paper's 1,540 questions (5 = adversarial, no evidence)
# Decimal places of reported fractions and of mean token counts.
FRACTION_DIGITS = 4
TOKEN_DIGITS = 1


@dataclass
class Coverage:
    """One question's outcome for one system."""

    recall: float
    any: bool
    all: bool
    context_tokens: int
    query_prompt_tokens: int
    covered: list[str] = field(default_factory=list)
    plain_tokens: int = 0
    plan_prompt_tokens: int = 0
    answer_prompt_tokens: int = 0
    word_coverage: list[float | None] = field(default_factory=list)  # per gold turn
    content: dict[str, float | None] = field(default_factory=dict)  # content_recall_<pct>
    answer_in_context: bool | None = None
    hits: list[str] = field(default_factory=list)  # the gold turn ids in the context
    content_coverage: float | None = None  # mean word coverage over the gold turns
    recall_by_role: dict[str, float] = field(default_factory=dict)  # id coverage of each role's gold turns
    fits_budget: bool | None = None  # full_context: the whole conversation fits the budget
    # questions about what holds now / held before (eval/metrics/current.py); empty for others
    current: dict[str, float | None] = field(default_factory=dict)


@dataclass
class QuestionResult:
    question_id: str
    conversation_id: str
    category: str
    split: str | None
    question: str
    gold: list[str]
    systems: dict[str, Coverage]
    gold_roles: list[str] = field(default_factory=list)  # the role of each gold turn



def last_session_date(view: ConversationView) -> datetime | None:
    dates = [d for d in view.turn_session_date if d]
    return as_datetime(max(dates)) if dates else None


def load_questions(fmt: str, data: str | Path, categories: Iterable[str] | None,
                   agentlog: AgentLogEvalConfig | None = None) -> list[QAItem]:
    """QA items with gold evidence (and, when given, in ``categories``), in input order. Agent logs
    (``openai``, ``anthropic``, ``chatgpt``) have none: their questions are derived from their tool
    traffic (:mod:`lychee_ray.eval.setup.agentlog_questions`, limits ``eval.agentlog``)."""
    cats = set(categories) if categories else None
    derive = adapter(fmt).agent_log
    limits = None
    if derive:
        a = agentlog or AgentLogEvalConfig.model_validate({})  # every key at its default
        limits = QuestionLimits(a.lookup_per_result, a.per_kind, a.max_answer_occurrences)
    out = []
    for item in read_input(fmt, data):
        qa = item.qa
        if limits is not None and item.conversation is not None:
            qa = derive_questions(item.conversation, limits, locomo_normalize)
            if agentlog is None or agentlog.current_questions:
                qa += derive_current_questions(item.conversation)
        for q in qa:
            if q.evidence and (cats is None or q.category in cats):
                out.append(q)
    return out


class _Measure:
    """Scores one system's selection for one question against its gold turns.

    ``answers``: the question's rubric short answers (checked instead of its gold answer), or None."""

    def __init__(self, q: QAItem, view: ConversationView | MergedTurns, thresholds: Sequence[float],
                 answers: list[str] | None = None) -> None:
        self.q = q
        self.thresholds = thresholds
        self.answers = answers
        pos = view.turn_pos
        self.gold_ids = list(dict.fromkeys(q.evidence))
        self.gold_texts = [view.turn_text[pos[t]] if t in pos else "" for t in self.gold_ids]
        self.gold_roles = [view.turn_role[pos[t]] if t in pos else "" for t in self.gold_ids]
        self.order = lambda t: pos.get(t, -1)

    def __call__(self, units: Sequence[tuple[Sequence[str], str]], plain: str, context_tokens: int, plan_prompt: int,
                 answer_prompt: int, norm: str | None = None, statuses: Sequence[str] | None = None,
                 shown: str | None = None) -> Coverage:
        """``units``: every selected unit as (turn ids it cites, its plain text); ``plain``: the whole context;
        ``statuses``: each unit's status (default: all current), ``shown``: the context as the answer
        prompt shows it, marks included (default: ``plain``)."""
        covered = [t for ids, _ in units for t in ids]
        frac, any_, all_ = coverage(self.gold_ids, covered)
        cov = set(covered)
        ids = [t in cov for t in self.gold_ids]
        wc = gold_word_coverage(self.gold_texts, citing_texts(self.gold_ids, units))
        per_turn = [w if w is not None else float(hit) for w, hit in zip(wc, ids, strict=True)]  # no words: by id
        by_role: dict[str, list[bool]] = {}
        for role, hit in zip(self.gold_roles, ids, strict=True):
            by_role.setdefault(role, []).append(hit)
        if self.answers is not None:
            aic = answers_in_context(self.answers, norm if norm is not None else normalized_context(plain))
        else:
            aic = answer_in_context(self.q.answer, self.q.category, plain, normalized=norm)
        sts = list(statuses) if statuses is not None else [CURRENT_STATUS] * len(units)
        if self.q.meta.get("source") == "current_state":
            current = current_scores(self.q.meta, [(u, text, st) for (u, text), st in zip(units, sts, strict=False)],
                                     shown if shown is not None else plain, self.q.category == "history")
        else:
            current = beam_current_scores(self.q.category, self.q.meta.get("gold_groups"),
                                          [(u, st) for (u, _), st in zip(units, sts, strict=False)], self.order,
                                          [text for _, text in units], self.q.meta.get("replaced_values"))
        return Coverage(
            recall=frac, any=any_, all=all_, context_tokens=context_tokens, query_prompt_tokens=plan_prompt + answer_prompt,
            covered=sorted(cov), plain_tokens=0, plan_prompt_tokens=plan_prompt, answer_prompt_tokens=answer_prompt,
            word_coverage=wc, content=content_scores(wc, ids, self.thresholds), answer_in_context=aic,
            hits=[t for t, hit in zip(self.gold_ids, ids, strict=True) if hit],
            content_coverage=sum(per_turn) / len(per_turn) if per_turn else None,
            recall_by_role={r: sum(h) / len(h) for r, h in by_role.items() if r},
            current=current,
        )


def _mean(values: list[float | None]) -> float | None:
    vals = [float(v) for v in values if v is not None]
    return round(sum(vals) / len(vals), FRACTION_DIGITS) if vals else None


def _summary(rows: list[Coverage]) -> dict[str, Any]:
    n = len(rows)
    if n == 0:
        return {"questions": 0}
    out: dict[str, Any] = {"questions": n, "recall": _mean([r.recall for r in rows]), "any": _mean([r.any for r in rows]),
                           "all": _mean([r.all for r in rows])}
    for k in rows[0].content:
        out[k] = _mean([r.content.get(k) for r in rows])
    out["content_coverage"] = _mean([r.content_coverage for r in rows])
    roles = sorted({role for r in rows for role in r.recall_by_role})
    out["gold_role_recall"] = {role: {"questions": sum(role in r.recall_by_role for r in rows),
                                      "recall": _mean([r.recall_by_role.get(role) for r in rows])} for role in roles}
    out["answer_in_context"] = _mean([None if r.answer_in_context is None else float(r.answer_in_context) for r in rows])
    for k in dict.fromkeys(k for r in rows for k in r.current):
        out[k] = _mean([r.current.get(k) for r in rows])
    for k in ("context_tokens", "plain_tokens", "plan_prompt_tokens", "answer_prompt_tokens", "query_prompt_tokens"):
        out[k] = round(sum(getattr(r, k) for r in rows) / n, TOKEN_DIGITS)
    # the budget spent on content: plain text / context as the answer prompt shows it
    out["plain_share"] = round(out["plain_tokens"] / out["context_tokens"], FRACTION_DIGITS) if out["context_tokens"] else None
    out["query_prompt_tokens_median"] = float(statistics.median(r.query_prompt_tokens for r in rows))
    return out


def _by_category(results: list[QuestionResult], system: str) -> dict[str, Any]:
    cats = sorted({r.category for r in results}, key=lambda c: (len(c), c))
    return {c: _summary([r.systems[system] for r in results if r.category == c]) for c in cats}


def summarise(results: list[QuestionResult], system: str) -> dict[str, Any]:
    """One system's summary: overall, per category, and per split (each with its categories) — or,
    when no question is in a split, per conversation; ``full_context``: what fits the budget."""
    rows = [r.systems[system] for r in results]
    out = _summary(rows)
    out["per_category"] = _by_category(results, system)
    splits = [s for s in ("dev", "test") if any(r.split == s for r in results)]
    out["per_split"] = {}
    for s in splits:
        part = [r for r in results if r.split == s]
        out["per_split"][s] = {**_summary([r.systems[system] for r in part]), "per_category": _by_category(part, system)}
    if not splits:
        convs = dict.fromkeys(r.conversation_id for r in results)
        out["per_conversation"] = {c: _summary([r.systems[system] for r in results if r.conversation_id == c])
                                   for c in convs}
    if any(c.fits_budget is not None for c in rows):
        fit = [c for c in rows if c.fits_budget]
        out["fits_budget"] = len(fit)
        out["at_budget"] = _summary(fit) if fit else None
    return out


def _groups(store: MemoryStore, questions: list[QAItem], scope: Scope) -> list[tuple[str, list[str], list[QAItem]]]:
    """(scope name, its conversation ids, its questions): one conversation each, or one user's
    conversations (every conversation of the question's owner)."""
    by: dict[str, list[QAItem]] = {}
    for q in questions:
        m = store.reader.markers.get(q.conversation_id)
        key = q.conversation_id if scope == CONVERSATION_SCOPE or m is None else m.owner
        by.setdefault(key, []).append(q)
    if scope == CONVERSATION_SCOPE:
        return [(cid, [cid], qs) for cid, qs in by.items()]
    return [(user, sorted(store.reader.by_user.get(user, [])), qs) for user, qs in by.items()]


def evaluate_retrieval(
    store: MemoryStore,
    questions: list[QAItem],
    budget_tokens: int | None = None,
    *,
    baselines: Sequence[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    scope: Scope = "conversation",
    doc_embedder: Any = None,
) -> tuple[dict[str, Any], list[QuestionResult]]:
    """Run lychee search (rules planner: no LLM) and the baselines (default ``eval.retrieval_baselines``).

    ``scope="user"``: every question is asked of all the conversations of its conversation's owner
    (lychee's user-scoped search; the baselines over the union of those conversations' turns), the
    scope an agent serving that user has; gold turns are matched by conversation and turn id.
    ``doc_embedder``: what the embedding baselines embed their units with (default: the configured
    embedder; a benchmark running several budgets passes one with a memo, so each text is embedded once).
    """
    t0 = time.perf_counter()
    cfg = store.config
    budget = store.qcfg.select.budget_tokens if budget_tokens is None else budget_tokens
    names = list(cfg.eval.retrieval_baselines if baselines is None else baselines)
    thresholds = list(cfg.eval.content_coverage_thresholds)
    enc = store.encoding
    if doc_embedder is None and any(n in EMBEDDING_BASELINES for n in names):
        doc_embedder = get_embedder(cfg.embedding, cfg.llm)  # the model the store's turn vectors come from
    max_words = cfg.eval.beam.short_answer_max_words
    chats: dict[str, str] = {}  # conversation id -> its normalised text (rubric short answers)

    def answers(q: QAItem) -> list[str] | None:
        if not q.meta.get("rubric"):
            return None
        if q.conversation_id not in chats:
            v = store.view(q.conversation_id)
            chats[q.conversation_id] = normalized_context("\n".join(v.turn_text))
        return short_answers(q.meta["rubric"], chats[q.conversation_id], max_words)

    results: list[QuestionResult] = []
    missing = sorted({q.conversation_id for q in questions if q.conversation_id not in store.reader.markers})
    if missing:
        log.warning("%d conversation(s) with questions are not in the store: %s", len(missing), missing[:5])
    done = 0
    for name, cids, qs in _groups(store, [q for q in questions if q.conversation_id not in missing], scope):
        views = {cid: store.view(cid) for cid in cids}
        scoped = views[cids[0]] if scope == CONVERSATION_SCOPE else merged_turns(list(views.values()), f"user:{name}")
        turns = TurnUnits(scoped, enc)
        systems = {n: make_baseline(n, turns, cfg, doc_embedder) for n in names}
        fixed: dict[str, str] = {}  # full context: one text per scope, normalised once
        qvecs = np.asarray(store.embedder.encode([q.question for q in qs]), dtype=np.float32)
        for q, qv in zip(qs, qvecs, strict=False):
            cid = q.conversation_id
            qd = as_datetime(q.question_date) if q.question_date else last_session_date(views[cid])
            gold = q if scope == CONVERSATION_SCOPE else q.model_copy(update={
                "evidence": [qualified(cid, t) for t in q.evidence],
                "meta": qualified_groups(q.meta, partial(qualified, cid))})
            measure = _Measure(gold, scoped, thresholds, answers(q))
            if scope == CONVERSATION_SCOPE:
                res = store.search(QueryRequest(conversation_id=cid, question=q.question, question_date=qd,
                                                budget_tokens=budget, llm=RULES_BACKEND, question_id=q.question_id))
                cited = [(e.source_turn_ids, e.text) for e in res.evidence]
            else:
                res = store.search(QueryRequest(user_id=name, question=q.question, question_date=qd, budget_tokens=budget,
                                                llm=RULES_BACKEND, question_id=q.question_id))
                cited = [([qualified(e.conversation_id, t) for t in e.source_turn_ids], e.text) for e in res.evidence]
            plain = lychee_plain_context(res.evidence)
            u = res.usage
            lychee = measure(cited, plain, u.context_tokens, u.plan_prompt_tokens, u.answer_prompt_tokens,
                             statuses=[e.status for e in res.evidence], shown=res.context)
            lychee.plain_tokens = count_tokens(plain, enc)
            out = {"lychee": lychee}
            for bname, system in systems.items():
                sel = system.select(q.question, qv, budget)
                norm = None
                if isinstance(system, FullContext):
                    if bname not in fixed:
                        fixed[bname] = normalized_context(sel.context)
                    norm = fixed[bname]
                prompt = prompt_tokens_estimate(answer_messages(q.question, qd, sel.context), AnswerReply, enc)
                c = measure([(un.turn_ids, un.text) for un in sel.units], sel.context, sel.tokens, 0, prompt, norm)
                c.plain_tokens = sel.tokens
                if isinstance(system, FullContext):
                    c.fits_budget = not sel.truncated and sel.tokens <= budget
                out[bname] = c
            results.append(QuestionResult(q.question_id, cid, q.category, conversation_split(cfg, cid), q.question,
                                          list(q.evidence), out, measure.gold_roles))
            done += 1
            if progress is not None:
                progress(done, len(questions))
    systems_run = ["lychee", *names]
    report: dict[str, Any] = {name: summarise(results, name) for name in systems_run}
    report.update({
        "systems": systems_run,
        "questions": len(results),
        "budget_tokens": budget,
        "content_thresholds": thresholds,
        "splits": {"dev": list(cfg.eval.locomo_split.dev), "test": list(cfg.eval.locomo_split.test)},
        "serialisation": "baselines: plain 'Speaker: text' lines, no ids or headers; lychee: its answer-prompt "
                         "context (session-date headers, turn lines, record notes; ids and tags only when configured) "
                         "counts against the budget, its measured text is the plain projection (turn lines and record "
                         "texts); full_context is the unbudgeted ceiling",
        "scope": scope,
        "conversations": list(dict.fromkeys(r.conversation_id for r in results)),
        "memory": str(store.root),
        "backend": store.reader.manifest.get("backend"),
        "wall_s": round(time.perf_counter() - t0, 2),
    })
    return report, results


def question_rows(results: list[QuestionResult], with_covered: bool = False) -> list[dict[str, Any]]:
    """Per-question detail rows for the JSON output."""
    rows = []
    for r in results:
        d = asdict(r)
        if not with_covered:
            for c in d["systems"].values():
                c.pop("covered")
        rows.append(d)
    return rows


__all__ = [
    "LOCOMO_CATEGORIES",
    "Coverage",
    "QuestionResult",
    "evaluate_retrieval",
    "last_session_date",
    "load_questions",
    "question_rows",
    "summarise",
]
