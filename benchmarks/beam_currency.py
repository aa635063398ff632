"""BEAM currency figures per group of conversations, from ``eval-retrieval --per-question`` JSON.

The fitting protocol of docs/current-memory.md: rules and thresholds are chosen on BEAM 100K dev
conversations 1–5 and reported on 6–10 (and the 500K conversations), so the figures are given per
group. For each group: gold recall over all questions, and the knowledge-update / contradiction
scores (eval/metrics/beam_current.py) averaged over the questions where each applies.

    python benchmarks/beam_currency.py --eval R.json [--eval R500.json ...] \\
        --group fit=beam-1,beam-2,beam-3,beam-4,beam-5 --group report=beam-6,...,beam-10 --out OUT.json
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SCORES = ("updated_in_context", "updated_marked", "stale_unmarked", "stale_message_unmarked",
          "contradiction_in_context", "contradiction_marked")


def summarise(details: list[dict], system: str = "lychee") -> dict:
    out: dict = {"questions": len(details)}
    rec = [q["systems"][system]["recall"] for q in details if q["systems"][system].get("recall") is not None]
    out["recall"] = round(sum(rec) / len(rec), 4) if rec else None
    for name in SCORES:
        vals = [q["systems"][system].get("current", {}).get(name) for q in details]
        vals = [v for v in vals if v is not None]
        out[name] = {"mean": round(sum(vals) / len(vals), 3) if vals else None, "n": len(vals)}
    tokens = sorted(q["systems"][system].get("query_prompt_tokens") or 0 for q in details)
    out["query_prompt_tokens_median"] = tokens[len(tokens) // 2] if tokens else None
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--eval", action="append", required=True, metavar="JSON", help="eval-retrieval --per-question output")
    p.add_argument("--group", action="append", default=[], metavar="NAME=CID,CID",
                   help="a group of conversation ids (default: one group per file)")
    p.add_argument("--out", default=None)
    args = p.parse_args()
    report: dict = {}
    for path in args.eval:
        details = json.loads(Path(path).read_text(encoding="utf-8"))["details"]
        groups = [g.split("=", 1) for g in args.group] or [(Path(path).stem, "")]
        for name, cids in groups:
            want = set(filter(None, cids.split(",")))
            sel = [q for q in details if not want or q["conversation_id"] in want]
            if sel:
                report[f"{Path(path).stem}:{name}"] = summarise(sel)
    text = json.dumps(report, indent=1)
    print(text)
    if args.out:
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
        Path(args.out).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
