"""Run a Python script in a fresh process (benchmarks): its own local Ray, not this process's, and
its result as JSON on a marked line of its output."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

RESULT_MARK = "RAYJSON"


def run_json_script(script: str, root: str | Path, timeout_s: float = 7200.0) -> dict[str, Any]:
    """Run ``script`` with ``python -c`` (``root`` on ``PYTHONPATH``, no ``RAY_ADDRESS``: a local Ray of
    its own) and return the JSON it printed after :data:`RESULT_MARK`; RuntimeError with the end of its
    stderr when it fails or prints none."""
    env = {**os.environ, "PYTHONPATH": str(root), "RAY_USAGE_STATS_ENABLED": "0"}
    env.pop("RAY_ADDRESS", None)
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=timeout_s)
    line = next((x for x in proc.stdout.splitlines() if x.startswith(RESULT_MARK)), None)
    if proc.returncode != 0 or line is None:
        raise RuntimeError(f"the script failed:\n{proc.stderr[-4000:]}")
    return json.loads(line[len(RESULT_MARK):])


__all__ = ["RESULT_MARK", "run_json_script"]
