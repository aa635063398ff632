"""Build CPU per input character on prefixes of one long conversation: is a build linear in length?

    git worktree add --detach /tmp/base <commit>
    python benchmarks/build_linearity.py --conversation ../shared/data/beam/500K/1 --fractions 0.2,0.6 \
        --tree base=/tmp/base --tree this=. --out /tmp/build_linearity.json

Content differs between conversations, so linearity is judged on prefixes of one: the first
``fraction`` of the conversation's messages (whole messages, in order, until that share of its
characters), each written as a BEAM folder of its own. Every run is a fresh ``lychee-ray build --local
--llm rules`` process of one source tree (``PYTHONPATH``; the child checks it imported that tree),
and its CPU (user + system, every thread) comes from ``os.wait4``; a one-message build is run too
and subtracted (Python start, model loads). Trees alternate within each prefix. ``--stub-embedder``
replaces the model by a cheap hashing embedder: what is left is the Python of a build (segmenting,
encoding, nodes, links, commit), where a scan over all earlier records per new record would show.
``--profile`` writes a cProfile of each run and reports the functions whose own CPU grows fastest.
"""

from __future__ import annotations

import argparse
import json
import os
import pstats
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.testing.results import write_result  # noqa: E402

# the child: import lychee_ray from its tree, optionally swap the model for a hashing embedder and
# run under cProfile, then run the CLI
_CHILD = """
import sys, os, lychee_ray
tree, stub, prof = sys.argv[1], sys.argv[2] == "1", sys.argv[3]
assert lychee_ray.__file__.startswith(tree), (lychee_ray.__file__, tree)
if stub:
    import zlib
    import numpy as np
    import lychee_ray.embed.factory as factory

    class Hash:
        name, dim, runtime = "hash", 384, "hash"

        def encode(self, texts):
            out = np.zeros((len(texts), 384), dtype=np.float32)
            for i, t in enumerate(texts):
                for w in t.lower().split()[:256]:
                    h = zlib.crc32(w.encode("utf-8", "replace"))
                    out[i, h % 384] += 1.0
            n = np.linalg.norm(out, axis=1, keepdims=True)
            n[n == 0] = 1.0
            return out / n

    factory._build = lambda cfg, llm, quantize: Hash()
from lychee_ray.cli.main import main
sys.argv = ["lychee-ray"] + sys.argv[4:]
if prof:
    import cProfile
    cProfile.run("rc = main()", prof)
    sys.exit(rc)
sys.exit(main())
"""


def prefix_folder(src: Path, fraction: float, dest: Path) -> dict[str, int]:
    """``dest``: a BEAM folder holding the first messages of ``src``'s chat up to ``fraction`` of its characters."""
    chat = json.loads((src / "chat.json").read_text())
    total = sum(len(m.get("content") or "") for b in chat for turn in b["turns"] for m in turn)
    budget, used, msgs = fraction * total, 0, 0
    out: list[dict[str, Any]] = []
    for b in chat:
        turns = []
        for turn in b["turns"]:
            kept = []
            for m in turn:
                if used >= budget and fraction < 1:
                    break
                kept.append(m)
                used += len(m.get("content") or "")
                msgs += 1
            if kept:
                turns.append(kept)
            if used >= budget and fraction < 1:
                break
        if turns:
            out.append({**b, "turns": turns})
        if used >= budget and fraction < 1:
            break
    dest.mkdir(parents=True, exist_ok=True)
    (dest / "chat.json").write_text(json.dumps(out))
    return {"chars": used, "messages": msgs}


def run_build(tree: Path, folder: Path, out_dir: Path, stub: bool, prof: str) -> dict[str, Any]:
    env = dict(os.environ, PYTHONPATH=str(tree))
    args = [sys.executable, "-c", _CHILD, str(tree), "1" if stub else "0", prof, "build", "--input", str(folder),
            "--format", "beam", "--out", str(out_dir), "--llm", "rules", "--local"]
    t0 = time.monotonic()
    proc = subprocess.Popen(args, env=env, cwd=out_dir.parent, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    with proc.stderr:
        err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"build of {tree} failed:\n{err.decode(errors='replace')[-3000:]}")
    return {"cpu_s": round(usage.ru_utime + usage.ru_stime, 2), "wall_s": round(time.monotonic() - t0, 1)}


def store_counts(store: Path) -> dict[str, Any]:
    """Records, nodes by kind and passages of a one-conversation store (read by this tree)."""
    from lychee_ray.io.store import StoreReader

    reader = StoreReader(str(store))
    out: dict[str, Any] = {}
    for cid in reader.markers:
        data = reader.load(cid)
        kinds: dict[str, int] = {}
        for k in data.tables["nodes"].column("kind").to_pylist():
            kinds[k] = kinds.get(k, 0) + 1
        out = {"records": data.records.num_rows, "nodes": sum(kinds.values()), "nodes_by_kind": kinds}
        if "passages" in data.tables:
            out["passages"] = data.tables["passages"].num_rows
    return out


def profile_growth(profiles: dict[float, str], top: int) -> list[dict[str, Any]]:
    """Functions by cumulative CPU at the largest prefix, with their CPU at each prefix."""
    stats = {f: pstats.Stats(p).stats for f, p in profiles.items()}  # type: ignore[attr-defined]
    big = max(stats)
    rows = sorted(stats[big].items(), key=lambda kv: -kv[1][3])[:top]
    out = []
    for key, _ in rows:
        name = f"{Path(key[0]).name}:{key[1]}:{key[2]}"
        out.append({"function": name, **{f"cum_s@{f}": round(stats[f].get(key, (0, 0, 0, 0))[3], 2) for f in sorted(stats)},
                    **{f"own_s@{f}": round(stats[f].get(key, (0, 0, 0, 0))[2], 2) for f in sorted(stats)}})
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversation", required=True, help="one BEAM conversation folder")
    ap.add_argument("--fractions", default="0.2,0.6", help="prefixes, as shares of the conversation's characters")
    ap.add_argument("--tree", action="append", default=[], help="NAME=PATH of a source tree (repeatable)")
    ap.add_argument("--rounds", type=int, default=1, help="runs of each tree per prefix (medians)")
    ap.add_argument("--stub-embedder", action="store_true", help="a hashing embedder instead of the model")
    ap.add_argument("--profile", action="store_true", help="cProfile each run (first round only)")
    ap.add_argument("--top", type=int, default=40, help="functions reported with --profile")
    ap.add_argument("--out", required=True, help="JSON result file")
    args = ap.parse_args()
    trees = {n: Path(p).resolve() for n, p in (t.split("=", 1) for t in (args.tree or [f"this={ROOT}"]))}
    fractions = [float(f) for f in args.fractions.split(",")]
    result: dict[str, Any] = {"conversation": str(Path(args.conversation).resolve()), "stub_embedder": args.stub_embedder,
                              "trees": {k: str(v) for k, v in trees.items()}, "prefixes": {}}
    with tempfile.TemporaryDirectory(prefix="build_linearity_") as tmp:
        base = Path(tmp)
        src = Path(args.conversation)
        one = prefix_folder(src, 1e-9, base / "in_one" / "1")
        preps = {f: prefix_folder(src, f, base / f"in_{f}" / "1") for f in fractions}
        profiles: dict[str, dict[float, str]] = {n: {} for n in trees}
        startup = {}
        for name, tree in trees.items():
            startup[name] = run_build(tree, base / "in_one", base / f"out_{name}_one", args.stub_embedder, "")["cpu_s"]
        result["startup_cpu_s"] = startup
        result["one_message"] = one
        for f in fractions:
            entry: dict[str, Any] = {**preps[f], "runs": {n: [] for n in trees}}
            for r in range(args.rounds):
                names = list(trees) if r % 2 == 0 else list(reversed(trees))
                for name in names:
                    prof = str(base / f"prof_{name}_{f}.pstats") if args.profile and r == 0 else ""
                    store = base / f"out_{name}_{f}_{r}"
                    res = run_build(trees[name], base / f"in_{f}", store, args.stub_embedder, prof)
                    res["load_avg_1m"] = round(os.getloadavg()[0], 2)
                    if r == 0:
                        entry.setdefault("stores", {})[name] = store_counts(store)
                    if prof:
                        profiles[name][f] = prof
                    entry["runs"][name].append(res)
                    print(f"prefix {f} {name}: {res}", flush=True)
            for name in trees:
                cpu = statistics.median(x["cpu_s"] for x in entry["runs"][name]) - startup[name]
                entry.setdefault("build_cpu_s", {})[name] = round(cpu, 2)
                entry.setdefault("core_ms_per_1k_chars", {})[name] = round(1000 * cpu / (preps[f]["chars"] / 1000), 2)
            result["prefixes"][str(f)] = entry
        if len(fractions) >= 2:
            lo, hi = str(min(fractions)), str(max(fractions))
            result["per_char_growth"] = {n: round(result["prefixes"][hi]["core_ms_per_1k_chars"][n]
                                                  / result["prefixes"][lo]["core_ms_per_1k_chars"][n], 3) for n in trees}
        if args.profile:
            result["profile"] = {n: profile_growth(p, args.top) for n, p in profiles.items() if p}
    write_result(result, args.out)
    print(json.dumps({k: v for k, v in result.items() if k != "profile"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
