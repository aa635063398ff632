"""The Ray build job's progress: its stage actors report the turns they work on to the driver."""

from __future__ import annotations

import pytest

from lychee_ray.config import load_config
from lychee_ray.ingest.run_progress import BuildProgress
from lychee_ray.names import BUILD_STAGES
from lychee_ray.testing.synthetic import synthetic_conversation

pytestmark = pytest.mark.ray


def test_stage_actors_report_worked_turns_to_the_driver(ray_session, tmp_path, monkeypatch, capsys):
    from lychee_ray.ray.build_job import run_ray_build

    convs = [synthetic_conversation(i, seed=5, sessions=2, topics_per_session=2) for i in range(2)]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(c.model_dump_json() for c in convs) + "\n")
    n = sum(c.num_turns for c in convs)
    seen = []
    replace = BuildProgress.replace

    def polled(self, counts):  # what the driver reads from the progress actor
        seen.append(counts)
        replace(self, counts)

    monkeypatch.setattr(BuildProgress, "replace", polled)
    s = run_ray_build(load_config(env={}, sets=["ray.progress_interval_s=0.5"]), "jsonl", src, tmp_path / "st",
                      backend="rules")
    assert s.built == 2
    last = seen[-1]
    # worked, not only settled at the commit: each stage's actors reported their turns
    assert {stage: last.worked.get(stage, 0) for stage in BUILD_STAGES} == dict.fromkeys(BUILD_STAGES, n)
    final = capsys.readouterr().err.splitlines()[-1]
    assert f"turns {n}/{n}" in final and f"embedded {n}, segmented {n}, encoded {n}, records embedded {n}" in final
