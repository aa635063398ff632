"""Eval runs as the reports page shows them: a summary per system, and one row per question.

Two kinds of run are read, by what the path is:

* a JSON file written by ``lychee-ray eval-retrieval --out`` (``--per-question`` adds its ``details``):
  each question's gold turns and, per system, the turns its context covered (``covered``: every turn
  the selected context shows) and its recall — a hit when every gold turn is covered, a miss when none is;
* a run directory of ``lychee-ray eval`` (:class:`~lychee_ray.eval.setup.layout.RunLayout`:
  ``results.json``, ``answers.parquet``): per variant and question the answer, the gold answer, the
  selected evidence turns and the evidence recall the run scored (its rows carry no gold turn ids).

Categories are read as they are (LoCoMo's numbers, LongMemEval's types, a benchmark's abilities),
and every other scalar a row carries is kept in ``extra`` for the page to show and filter.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from lychee_ray.eval.setup.layout import RunLayout
from lychee_ray.inspector.models import EvalOutcome, EvalQuestion, EvalQuestionPage, EvalRunInfo

# Per-question fields shown as columns of their own, not repeated in ``extra``.
_OWN = frozenset({"question_id", "conversation_id", "category", "question", "gold", "systems", "covered", "recall",
                  "variant", "answer", "evidence_turn_ids", "evidence_ids", "evidence_recall"})


class EvalRunError(ValueError):
    """A path that holds no eval run this page can read; ``kind`` is ``"not_found"`` or ``"unknown"``."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


def outcome(recall: float | None) -> EvalOutcome:
    """hit (every gold turn covered), partial, miss (none), n/a (no gold turns)."""
    if recall is None:
        return "n/a"
    return "hit" if recall >= 1.0 else "miss" if recall <= 0.0 else "partial"


def _scalars(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k not in _OWN and (v is None or isinstance(v, (str, int, float, bool)))}


@dataclass
class EvalRun:
    """One loaded run: what the reports page lists, and its per-question rows (every system)."""

    info: EvalRunInfo
    questions: list[EvalQuestion] = field(default_factory=list)
    budget_tokens: int | None = None

    def page(self, *, system: str | None = None, category: str | None = None, result: str | None = None,
             conversation: str | None = None, text: str | None = None, offset: int = 0, limit: int = 50,
             allows: Any = None) -> EvalQuestionPage:
        """Rows under the filters (``allows``: which conversations the request may see), in run order."""
        rows = [q for q in self.questions
                if (system is None or q.system == system) and (category is None or q.category == category)
                and (conversation is None or q.conversation_id == conversation)
                and (not text or text.lower() in q.question.lower())
                and (allows is None or allows(q.conversation_id))]
        counts: dict[str, int] = {}
        for q in rows:
            counts[q.outcome] = counts.get(q.outcome, 0) + 1
        if result is not None:
            rows = [q for q in rows if q.outcome == result]
        return EvalQuestionPage(rows=rows[offset: offset + limit], total=len(rows), offset=offset, limit=limit,
                                counts=counts, budget_tokens=self.budget_tokens)


def _retrieval_run(path: Path) -> EvalRun:
    d = json.loads(path.read_text(encoding="utf-8"))
    systems = [s for s in d.get("systems") or [] if isinstance(d.get(s), dict)]
    questions: list[EvalQuestion] = []
    for row in d.get("details") or []:
        gold = [str(g) for g in row.get("gold") or []]
        for sname, sys in (row.get("systems") or {}).items():
            covered = [str(t) for t in sys.get("covered") or []]
            recall = sys.get("recall")
            questions.append(EvalQuestion(
                question_id=str(row.get("question_id")), conversation_id=str(row.get("conversation_id")),
                category=str(row.get("category")), system=sname, question=str(row.get("question") or ""),
                gold_turns=gold, covered=[t for t in gold if t in set(covered)], selected_turns=covered,
                outcome=outcome(recall if gold else None), recall=recall,
                extra={**_scalars(row), **_scalars(sys)}))
    summary = {s: {k: v for k, v in d[s].items() if k != "per_split"} for s in systems}
    info = EvalRunInfo(name=path.stem, kind="eval-retrieval", path=str(path), questions=int(d.get("questions") or 0),
                       systems=systems, categories=sorted({q.category for q in questions}), summary=summary,
                       has_questions=bool(questions))
    return EvalRun(info, questions, d.get("budget_tokens"))


def _eval_run(root: Path) -> EvalRun:
    layout = RunLayout(root)
    results = json.loads(layout.results_path.read_text(encoding="utf-8"))
    variants: dict[str, Any] = results.get("variants") or {}
    questions: list[EvalQuestion] = []
    if layout.answers_table_path.exists():
        for row in pq.read_table(layout.answers_table_path).to_pylist():
            recall = row.get("evidence_turn_recall", row.get("evidence_recall"))
            questions.append(EvalQuestion(
                question_id=str(row.get("question_id")), conversation_id=str(row.get("conversation_id")),
                category=str(row.get("category")), system=str(row.get("variant")), question=str(row.get("question") or ""),
                gold_turns=[], covered=[], selected_turns=[str(t) for t in row.get("evidence_turn_ids") or []],
                outcome=outcome(recall), recall=recall,
                answer=row.get("answer"), gold_answer=row.get("gold"), extra=_scalars(row)))
    summary = {name: {k: v for k, v in r.items() if not isinstance(v, (dict, list)) or k == "per_category"}
               for name, r in variants.items()}
    info = EvalRunInfo(name=root.name, kind="eval", path=str(root), questions=int(results.get("questions") or 0),
                       systems=list(variants), categories=sorted({q.category for q in questions}), summary=summary,
                       has_questions=bool(questions))
    return EvalRun(info, questions, results.get("budget_tokens"))


def load_run(path: str | Path) -> EvalRun:
    """The eval run at ``path`` (a ``lychee-ray eval`` directory or an ``eval-retrieval`` JSON file);
    :class:`EvalRunError` when it is neither."""
    p = Path(path)
    if not p.exists():
        raise EvalRunError("not_found", f"eval run not found: {p}")
    if p.is_dir():
        if not RunLayout(p).results_path.exists():
            raise EvalRunError("unknown", f"{p} is no `lychee-ray eval` run directory (no results.json)")
        return _eval_run(p)
    try:
        doc = json.loads(p.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise EvalRunError("unknown", f"{p} is not an eval-retrieval report: {e}") from None
    if not isinstance(doc, dict) or "systems" not in doc:
        raise EvalRunError("unknown", f"{p} is not an eval-retrieval report (no 'systems')")
    return _retrieval_run(p)


class RunCatalog:
    """The eval runs given to the inspector, loaded once (by name; a repeated name gets a suffix)."""

    def __init__(self, paths: list[str]) -> None:
        self.runs: dict[str, EvalRun] = {}
        for path in paths:
            run = load_run(path)
            name, n = run.info.name, 2
            while name in self.runs:
                name, n = f"{run.info.name}-{n}", n + 1
            run.info.name = name
            self.runs[name] = run

    def names(self) -> list[str]:
        return list(self.runs)


__all__ = ["EvalRun", "EvalRunError", "RunCatalog", "load_run", "outcome"]
