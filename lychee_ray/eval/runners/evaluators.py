"""Small evaluators, each a plain class built with its questions and called on what it evaluates.

- :class:`AnswerEvaluator` — answers (and judges) one variant's questions on one store; yields
  :class:`~lychee_ray.eval.setup.rows.AnswerRow` rows. Executors run it in-process
  (:class:`~lychee_ray.eval.runners.executors.LocalExecutor`) or inside Ray Data actors
  (:class:`lychee_ray.ray.eval_job.RayExecutor`).
- :class:`RetrievalEvaluator` — id and content coverage of the selected context vs the baselines
  of :mod:`lychee_ray.eval.baselines.retrieval` at the same budget, called on a
  :class:`~lychee_ray.query.engine.QueryEngine` (no LLM).
- :class:`SegmentationEvaluator` — Pk / WindowDiff / boundary F1 of the segmenter on a gold
  topic-segmentation corpus (:mod:`lychee_ray.eval.runners.segmentation`), called on the utterance vectors
  and a segmenter configuration.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from collections.abc import Callable, Iterable, Iterator, Sequence

import numpy as np

from lychee_ray.config.eval import AgentLogEvalConfig
from lychee_ray.config import SegmenterConfig
from lychee_ray.core.conversation import Conversation, QAItem
from lychee_ray.eval.metrics.collateral import CollateralCounts, conversation_collateral
from lychee_ray.eval.runners.answerer import QuestionAnswerer
from lychee_ray.eval.runners.retrieval import QuestionResult, evaluate_retrieval, load_questions
from lychee_ray.names import Scope
from lychee_ray.eval.runners.segmentation import (
    SegDialogue,
    evaluate_dialogues,
    load_seg_corpus,
)
from lychee_ray.eval.setup.rows import AnswerRow, QuestionPayload
from lychee_ray.io.adapters import read_input
from lychee_ray.io.adapters.registry import adapter
from lychee_ray.llm.ratelimit import RateLimiter
from lychee_ray.query.engine import QueryEngine as MemoryStore  # the query side is all an evaluation uses
from lychee_ray.text.tokens import DEFAULT_ENCODING

ProgressFn = Callable[[int, int], None]


class AnswerEvaluator:
    """Answers (and judges) questions of one variant on one store, ``spec["in_flight"]`` at a time.

    ``spec`` and ``limiter`` are those of :class:`~lychee_ray.eval.runners.answerer.QuestionAnswerer`.
    A failed question comes back as a row with ``answer_error`` set; nothing is raised.
    """

    def __init__(self, spec: dict[str, Any], limiter: RateLimiter | None = None, *, embedder: Any = None,
                 llm_client: Any = None, judge_client: Any = None) -> None:
        self.spec = spec
        self.answerer = QuestionAnswerer(spec, limiter, embedder=embedder, llm_client=llm_client,
                                         judge_client=judge_client)
        self.pool = ThreadPoolExecutor(max_workers=max(1, int(spec.get("in_flight", 1))), thread_name_prefix="lychee-eval")

    def __call__(self, questions: Iterable[QuestionPayload]) -> Iterator[AnswerRow]:
        """The rows of ``questions``, in question order (answered concurrently)."""
        return self.pool.map(self.answerer.answer, questions)

    def close(self) -> None:
        """Stop the threads and release the store."""
        self.pool.shutdown(wait=True)
        self.answerer.close()

    def __enter__(self) -> AnswerEvaluator:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class RetrievalEvaluator:
    """Id and content coverage of lychee's selected context vs the baselines (DESIGN §5), no LLM.

    Built with the questions (those with gold evidence are scored); called on a store it returns
    the report (overall, per category, per split) and the per-question results. ``baselines``
    defaults to ``eval.retrieval_baselines`` of the store's configuration.
    """

    def __init__(self, questions: list[QAItem], budget_tokens: int | None = None,
                 baselines: Sequence[str] | None = None, scope: Scope = "conversation",
                 logs: Sequence[Conversation] = ()) -> None:
        self.questions = questions
        self.budget_tokens = budget_tokens
        self.baselines = baselines
        self.scope = scope
        # agent logs: their stored supersession links are judged from structure (collateral)
        self.logs = list(logs)
        self.replaced_values: dict[str, Any] | None = None  # what annotate_replaced_values matched

    @classmethod
    def from_data(cls, fmt: str, data: str | Path, categories: Iterable[str] | None = None, limit: int | None = None,
                  budget_tokens: int | None = None, baselines: Sequence[str] | None = None,
                  agentlog: AgentLogEvalConfig | None = None, scope: Scope = "conversation") -> RetrievalEvaluator:
        """The questions with gold evidence of a dataset (in ``categories``; the first ``limit``);
        agent logs: the questions derived from their tool traffic (``agentlog`` limits)."""
        questions = load_questions(fmt, data, categories, agentlog)
        logs = [i.conversation for i in read_input(fmt, data) if i.conversation is not None] if adapter(fmt).agent_log else []
        return cls(questions[:limit] if limit else questions, budget_tokens, baselines, scope, logs)

    def annotate_replaced_values(self, values: dict[str, list[str]]) -> dict[str, Any]:
        """Give questions their replaced values (question id -> the old value's spellings; see
        :mod:`~lychee_ray.eval.metrics.beam_current`); what was matched, for the report: the
        questions annotated and the annotation's ids no question has (a typo, another data slice)."""
        ids = {q.question_id for q in self.questions}
        self.questions = [q.model_copy(update={"meta": {**q.meta, "replaced_values": list(values[q.question_id])}})
                          if q.question_id in values else q for q in self.questions]
        self.replaced_values = {"questions": sum(q in ids for q in values),
                                "unknown_question_ids": sorted(q for q in values if q not in ids)}
        return self.replaced_values

    def __call__(self, store: MemoryStore, progress: ProgressFn | None = None) -> tuple[dict[str, Any], list[QuestionResult]]:
        """(report, per-question results) on ``store``; the budget defaults to ``query.select.budget_tokens``.
        Agent logs add ``collateral``: the store's supersession links judged from the logs' structure."""
        report, results = evaluate_retrieval(store, self.questions, self.budget_tokens, baselines=self.baselines,
                                             progress=progress, scope=self.scope)
        if self.replaced_values is not None:
            report["replaced_values"] = self.replaced_values
        if self.logs:
            report["collateral"] = store_collateral(store, self.logs).report()
        return report, results


def store_collateral(store: MemoryStore, logs: Iterable[Conversation]) -> CollateralCounts:
    """:func:`~lychee_ray.eval.metrics.collateral.conversation_collateral` over every log the store holds."""
    total = CollateralCounts()
    for conv in logs:
        if conv.conversation_id in store.reader.markers:
            rows = store.reader.load(conv.conversation_id).records.to_pylist()
            total.add(conversation_collateral(conv, rows))
    return total


class SegmentationEvaluator:
    """Boundary quality of the segmenter on a gold corpus, next to its reference points.

    Built with the dialogues; called on their utterance vectors (rows in corpus order, see
    :attr:`utterances`) and a segmenter configuration, it returns the ``eval-seg`` report.
    """

    def __init__(self, dialogues: Sequence[SegDialogue], *, reset_background: bool = False, baselines: bool = True) -> None:
        self.dialogues = list(dialogues)
        self.reset_background = reset_background
        self.baselines = baselines

    @classmethod
    def from_corpus(cls, path: str | Path, subset: str | None = None, **kw: Any) -> SegmentationEvaluator:
        """The dialogues of a TIAGE-format corpus (only those of ``subset`` when given)."""
        return cls(load_seg_corpus(path, subset), **kw)

    @property
    def utterances(self) -> list[str]:
        """Every utterance in corpus order (what the vectors' rows must be)."""
        return [u for d in self.dialogues for u in d.utterances]

    def __call__(self, vectors: np.ndarray, cfg: SegmenterConfig, encoding: str = DEFAULT_ENCODING) -> dict[str, Any]:
        """The report (lychee, matched fixed window, and with ``baselines`` no-boundary and oracle TextTiling)."""
        return evaluate_dialogues(self.dialogues, vectors, cfg, reset_background=self.reset_background,
                                  encoding=encoding, baselines=self.baselines)


__all__ = ["AnswerEvaluator", "ProgressFn", "RetrievalEvaluator", "SegmentationEvaluator", "store_collateral"]
