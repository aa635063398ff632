"""Length on the x-axis: lychee against the passage RAG baseline at 100K, 500K and 1M tokens of BEAM.

    python benchmarks/beam_length.py \
        --length 100K=DIR_100K:STORE_100K --length 500K=DIR_500K:STORE_500K \
        --length 1M=DIR_1M4:STORE_1M4 --length 1M=DIR_1M6:STORE_1M6 \
        --pool 500K,1M --out benchmarks/results/beam_length.json --plot docs/figures/beam_length.png

Each ``--length LABEL=DATA:STORE`` is a folder of BEAM conversation folders and its store (built with
the README's defaults, ``--llm rules`` in-process, when the store is missing; a store is built once and
reused by every later run). A label may be given several times (its groups are pooled). Per label, at
every budget (``--budgets``, default 1,500): gold-message recall of lychee and of the hybrid passage RAG
(BM25 + MiniLM over <= 200-token passages, RRF) overall, per ability and per conversation, and the lead;
then query latency (rules planner, no LLM: ``benchmarks/query_latency.py`` in a fresh process per store,
so that its peak resident memory is the store's) with p50 / p95. ``--pool`` adds the per-ability figures
over the questions of several labels together. Per-question rows (the ``eval-retrieval --per-question``
shape) are written beside ``--out`` as ``<stem>_<label>_<budget>.json``. ``--plot`` draws recall and lead per ability against
length, and query p95 against length.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.api import build_memory  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.embed import get_embedder  # noqa: E402
from lychee_ray.embed.memo import MemoEmbedder  # noqa: E402
from lychee_ray.eval.runners.retrieval import evaluate_retrieval, load_questions, question_rows  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402

SYSTEMS = ("lychee", "passage_rag")
MEMO_TEXTS = 1_000_000  # passages the baseline's embedder keeps across budgets


def tokens_of(label: str) -> float:
    """'100K' -> 1e5, '1M' -> 1e6 (the x-axis); a label without a size sorts by its order."""
    m = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([KkMm]?)", label.strip())
    if not m:
        return float("nan")
    return float(m.group(1)) * {"": 1, "k": 1e3, "m": 1e6}[m.group(2).lower()]


def figures(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Mean gold recall per system, the lead, per ability, over per-question rows."""
    def means(rs: list[dict[str, Any]]) -> dict[str, Any]:
        out: dict[str, Any] = {"questions": len(rs)}
        for s in SYSTEMS:
            out[s] = round(sum(r["systems"][s]["recall"] for r in rs) / len(rs), 4) if rs else None
        out["lead"] = round(out["lychee"] - out["passage_rag"], 4) if rs else None
        return out

    by_ability: dict[str, list[dict[str, Any]]] = defaultdict(list)
    by_conv: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in rows:
        by_ability[r["category"]].append(r)
        by_conv[r["conversation_id"]].append(r)
    return {**means(rows), "per_ability": {a: means(rs) for a, rs in sorted(by_ability.items())},
            "per_conversation": {c: means(rs) for c, rs in sorted(by_conv.items())}}


def latency(data: str, store: str, budget: int) -> dict[str, Any]:
    """``query_latency.py`` on one store in a fresh process (its own peak memory)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "latency.json"
        subprocess.run([sys.executable, str(ROOT / "benchmarks" / "query_latency.py"), "--memory", store, "--data", data,
                        "--format", "beam", "--budget-tokens", str(budget), "--out", str(out)],
                       check=True, stdout=subprocess.DEVNULL)
        rep = json.loads(out.read_text())
    total = rep["stages_ms"]["total"]
    return {"questions": rep["questions"], "p50_ms": total["median"], "p95_ms": total["p95"],
            "peak_rss_mib": rep.get("peak_rss_mib"), "load_ms": rep["conversation_load_ms"],
            "load_avg_1m": rep["machine"]["load_avg_1m"]}


def store_facts(root: Path) -> dict[str, Any]:
    manifest = json.loads((root / "manifest.json").read_text())
    run = manifest.get("last_run") or {}
    return {"path": str(root), "bytes": sum(f.stat().st_size for f in root.rglob("*") if f.is_file()),
            "counts": manifest.get("counts"), "build_wall_s": run.get("wall_s")}


def plot(report: dict[str, Any], path: Path, budget: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = sorted(report["lengths"], key=tokens_of)
    xs = [tokens_of(label) for label in labels]
    per = [report["lengths"][label]["budgets"][budget]["figures"] for label in labels]
    abilities = sorted({a for f in per for a in f["per_ability"]})
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    ax = axes[0]
    for s, style in zip(SYSTEMS, ("o-", "s--"), strict=True):
        ax.plot(xs, [f[s] for f in per], style, label=s)
    ax.set_title(f"gold recall, {budget} tokens")
    ax.set_ylim(0, 1)
    ax.legend()
    ax = axes[1]
    for a in abilities:
        ax.plot(xs, [f["per_ability"].get(a, {}).get("lead") for f in per], "o-", label=a, linewidth=1)
    ax.plot(xs, [f["lead"] for f in per], "k-", linewidth=3, label="all")
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set_title("lead over passage RAG, per ability")
    ax.legend(fontsize=7, ncol=2)
    ax = axes[2]
    lat = [report["lengths"][label]["latency"] for label in labels]
    ax.plot(xs, [v["p95_ms"] for v in lat], "o-", label="p95")
    ax.plot(xs, [v["p50_ms"] for v in lat], "s--", label="p50")
    ax.set_title("query latency (ms, no LLM)")
    ax.set_ylim(bottom=0)
    ax.legend()
    for ax in axes:
        ax.set_xscale("log")
        ax.set_xticks(xs, labels)
        ax.set_xlabel("conversation length (tokens)")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--length", action="append", required=True, metavar="LABEL=DATA:STORE")
    ap.add_argument("--budgets", type=int, nargs="+", default=[1500])
    ap.add_argument("--pool", action="append", default=[], metavar="LABEL,LABEL",
                    help="per-ability figures over these labels' questions together")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--no-latency", action="store_true")
    ap.add_argument("--out", default="benchmarks/results/beam_length.json")
    ap.add_argument("--plot", default=None)
    args = ap.parse_args(argv)
    cfg = load_config(sets=args.set)
    groups: dict[str, list[tuple[str, str]]] = defaultdict(list)
    for spec in args.length:
        label, _, rest = spec.partition("=")
        data, _, store = rest.partition(":")
        groups[label].append((data, store))
    t0 = time.perf_counter()
    doc_embedder = MemoEmbedder(get_embedder(cfg.embedding, cfg.llm), MEMO_TEXTS)
    report: dict[str, Any] = {"budgets": args.budgets, "sets": args.set, "lengths": {}}
    rows_of: dict[tuple[str, int], list[dict[str, Any]]] = defaultdict(list)
    for label, pairs in groups.items():
        entry: dict[str, Any] = {"groups": [], "budgets": {}}
        for data, store in pairs:
            if not Path(store).exists():
                s = build_memory(data, store, format="beam", llm="rules")
                print(f"{label}: built {s.built} conversation(s) in {s.wall_s} s", file=sys.stderr)
            entry["groups"].append({"data": data, "store": store_facts(Path(store))})
            questions = load_questions("beam", data, None)
            with MemoryStore.open(store, cfg, llm="rules") as ms:
                for b in args.budgets:
                    _, results = evaluate_retrieval(ms, questions, b, baselines=["passage_rag"], doc_embedder=doc_embedder)
                    rows_of[(label, b)].extend(question_rows(results))
        for b in args.budgets:
            rows_path = Path(args.out).with_name(f"{Path(args.out).stem}_{label}_{b}.json")
            rows_path.parent.mkdir(parents=True, exist_ok=True)
            rows_path.write_text(json.dumps(rows_of[(label, b)], indent=1), encoding="utf-8")
            entry["budgets"][str(b)] = {"figures": figures(rows_of[(label, b)]), "per_question": str(rows_path)}
            f = entry["budgets"][str(b)]["figures"]
            print(f"{label} @ {b}: lychee {f['lychee']} passage_rag {f['passage_rag']} lead {f['lead']}", file=sys.stderr)
        if not args.no_latency:
            lat = [latency(d, s, args.budgets[len(args.budgets) // 2]) for d, s in pairs]
            entry["latency"] = max(lat, key=lambda v: v["p95_ms"]) if len(lat) > 1 else lat[0]
            entry["latency_per_group"] = lat
        report["lengths"][label] = entry
    for spec in args.pool:
        labels = [x.strip() for x in spec.split(",") if x.strip()]
        report.setdefault("pooled", {})[",".join(labels)] = {
            str(b): figures([r for label in labels for r in rows_of[(label, b)]]) for b in args.budgets}
    report["wall_s"] = round(time.perf_counter() - t0, 1)
    write_result(report, Path(args.out))
    if args.plot and not args.no_latency:
        plot(report, Path(args.plot), str(args.budgets[len(args.budgets) // 2]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
