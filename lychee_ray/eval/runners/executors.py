"""Where an eval's work runs: building stores and answering questions, apart from what is evaluated.

An executor does two things for :func:`lychee_ray.eval.runners.run.run_eval`: build (or resume) a store
from the run's canonical JSONL input, and answer one variant's questions with an
:class:`~lychee_ray.eval.runners.evaluators.AnswerEvaluator`, appending rows to ``answers/<variant>/``.

- :class:`LocalExecutor` (``lychee-ray eval --local``): the in-process build runner and one
  evaluator with ``eval.questions_in_flight`` threads; never imports or starts Ray.
- :class:`lychee_ray.ray.eval_job.RayExecutor` (the default): the Ray build job and a Ray Data
  pipeline of evaluator actors; every LLM call goes through one cluster-wide rate limiter.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from lychee_ray.ingest.runner import BuildSummary, run_local_build
from lychee_ray.config import LycheeConfig
from lychee_ray.eval.runners.evaluators import AnswerEvaluator, ProgressFn
from lychee_ray.eval.runners.resume import write_rows_in_parts
from lychee_ray.eval.setup.rows import QuestionPayload
from lychee_ray.llm.ratelimit import make_rate_limiter
from lychee_ray.names import LLMBackend, OPENAI_BACKEND


class Executor(Protocol):
    """Runs an eval's builds and answering; closed when the run ends."""

    name: str

    def build_store(self, cfg: LycheeConfig, input_path: Path, out: Path, backend: LLMBackend, progress: bool) -> BuildSummary:
        """Build (or resume) the store ``out`` from the JSONL ``input_path``."""
        ...

    def answer_questions(self, spec: dict[str, Any], questions: list[QuestionPayload], run_dir: Path,
                         progress: ProgressFn | None = None) -> int:
        """Answer ``questions`` for ``spec``'s variant, appending rows to its answer parts; rows written."""
        ...

    def close(self) -> None:
        """Release what the executor holds (actors, limiters)."""
        ...


class LocalExecutor:
    """Everything in this process: the local build runner and a threaded evaluator. No Ray."""

    name = "local"

    def __init__(self, cfg: LycheeConfig, backend: LLMBackend) -> None:
        self.cfg = cfg
        # one limiter for every plan / answer / judge call of the run, as the Ray limiter actor is
        self.limiter = make_rate_limiter(cfg.llm.rate_limit) if backend == OPENAI_BACKEND else None

    def build_store(self, cfg: LycheeConfig, input_path: Path, out: Path, backend: LLMBackend, progress: bool) -> BuildSummary:
        """In-process build (``run_local_build``), with the build's progress display."""
        return run_local_build(cfg, "jsonl", input_path, out, backend=backend, progress=progress)

    def answer_questions(self, spec: dict[str, Any], questions: list[QuestionPayload], run_dir: Path,
                         progress: ProgressFn | None = None) -> int:
        """Answer in this process, ``spec["in_flight"]`` questions at a time."""
        if not questions:
            return 0
        with AnswerEvaluator(spec, self.limiter) as evaluate:
            return write_rows_in_parts(evaluate(questions), run_dir, spec["variant"], self.cfg.eval.flush_every,
                                       len(questions), progress)

    def close(self) -> None:
        """Nothing to release: the evaluators close after each variant."""

    def __enter__(self) -> LocalExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["Executor", "LocalExecutor", "ProgressFn"]
