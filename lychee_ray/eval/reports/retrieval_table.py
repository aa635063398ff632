"""Markdown tables of an ``eval-retrieval`` report: overall, per split, per category (per split).

One row per system (lychee, then the baselines); columns id coverage, all gold covered, content
coverage (the mean share of the gold turns' content words, then the share of gold turns at every
threshold), id coverage of each role's gold turns (when the gold has more than one role),
answer-in-context, context tokens (as the answer prompt shows them), plain tokens, their ratio (plain
share) and query prompt tokens (planner + answer prompt; mean and median). A report without splits
has a table per conversation.
"""

from __future__ import annotations

from typing import Any

from lychee_ray.eval.metrics.context import thresholds_key


def _f(x: float | None) -> str:
    return "—" if x is None else f"{x:.4f}"


def _t(x: float | None) -> str:
    return "—" if x is None else f"{x:,.0f}"


def _roles(report: dict[str, Any]) -> list[str]:
    systems = report.get("systems") or []
    roles = sorted({r for n in systems for r in (report[n].get("gold_role_recall") or {})})
    return roles if len(roles) > 1 else []


def _columns(report: dict[str, Any]) -> list[tuple[str, str]]:
    cols = [("recall", "id cov."), ("all", "all gold"), ("content_coverage", "content cov.")]
    cols += [(thresholds_key(t), f"content ≥{int(round(100 * t))}%") for t in report.get("content_thresholds", [])]
    cols += [(f"role:{r}", f"{r} gold") for r in _roles(report)]
    cols += [("answer_in_context", "answer in ctx"), ("context_tokens", "ctx tok"), ("plain_tokens", "plain tok"),
             ("plain_share", "plain share"), ("query_prompt_tokens", "query prompt tok"),
             ("query_prompt_tokens_median", "median")]
    return cols


def _value(summary: dict[str, Any], key: str) -> Any:
    if key.startswith("role:"):
        return ((summary.get("gold_role_recall") or {}).get(key[5:]) or {}).get("recall")
    return summary.get(key)


def _table(rows: list[tuple[str, dict[str, Any]]], cols: list[tuple[str, str]]) -> list[str]:
    head = ["system", "questions", *[label for _, label in cols]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, s in rows:
        cells = [(_t if k.endswith(("tokens", "median")) else _f)(_value(s, k)) for k, _ in cols]
        lines.append("| " + " | ".join([f"`{name}`", str(s.get("questions", 0)), *cells]) + " |")
    return lines


def retrieval_markdown(report: dict[str, Any]) -> str:
    """The report's tables as Markdown."""
    systems = report.get("systems") or [k for k in ("lychee",) if k in report]
    cols = _columns(report)
    out = [f"# eval-retrieval — budget {report.get('budget_tokens')} tokens, {report.get('questions')} questions", ""]
    if report.get("serialisation"):
        out += [f"Serialisation: {report['serialisation']}.", ""]
    out += ["## Overall", "", *_table([(n, report[n]) for n in systems], cols), ""]
    splits = sorted({s for n in systems for s in (report[n].get("per_split") or {})})
    for sp in splits:
        out += [f"## Split: {sp}", "", *_table([(n, report[n]["per_split"][sp]) for n in systems
                                                 if sp in (report[n].get("per_split") or {})], cols), ""]
    scopes: list[tuple[str, dict[str, dict[str, Any]]]] = [("all", {n: report[n] for n in systems})]
    scopes += [(sp, {n: report[n]["per_split"][sp] for n in systems if sp in (report[n].get("per_split") or {})})
               for sp in splits]
    convs = list(dict.fromkeys(c for n in systems for c in (report[n].get("per_conversation") or {})))
    for c in convs:
        out += [f"## Conversation {c}", "", *_table([(n, report[n]["per_conversation"][c]) for n in systems
                                                      if c in (report[n].get("per_conversation") or {})], cols), ""]
    fits = [(n, report[n]) for n in systems if "fits_budget" in report[n]]
    for n, s in fits:
        out += [f"`{n}` fits the budget for {s['fits_budget']} of {s.get('questions', 0)} questions"
                + ("" if s.get("at_budget") else " (n/a at this budget: its figures above are the unbudgeted ceiling)")
                + ".", ""]
    for scope, by_system in scopes:
        cats = sorted({c for s in by_system.values() for c in (s.get("per_category") or {})}, key=lambda c: (len(c), c))
        for c in cats:
            rows = [(n, s["per_category"][c]) for n, s in by_system.items() if c in (s.get("per_category") or {})]
            out += [f"### Category {c} ({scope})", "", *_table(rows, cols), ""]
    return "\n".join(out)


__all__ = ["retrieval_markdown"]
