"""What a store costs per input token: bytes by table and kind, and build core-seconds, for this
tree and a baseline tree built in the same run on the same inputs (issue 49, "Cost per input token").

    git worktree add --detach /tmp/main-base main          # the baseline: main as it is
    python benchmarks/store_cost.py --baseline-tree /tmp/main-base \\
        --corpus beam=/tmp/beam_dev3:beam \\
        --corpus locomo=../shared/data/locomo:locomo:2 \\
        --corpus tau=../shared/data/agentlogs/tau_airline_dev.jsonl:openai:12 \\
        --out benchmarks/results/store_cost.json

A corpus is ``NAME=PATH:FORMAT[:N]`` (``N``: its first N conversations only; ``/tmp/beam_dev3``: a
folder of links to BEAM conversations 1-3 — docs/build-cost.md; any format this tree reads, e.g. a
canonical JSONL of them). Each corpus is read
once here and written as canonical JSONL (the same conversations for both trees, whatever either
tree's adapters do), then built by each tree with ``lychee-ray build --llm rules --local`` in a
fresh process (``PYTHONPATH`` = the tree; cli_build_ab.py's child, which checks what it imported),
baseline and tree alternating from corpus to corpus. Per build:

- **bytes**: every file of the store, by kind — ``faiss:<table>`` (each generation's vector index
  files), ``ids.json``, ``parquet:<table>`` (the table's parts and compacted files), ``segstate``
  and ``other`` (manifest, markers, errors, locks) — and per 1,000 input tokens;
- **core-seconds**: the build process's user + system CPU (its threads and children, ``os.wait4``),
  whole, and less the same tree's build of a one-turn conversation (``fixed``: Python, imports, model
  loads), per 1,000 input tokens and per turn.

Input tokens are the tokens (offline tokenizer) of every turn's text — what a user hands over.
Absolute core-seconds move with the machine and its load: compare the two trees of one run.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from cli_build_ab import run_build  # noqa: E402  (the same child process and CPU accounting)

from lychee_ray.io.adapters import read_input  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402
from lychee_ray.text.tokens import count_tokens  # noqa: E402

_ONE_TURN = {"conversation_id": "fixed-cost", "user_id": "fixed-cost", "sessions": [
    {"session_id": "s1", "started_at": "2024-01-01T10:00:00",
     "turns": [{"turn_id": "t1", "role": "user", "speaker": "user", "content": "Hello there, how are you today?"}]}]}


def corpus_spec(text: str) -> tuple[str, str, str, int | None]:
    """``NAME=PATH:FORMAT[:N]`` -> (name, path, format, N)."""
    name, _, rest = text.partition("=")
    parts = rest.split(":")
    if not name or len(parts) not in (2, 3):
        raise SystemExit(f"--corpus {text!r}: expected NAME=PATH:FORMAT[:N]")
    return name, parts[0], parts[1], int(parts[2]) if len(parts) == 3 else None


def write_slice(path: str, fmt: str, limit: int | None, dest: Path) -> dict[str, int]:
    """The corpus's first ``limit`` conversations as canonical JSONL at ``dest``; its size."""
    convs = turns = tokens = chars = 0
    with dest.open("w", encoding="utf-8") as f:
        for item in read_input(fmt, path):
            if item.conversation is None:
                continue
            if limit is not None and convs >= limit:
                break
            conv = item.conversation
            f.write(json.dumps(conv.model_dump(mode="json")) + "\n")
            convs += 1
            for *_, t in conv.iter_turns():
                turns += 1
                chars += len(t.text)
                tokens += count_tokens(t.text)
    return {"conversations": convs, "turns": turns, "input_tokens": tokens, "input_chars": chars}


def store_bytes(root: Path) -> dict[str, int]:
    """Bytes of every file under a store root, by kind (module docstring)."""
    out: dict[str, int] = {}
    for p in root.rglob("*"):
        if not p.is_file():
            continue
        rel = p.relative_to(root).parts
        if rel[0] == "index":
            kind = "ids.json" if p.name == "ids.json" else f"faiss:{p.stem}" if p.suffix == ".faiss" else "other"
        elif rel[0] == "segstate":
            kind = "segstate"
        elif p.suffix == ".parquet" and rel[0] not in ("errors",) and len(rel) == 2:
            kind = f"parquet:{rel[0]}"
        else:
            kind = "other"
        out[kind] = out.get(kind, 0) + p.stat().st_size
    return dict(sorted(out.items()))


def _per_1k(value: float, tokens: int) -> float:
    return round(1000.0 * value / tokens, 4) if tokens else 0.0


def measure(tree: Path, corpus: Path, size: dict[str, int], fixed_cpu: float, out_dir: Path,
            extra: list[str]) -> dict[str, Any]:
    """One build of ``corpus`` by ``tree``: its bytes and CPU, whole and per input token."""
    run = run_build(tree, str(corpus), out_dir, extra)
    by_kind = store_bytes(out_dir)
    total = sum(by_kind.values())
    faiss = sum(v for k, v in by_kind.items() if k.startswith("faiss:"))
    cpu = run["cpu_s"]
    tokens = size["input_tokens"]
    return {
        **run, "fixed_cpu_s": fixed_cpu,
        "bytes": total, "bytes_faiss": faiss, "bytes_by_kind": by_kind,
        "bytes_per_1k_input_tokens": round(1000.0 * total / tokens, 1) if tokens else 0.0,
        "core_s_per_1k_input_tokens": _per_1k(cpu, tokens),
        "core_s_per_1k_input_tokens_less_fixed": _per_1k(max(0.0, cpu - fixed_cpu), tokens),
        "core_s_per_turn_less_fixed": round(max(0.0, cpu - fixed_cpu) / size["turns"], 5) if size["turns"] else 0.0,
    }


def _commit(tree: Path) -> str | None:
    r = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return r.stdout.strip() or None


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--baseline-tree", required=True, help="source tree to compare with (a git worktree of main)")
    ap.add_argument("--tree", default=str(ROOT), help="source tree measured (default: this one)")
    ap.add_argument("--corpus", action="append", required=True, help="NAME=PATH:FORMAT[:N] (repeatable)")
    ap.add_argument("--build-arg", action="append", default=[], help="extra argument for every build")
    ap.add_argument("--keep", help="keep the built stores under this directory (default: a temporary one)")
    ap.add_argument("--out", required=True, help="JSON result file")
    args = ap.parse_args()
    trees = {"baseline": Path(args.baseline_tree).resolve(), "tree": Path(args.tree).resolve()}
    with tempfile.TemporaryDirectory(prefix="store_cost_") as tmp:
        work = Path(args.keep).resolve() if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        one = work / "one_turn.jsonl"
        one.write_text(json.dumps(_ONE_TURN) + "\n", encoding="utf-8")
        fixed = {k: run_build(t, str(one), work / f"fixed_{k}", args.build_arg)["cpu_s"] for k, t in trees.items()}
        print(f"fixed (one-turn build): {fixed}", flush=True)
        corpora: dict[str, Any] = {}
        for i, spec in enumerate(args.corpus):
            name, path, fmt, limit = corpus_spec(spec)
            src = work / f"{name}.jsonl"
            size = write_slice(path, fmt, limit, src)
            order = ("baseline", "tree") if i % 2 == 0 else ("tree", "baseline")
            res = {k: measure(trees[k], src, size, fixed[k], work / f"{name}_{k}", args.build_arg) for k in order}
            ratio = {
                "bytes_per_input_token": round(res["tree"]["bytes"] / res["baseline"]["bytes"], 3),
                "faiss_bytes": round(res["tree"]["bytes_faiss"] / max(1, res["baseline"]["bytes_faiss"]), 3),
                "core_s": round(res["tree"]["cpu_s"] / res["baseline"]["cpu_s"], 3),
                "core_s_less_fixed": round(max(1e-9, res["tree"]["cpu_s"] - fixed["tree"])
                                           / max(1e-9, res["baseline"]["cpu_s"] - fixed["baseline"]), 3),
            }
            corpora[name] = {"source": path, "format": fmt, "slice": limit, **size, "builds": res,
                             "ratio_tree_to_baseline": ratio}
            print(f"{name}: {json.dumps(ratio)}", flush=True)
        result = {"trees": {k: str(p) for k, p in trees.items()}, "commits": {k: _commit(p) for k, p in trees.items()},
                  "build_args": args.build_arg, "fixed_cpu_s": fixed, "corpora": corpora, "cpus": os.cpu_count(),
                  "load_avg_1m_end": round(os.getloadavg()[0], 2)}
        write_result(result, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
