"""PNG plots of ``lychee-ray eval`` results (matplotlib, Agg backend, no display).

- ``accuracy_vs_construction.png`` — judge accuracy (evidence recall when there is no judge)
  against construction tokens per conversation, one labelled point per variant;
- ``per_category.png`` — the same metric per category, grouped bars per variant;
- ``coverage.png`` — id coverage, content coverage at every threshold and answer-in-context per variant;
- ``query_tokens.png`` — query tokens per question per variant.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lychee_ray.eval.metrics.context import thresholds_key
from lychee_ray.names import RUBRIC_JUDGE


def headline_metric(results: dict[str, Any]) -> tuple[str, str]:
    """(key, label) of the metric the plots show: the rubric score or judge accuracy, else evidence recall."""
    judge = results.get("judge", {})
    if judge.get("enabled") and judge.get("protocol") == RUBRIC_JUDGE:
        return "rubric_score", "rubric score"
    if judge.get("enabled"):
        return "judge_accuracy", "judge accuracy"
    label = "answer-session recall" if results.get("evidence_unit") == "answer session" else "evidence recall"
    return "evidence_recall", label


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
        pos = np.arange(len(order))
        for i, (name, r) in enumerate(vs.items()):
            pc = r.get("per_category") or {}
            ys = [100 * (pc.get(c, {}).get(key) or 0.0) for c in order]
            ax.bar(pos + i * width - 0.4 + width / 2, ys, width, label=name)
        ax.set_xticks(pos)
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

    keys = [("evidence_recall", "id coverage")] + [
        (thresholds_key(t), f"content ≥{int(round(100 * t))}%") for t in results.get("content_thresholds") or []
    ] + [("answer_in_context", "answer in context")]
    keys = [(k, lab) for k, lab in keys if any(r.get(k) is not None for r in vs.values())]
    if keys:
        import numpy as np

        fig, ax = plt.subplots(figsize=(max(7, 1.2 * len(vs) + 3), 4.5))
        width = 0.8 / len(keys)
        pos = np.arange(len(vs))
        for i, (k, lab) in enumerate(keys):
            ax.bar(pos + i * width - 0.4 + width / 2, [100 * (r.get(k) or 0.0) for r in vs.values()], width, label=lab)
        ax.set_xticks(pos)
        ax.set_xticklabels(list(vs), rotation=15, fontsize=8)
        ax.set_ylabel("% of questions / gold turns")
        ax.set_title(f"{results['dataset']}: what the context contains")
        ax.set_ylim(0, 125)
        ax.legend(fontsize=8, ncol=min(4, len(keys)), loc="upper center")
        ax.grid(axis="y", alpha=0.3)
        fig.tight_layout()
        fig.savefig(run_dir / "coverage.png", dpi=110)
        plt.close(fig)
        out.append("coverage.png")

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


__all__ = ["headline_metric", "plot"]
