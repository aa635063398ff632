"""The run directory of ``lychee-ray eval``, spelled once. Every step resumes from what is here::

    RUN_DIR/input/<hash>.jsonl          the selected conversations (canonical JSONL the build reads)
    RUN_DIR/stores/<build key>/         memory stores, one per distinct build (variants share them)
    RUN_DIR/answers/<variant>/*.parquet finished answers, appended in parts (the resume unit)
    RUN_DIR/costs/<build key>.json      offline construction-token estimates (rules backend)
    RUN_DIR/state.json                  build and query wall times, store locations
    RUN_DIR/results.json                metrics and costs per variant and category
    RUN_DIR/answers.parquet             one row per (variant, question): answer, evidence, tokens, verdict
    RUN_DIR/report.md + *.png           the report (lychee_ray.eval.reports.report)
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

ANSWER_PART_GLOB = "part-*.parquet"


@dataclass(frozen=True)
class RunLayout:
    """Paths inside one eval run directory."""

    root: Path

    @property
    def input_dir(self) -> Path:
        return self.root / "input"

    def store_dir(self, build_key: str) -> Path:
        """This run's own store for one distinct build."""
        return self.root / "stores" / build_key

    def answers_dir(self, variant: str) -> Path:
        """Answer parts of one variant."""
        return self.root / "answers" / variant

    def costs_path(self, build_key: str) -> Path:
        """Cached construction-token estimates of one store."""
        return self.root / "costs" / f"{build_key}.json"

    @property
    def state_path(self) -> Path:
        return self.root / "state.json"

    @property
    def results_path(self) -> Path:
        return self.root / "results.json"

    @property
    def answers_table_path(self) -> Path:
        return self.root / "answers.parquet"


__all__ = ["ANSWER_PART_GLOB", "RunLayout"]
