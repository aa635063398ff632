"""The whole ``lychee-ray build --local`` process of two source trees on one input, alternating, on
one machine: core-seconds per turn of each and their ratio (issue 37).

    git worktree add --detach /tmp/pre-stages 0ef15b8     # main before the stages (issue 37's "about 0.05")
    python benchmarks/cli_build_ab.py --baseline-tree /tmp/pre-stages --input ../shared/data/locomo \
        --format locomo --rounds 2 --out benchmarks/results/cli_build_ab_locomo.json

Why a benchmark of its own: core-seconds per turn move with the machine (the same commit measured
0.0143 on one development machine and 0.0278 on another a day later), so a target like "from about
0.05 to 0.015" only means something as a ratio of two trees measured in the same hour on the same
machine. Each run is a fresh Python process with ``PYTHONPATH`` set to its tree (the process checks
that it imported that tree's ``lychee_ray``), running ``lychee-ray build --input ... --llm rules
--local`` into a new directory: Python start, model loads, the build and its final sweep, as a user
runs it. Its CPU (user + system, its threads and any children) and peak RSS come from ``os.wait4``.
Runs alternate A B B A ... so that a drift of the machine's speed falls on both trees alike.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.io.adapters import read_input  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402

# the child: import lychee_ray from the tree it was given (and say so), then run the CLI
_CHILD = ("import sys, lychee_ray; tree = sys.argv[1]; "
          "assert lychee_ray.__file__.startswith(tree), (lychee_ray.__file__, tree); "
          "from lychee_ray.cli.main import main; sys.argv = ['lychee-ray'] + sys.argv[2:]; sys.exit(main())")


def _commit(tree: Path) -> str | None:
    """The tree's checked-out commit (None outside git)."""
    r = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or None


def run_build(tree: Path, input_path: str, out_dir: Path, extra: list[str]) -> dict[str, Any]:
    """One ``lychee-ray build --local`` of ``tree`` into ``out_dir``: CPU, wall, peak RSS."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    args = [sys.executable, "-c", _CHILD, str(tree.resolve()), "build", "--input", input_path,
            "--out", str(out_dir), "--llm", "rules", "--local", *extra]
    t0 = time.monotonic()
    proc = subprocess.Popen(args, env=env, cwd=out_dir.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    with proc.stderr:
        err = proc.stderr.read()  # read before waiting: a full pipe would block the child
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - t0
    if proc.returncode != 0:
        raise SystemExit(f"build of {tree} failed ({proc.returncode}):\n{err.decode(errors='replace')[-3000:]}")
    return {"cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "wall_s": round(wall, 2),
            "peak_rss_mib": round(usage.ru_maxrss / 1024, 1)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline-tree", required=True, help="source tree to compare with (a git worktree)")
    ap.add_argument("--tree", default=str(ROOT), help="source tree measured (default: this one)")
    ap.add_argument("--input", required=True)
    ap.add_argument("--format", required=True, help="input format, to count the turns")
    ap.add_argument("--rounds", type=int, default=2, help="runs of each tree (alternating A B B A ...)")
    ap.add_argument("--build-arg", action="append", default=[], help="extra argument for both builds")
    ap.add_argument("--out", required=True, help="JSON result file")
    args = ap.parse_args()
    args.input = str(Path(args.input).resolve())  # the builds run in a scratch directory
    trees = {"baseline": Path(args.baseline_tree).resolve(), "tree": Path(args.tree).resolve()}
    turns = sum(item.conversation.num_turns for item in read_input(args.format, args.input)
                if item.conversation is not None)
    runs: dict[str, list[dict[str, Any]]] = {k: [] for k in trees}
    order = [k for r in range(args.rounds) for k in (("baseline", "tree") if r % 2 == 0 else ("tree", "baseline"))]
    with tempfile.TemporaryDirectory(prefix="cli_build_ab_") as tmp:
        for i, name in enumerate(order):
            res = run_build(trees[name], args.input, Path(tmp) / f"{name}_{i}", args.build_arg)
            res["load_avg_1m_after"] = round(os.getloadavg()[0], 2)
            runs[name].append(res)
            print(f"{name} ({_commit(trees[name])}): {res}", flush=True)
    med = {k: statistics.median(r["cpu_s"] for r in v) for k, v in runs.items()}
    result = {
        "input": args.input, "turns": turns, "rounds": args.rounds, "build_args": args.build_arg,
        "commits": {k: _commit(p) for k, p in trees.items()}, "trees": {k: str(p) for k, p in trees.items()},
        "runs": runs, "median_cpu_s": med,
        "core_s_per_turn": {k: round(v / turns, 5) for k, v in med.items()},
        "ratio_tree_to_baseline": round(med["tree"] / med["baseline"], 3),
        "cpus": os.cpu_count(),
    }
    write_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
