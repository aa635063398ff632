"""``RUN_DIR/report.md`` and PNG plots from ``results.json`` (matplotlib, Agg backend, no display).

Tables: one row per variant (accuracy or "no judge", evidence recall, F1, BLEU-1, construction
tokens per conversation, query tokens per question, LLM calls, wall time, store size, index build
time) with the paper's published LoCoMo figure beside it; one table per metric × category; the
paper's reference numbers (LoCoMo, GPT-4.1-mini). Plots:

- ``accuracy_vs_construction.png`` — judge accuracy (evidence recall when there is no judge)
  against construction tokens per conversation, one labelled point per variant;
- ``per_category.png`` — the same metric per category, grouped bars per variant;
- ``query_tokens.png`` — query tokens per question per variant.

Rewriting the report only needs the JSON: ``write_report(run_dir, json.load(open(run_dir/"results.json")))``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .variants import PAPER_LYCHEE_ACC, PAPER_OTHERS, VARIANTS


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.2f}%"


def _num(x: float | None, nd: int = 3) -> str:
    return "—" if x is None else f"{x:.{nd}f}"


def _tok(x: float | None) -> str:
    if x is None:
        return "—"
    return f"{x / 1000:.1f}K" if x >= 1000 else f"{x:.0f}"


def _bytes(n: int | None) -> str:
    if not n:
        return "0"
    for unit in ("B", "KB", "MB", "GB"):
        if n < 1024 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return str(n)


def headline_metric(results: dict[str, Any]) -> tuple[str, str]:
    """(key, label) of the metric the plots show: judge accuracy, else evidence recall."""
    if results.get("judge", {}).get("enabled"):
        return "judge_accuracy", "judge accuracy"
    label = "answer-session recall" if results.get("evidence_unit") == "answer session" else "evidence recall"
    return "evidence_recall", label


def paper_cell(name: str, results: dict[str, Any]) -> str:
    if results.get("dataset") != "locomo":
        return "—"
    v = VARIANTS.get(name)
    if v is None or "accuracy" not in v.paper:
        return "—"
    s = f"{v.paper['accuracy']:.2f}%"
    return s + ("*" if "derived" in v.paper else "")


def markdown(results: dict[str, Any], plots: list[str]) -> str:
    ds, backend = results["dataset"], results["backend"]
    judge = results.get("judge") or {}
    vs: dict[str, Any] = results["variants"]
    key, label = headline_metric(results)
    lines = [f"# lychee-ray eval — {ds}", ""]
    lines.append(f"- backend: **{backend}**; conversations: {len(results.get('conversations', []))}; questions: "
                 f"{results.get('questions')}" + (f" (first {results['limit_per_conversation']} per conversation)"
                                                  if results.get("limit_per_conversation") else ""))
    if judge.get("enabled"):
        lines.append(f"- judge: LLM judge `{judge.get('model')}` (CORRECT/WRONG, temperature 0, lenient on wording and dates)")
    else:
        lines.append("- judge: **none** — the rules backend has no LLM, so no accuracy is reported (judge_accuracy = null). "
                     "Evidence recall, token F1 and BLEU-1 need no LLM.")
    if ds == "longmemeval":
        lines.append("- evidence recall = **answer-session recall**: share of the gold answer sessions that the selected "
                     "evidence comes from (abstention questions excluded; they are scored by abstention accuracy).")
    else:
        lines.append("- evidence recall = share of the gold evidence turns covered by the selected context.")
    lines.append(f"- context budget: {results.get('budget_tokens')} tokens; written {results.get('written_at')}; "
                 f"run wall time {results.get('wall_s')} s")
    lines.append("- F1 / BLEU-1 on normalised answers (lowercase, punctuation and articles a/an/the removed).")
    lines.append("")
    lines.append("## Variants")
    lines.append("")
    head = ["variant", "judge acc.", "paper (LoCoMo)", "evidence recall", "F1", "BLEU-1", "constr. tok/conv",
            "query tok/q", "LLM calls", "wall s", "store", "index build s"]
    lines.append("| " + " | ".join(head) + " |")
    lines.append("|" + "---|" * len(head))
    for name, r in vs.items():
        est = "~" if (r.get("construction_tokens") or {}).get("estimated") else ""
        qest = "~" if (r.get("query_tokens") or {}).get("estimated") else ""
        acc = _pct(r.get("judge_accuracy")) if judge.get("enabled") else "no judge"
        lines.append("| " + " | ".join([
            f"`{name}`", acc, paper_cell(name, results), _pct(r.get("evidence_recall")), _num(r.get("f1")),
            _num(r.get("bleu1")), est + _tok(r.get("construction_tokens_per_conversation")),
            qest + _tok(r.get("query_tokens_per_question")), str(r.get("llm_calls", "—")), _num(r.get("wall_s"), 1),
            _bytes(r.get("store_bytes")), _num(r.get("index_build_s"), 1),
        ]) + " |")
    lines.append("")
    lines.append("`~` = offline token estimate (the rules backend calls no LLM: construction = the encode prompts and "
                 "records the openai encoder would send/receive for the same segments; query = the plan and answer "
                 "prompts the openai backend would send). `*` = paper figure derived from a reported delta to lychee "
                 "(89.22%). Wall time = store build (shared by variants on the same store) + question pipeline.")
    if any(r.get("abstention_questions") for r in vs.values()):
        lines.append("")
        lines.append("| variant | abstention questions | abstention accuracy |")
        lines.append("|---|---|---|")
        for name, r in vs.items():
            if r.get("abstention_questions"):
                lines.append(f"| `{name}` | {r['abstention_questions']} | {_pct(r.get('abstention_accuracy'))} |")
    # per category tables
    cats: dict[str, str] = {}
    for r in vs.values():
        for c, pc in (r.get("per_category") or {}).items():
            cats.setdefault(c, pc.get("name", c))
    order = sorted(cats, key=lambda c: (len(c), c))
    metrics = ([("judge_accuracy", "judge accuracy")] if judge.get("enabled") else []) + [
        ("evidence_recall", "evidence recall" if ds != "longmemeval" else "answer-session recall"), ("f1", "F1"),
        ("bleu1", "BLEU-1")]
    lines.append("")
    lines.append("## Per category")
    for mkey, mlabel in metrics:
        lines.append("")
        lines.append(f"### {mlabel}")
        lines.append("")
        head = ["variant"] + [f"{c} {cats[c]}" if cats[c] != c else c for c in order]
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        counts = ["questions"] + [str(next((r["per_category"][c]["questions"] for r in vs.values()
                                             if c in (r.get("per_category") or {})), 0)) for c in order]
        lines.append("| " + " | ".join(counts) + " |")
        for name, r in vs.items():
            pc = r.get("per_category") or {}
            fmt = _pct if mkey in ("judge_accuracy", "evidence_recall") else _num
            cells = [fmt(pc[c].get(mkey)) if c in pc else "—" for c in order]
            lines.append("| " + " | ".join([f"`{name}`", *cells]) + " |")
    # paper reference
    lines.append("")
    lines.append("## Paper reference (LoCoMo, GPT-4.1-mini)")
    lines.append("")
    lines.append("| system | accuracy | construction tokens / conversation | query tokens / question |")
    lines.append("|---|---|---|---|")
    lines.append(f"| LycheeMemory V2 | {PAPER_LYCHEE_ACC:.2f}% | 204.1K | 4.01K |")
    lines.append("| Full Context | 84.80% | — | — |")
    for name, p in PAPER_OTHERS.items():
        lines.append(f"| {name} | {p['accuracy']:.2f}% | {_tok(p.get('construction_tokens'))} | — |")
    lines.append("| ablation: eager per-turn construction | 81.88% (−7.34pp) | +316% (≈849K) | — |")
    lines.append("| ablation: fixed windows | 82.40% | 174.7K | — |")
    lines.append("| ablation: summary-level records | 80.78% (−8.44pp) | — | — |")
    lines.append("| ablation: record-vector recall only | 81.75% (−7.47pp) | — | — |")
    lines.append("| ablation: no fusion / rerank / diversity | 66.62% | — | — |")
    lines.append("")
    lines.append("Our numbers use a different embedding model (offline MiniLM), and with the rules backend no LLM at "
                 "all, so only the relative order of variants is comparable with the paper.")
    if plots:
        lines.append("")
        lines.append("## Plots")
        for p in plots:
            lines.append("")
            lines.append(f"![{p}]({p})")
    stores = results.get("stores") or {}
    if stores:
        lines.append("")
        lines.append("## Stores")
        lines.append("")
        for k, s in stores.items():
            extra = f" (reused from {s['reused_from']})" if s.get("reused_from") else ""
            fails = f"; failed conversations: {', '.join(s['failed_conversations'])}" if s.get("failed_conversations") else ""
            lines.append(f"- `{k}`: {s['path']}{extra}; backend {s['backend']}; fingerprint `{s['fingerprint']}`{fails}")
    lines.append("")
    return "\n".join(lines)


def plot(results: dict[str, Any], run_dir: Path) -> list[str]:
    """Write the PNG plots; returns their file names (relative to ``run_dir``)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    vs: dict[str, Any] = results["variants"]
    if not vs:
        return []
    key, label = headline_metric(results)
    out: list[str] = []
    backend = results.get("backend")
    est = any((r.get("construction_tokens") or {}).get("estimated") for r in vs.values())

    fig, ax = plt.subplots(figsize=(7, 4.5))
    pts = [(name, (r.get("construction_tokens_per_conversation") or 0) / 1000.0, 100 * r[key])
           for name, r in vs.items() if r.get(key) is not None]
    span = max([x for _, x, _ in pts] + [1.0])
    groups: list[list[tuple[str, float, float]]] = []
    for p in pts:  # variants at (almost) the same point share one label instead of overprinting
        near = next((g for g in groups if abs(g[0][1] - p[1]) <= 0.04 * span and abs(g[0][2] - p[2]) <= 1.5), None)
        (near.append(p) if near is not None else groups.append([p]))
    for i, g in enumerate(groups):
        xs, ys = [p[1] for p in g], [p[2] for p in g]
        ax.scatter(xs, ys, s=60)
        ax.annotate(", ".join(p[0] for p in g), (xs[0], ys[0]), textcoords="offset points",
                    xytext=(6, 6 if i % 2 == 0 else -12), fontsize=8)
    ax.set_xlabel("construction tokens per conversation (K)" + (" — offline estimate" if est else ""))
    ax.set_ylabel(f"{label} (%)")
    ax.set_title(f"{results['dataset']} ({backend}): {label} vs construction cost")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(run_dir / "accuracy_vs_construction.png", dpi=110)
    plt.close(fig)
    out.append("accuracy_vs_construction.png")

    cats: dict[str, str] = {}
    for r in vs.values():
        for c, pc in (r.get("per_category") or {}).items():
            cats.setdefault(c, pc.get("name", c))
    order = sorted(cats, key=lambda c: (len(c), c))
    if order:
        import numpy as np

        fig, ax = plt.subplots(figsize=(max(7, 1.4 * len(order) + 3), 4.5))
        width = 0.8 / max(1, len(vs))
        xs = np.arange(len(order))
        for i, (name, r) in enumerate(vs.items()):
            pc = r.get("per_category") or {}
            ys = [100 * (pc.get(c, {}).get(key) or 0.0) for c in order]
            ax.bar(xs + i * width - 0.4 + width / 2, ys, width, label=name)
        ax.set_xticks(xs)
        ax.set_xticklabels([cats[c] if cats[c] == c else f"{c} {cats[c]}" for c in order], rotation=15, fontsize=8)
        ax.set_ylabel(f"{label} (%)")
        ax.set_title(f"{results['dataset']} ({backend}): {label} per category")
        ax.set_ylim(0, 100 * max(1.0, max((pc.get(key) or 0.0) for r in vs.values()
                                              for pc in (r.get("per_category") or {}).values())) * 1.25)
        ax.legend(fontsize=8, ncol=min(4, len(vs)), loc="upper center")
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(run_dir / "per_category.png", dpi=110)
        plt.close(fig)
        out.append("per_category.png")

    fig, ax = plt.subplots(figsize=(7, 4))
    names = list(vs)
    ax.bar(names, [(vs[n].get("query_tokens_per_question") or 0) / 1000.0 for n in names], color="tab:green")
    ax.set_ylabel("query tokens per question (K)")
    ax.set_title("query cost (plan + answer, prompt + completion)")
    ax.tick_params(axis="x", labelrotation=20, labelsize=8)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(run_dir / "query_tokens.png", dpi=110)
    plt.close(fig)
    out.append("query_tokens.png")
    return out


def write_report(run_dir: str | Path, results: dict[str, Any] | None = None) -> Path:
    """Write ``report.md`` and the plots into ``run_dir`` (results read from results.json when not given)."""
    run_dir = Path(run_dir)
    if results is None:
        results = json.loads((run_dir / "results.json").read_text(encoding="utf-8"))
    plots = plot(results, run_dir)
    path = run_dir / "report.md"
    path.write_text(markdown(results, plots), encoding="utf-8")
    return path


__all__ = ["headline_metric", "markdown", "plot", "write_report"]
