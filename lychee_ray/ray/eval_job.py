"""The Ray executor of ``lychee-ray eval``: the Ray build job and a Ray Data answering pipeline.

One pipeline per variant over its unanswered questions:
``map_batches(QuestionWorker, compute=ActorPoolStrategy, num_cpus=eval.actor_num_cpus)``. Each actor
holds one :class:`~lychee_ray.eval.runners.evaluators.AnswerEvaluator` (its store opened once) that answers
``eval.questions_in_flight`` questions at a time; with the ``openai`` backend every plan / answer /
judge call goes through the one cluster-wide :class:`~lychee_ray.ray.ratelimit.RateLimiterActor`.
Rows stream back and are appended to ``answers/<variant>/`` every ``eval.flush_every`` questions.
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import ray

from lychee_ray.ingest.runner import BuildSummary
from lychee_ray.config import LycheeConfig
from lychee_ray.eval.runners.evaluators import AnswerEvaluator, ProgressFn
from lychee_ray.eval.runners.resume import write_rows_in_parts
from lychee_ray.eval.setup.rows import QuestionPayload
from lychee_ray.logs import configure_logging
from lychee_ray.ray.build_job import run_ray_build
from lychee_ray.ray.ratelimit import RateLimiterActor, RayRateLimiter
from lychee_ray.ray.runtime import init_ray
from lychee_ray.names import LLMBackend, OPENAI_BACKEND

# Most blocks the question dataset is cut into (one actor task takes one batch of a block).
MAX_QUESTION_BLOCKS = 64
LIMITER_SUFFIX_CHARS = 8


class QuestionWorker:
    """Ray Data actor: one :class:`AnswerEvaluator` per actor; answers a batch of JSON questions."""

    def __init__(self, spec_json: str, limiter: Any = None) -> None:
        configure_logging()
        self.evaluate = AnswerEvaluator(json.loads(spec_json), RayRateLimiter(limiter) if limiter is not None else None)

    def __call__(self, batch: dict[str, Any]) -> dict[str, list[str]]:
        qs = [json.loads(str(x)) for x in batch["q"]]
        return {"result": [json.dumps(r) for r in self.evaluate(qs)]}


def answer_rows_ray(spec: dict[str, Any], questions: list[QuestionPayload], cfg: LycheeConfig,
                    limiter: Any = None) -> Iterator[dict[str, Any]]:
    """Answer rows of ``questions`` from a Ray Data pipeline of :class:`QuestionWorker` actors, as they finish."""
    ec = cfg.eval
    rows = [{"q": json.dumps(q)} for q in questions]
    ds: ray.data.Dataset = ray.data.from_items(rows, override_num_blocks=max(1, min(len(rows) // ec.batch_size + 1, MAX_QUESTION_BLOCKS)))
    ds = ds.map_batches(
        QuestionWorker,
        batch_size=ec.batch_size,
        fn_constructor_kwargs={"spec_json": json.dumps(spec), "limiter": limiter},
        compute=ray.data.ActorPoolStrategy(min_size=ec.min_actors, max_size=max(ec.min_actors, ec.max_actors)),
        num_cpus=ec.actor_num_cpus,
    )
    for out in ds.iter_rows():
        yield json.loads(out["result"])


class RayExecutor:
    """Builds with the Ray build job and answers on Ray Data; starts (or joins) Ray when created."""

    name = "ray"

    def __init__(self, cfg: LycheeConfig, backend: LLMBackend) -> None:
        self.cfg, self.backend = cfg, backend
        init_ray(cfg)
        self._limiter: Any = None

    def build_store(self, cfg: LycheeConfig, input_path: Path, out: Path, backend: LLMBackend, progress: bool) -> BuildSummary:
        """The Ray build job (its own rate limiter for the build's LLM calls)."""
        return run_ray_build(cfg, "jsonl", input_path, out, backend=backend, progress=progress)

    def limiter(self) -> Any:
        """The cluster-wide limiter actor of the answering (``openai`` only; created on first use)."""
        if self.backend == OPENAI_BACKEND and self._limiter is None:
            self._limiter = RateLimiterActor.options(  # type: ignore[attr-defined]  # @ray.remote: an ActorClass
                name=f"lychee-eval-limiter-{uuid.uuid4().hex[:LIMITER_SUFFIX_CHARS]}").remote(self.cfg.llm.rate_limit.model_dump())
        return self._limiter

    def answer_questions(self, spec: dict[str, Any], questions: list[QuestionPayload], run_dir: Path,
                         progress: ProgressFn | None = None) -> int:
        """Answer on Ray Data, appending finished rows to ``answers/<variant>/``; rows written."""
        if not questions:
            return 0
        rows = answer_rows_ray(spec, questions, self.cfg, self.limiter())
        return write_rows_in_parts(rows, run_dir, spec["variant"], self.cfg.eval.flush_every, len(questions), progress)

    def close(self) -> None:
        """Stop the limiter actor (Ray itself stays up for the caller)."""
        if self._limiter is not None:
            ray.kill(self._limiter)
            self._limiter = None

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["QuestionWorker", "RayExecutor", "answer_rows_ray"]
