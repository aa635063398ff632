"""A benchmark's script in a fresh process: its marked JSON line back, a clear error when it fails."""

from __future__ import annotations

import pytest

from lychee_ray.testing.fresh_process import RESULT_MARK, run_json_script
from tests.paths import REPO

pytestmark = pytest.mark.heavy  # child processes


def test_the_marked_line_comes_back_as_json():
    script = f"import os, json\nprint('noise')\nprint({RESULT_MARK!r} + json.dumps({{'ray': os.environ.get('RAY_ADDRESS')}}))"
    assert run_json_script(script, REPO, timeout_s=60) == {"ray": None}  # a Ray of its own, never the caller's


def test_a_failing_script_or_one_without_a_result_raises_with_its_stderr():
    with pytest.raises(RuntimeError, match="boom"):
        run_json_script("raise SystemExit('boom')", REPO, timeout_s=60)
    with pytest.raises(RuntimeError, match="failed"):
        run_json_script("print('no result')", REPO, timeout_s=60)
