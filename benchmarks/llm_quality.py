"""Memory quality on the LLM path against a real model (issue 16; not run in CI).

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=sk-local LYCHEE_LLM_MODEL=local \\
      python benchmarks/llm_quality.py --conversations locomo-26 --sessions 3 --out benchmarks/results/llm_quality.json

Builds the first ``--sessions`` sessions of each named LoCoMo conversation twice — with the
``openai`` encoder against whatever endpoint is configured, and with the offline ``rules`` encoder —
and writes, for both stores:

- calls, prompt / completion tokens (total and per turn) from the build summary;
- the build's own quality figures (records rejected by reason, repairs, degenerate segments) from
  ``manifest.json``;
- the figures measured from the outside by :mod:`lychee_ray.eval.metrics.record_quality` (duplicates of an
  earlier record, records sharing no content word with their source turns, empty entities);
- evidence recall (``lychee-ray eval-retrieval``'s id recall, rules planner) on the LoCoMo questions
  whose gold evidence lies inside the built sessions.

``--set KEY=VALUE`` overrides config for the ``openai`` build (e.g. ``encoder.guard.enabled=false``
for the before/after comparison); see docs/llm-quality.md.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.ingest.runner import run_local_build_items  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.core.conversation import Conversation, QAItem  # noqa: E402
from lychee_ray.eval.metrics.record_quality import measure_store  # noqa: E402
from lychee_ray.eval.runners.retrieval import evaluate_retrieval  # noqa: E402
from lychee_ray.io.adapters import AdapterItem, read_input  # noqa: E402
from lychee_ray.io.store import StoreReader  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402

DEFAULT_LOCOMO = ROOT.parent / "shared" / "data" / "locomo"
EVIDENCE_CATEGORIES = ("1", "2", "3", "4")


def load_slice(data: Path, ids: list[str], sessions: int) -> tuple[list[Conversation], list[QAItem]]:
    """The first ``sessions`` sessions of each named conversation and the questions answerable there."""
    convs: list[Conversation] = []
    questions: list[QAItem] = []
    for f in sorted(data.glob("*.json")):
        for item in read_input("locomo", f):
            c = item.conversation
            if c is None or c.conversation_id not in ids:
                continue
            cut = c.model_copy(update={"sessions": c.sessions[:sessions] if sessions > 0 else c.sessions})
            kept = {t.turn_id for *_, t in cut.iter_turns()}
            convs.append(cut)
            questions += [q for q in item.qa if q.category in EVIDENCE_CATEGORIES and q.evidence
                          and set(q.evidence) <= kept]
    missing = sorted(set(ids) - {c.conversation_id for c in convs})
    if missing:
        raise SystemExit(f"unknown conversation id(s) in {data}: {', '.join(missing)}")
    return convs, questions


def build_and_measure(convs: list[Conversation], questions: list[QAItem], out: Path, backend: str,
                      sets: list[str]) -> dict[str, Any]:
    """Build one store and collect every figure the issue asks for."""
    cfg = load_config(sets=sets)
    t0 = time.perf_counter()
    summary = run_local_build_items(cfg, [AdapterItem(file="<slice>", conversation=c) for c in convs], out, backend=backend)
    wall = time.perf_counter() - t0
    turns = sum(c.num_turns for c in convs)
    manifest = StoreReader(out).manifest
    measured = measure_store(out, cfg.eval.near_duplicate_jaccard)
    store = MemoryStore.open(out, config=cfg, llm="rules")
    try:
        report, _ = evaluate_retrieval(store, questions, baselines=[])
    finally:
        store.close()
    return {
        "backend": backend,
        "sets": sets,
        "wall_s": round(wall, 1),
        "summary": summary.to_dict(),
        "tokens_per_turn": {
            "prompt": round(summary.prompt_tokens / max(1, turns), 1),
            "completion": round(summary.completion_tokens / max(1, turns), 1),
        },
        "build_quality": manifest.get("quality", {}),
        "measured": measured["total"],
        "measured_per_conversation": measured["conversations"],
        "evidence_recall": report["lychee"].get("recall"),
        "questions": report["questions"],
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--conversations", required=True, help="comma-separated LoCoMo conversation ids (e.g. locomo-26)")
    ap.add_argument("--sessions", type=int, default=3, help="first N sessions of each conversation (0 = all)")
    ap.add_argument("--data", default=str(DEFAULT_LOCOMO), help="directory of LoCoMo *.json files")
    ap.add_argument("--work", default="benchmarks/results/llm_quality_stores", help="where the two stores are built")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="config override for the openai build")
    ap.add_argument("--label", default="", help="name of this run in the output JSON")
    ap.add_argument("--skip-rules", action="store_true", help="only the openai build")
    ap.add_argument("--out", required=True, help="JSON file to write (a list of runs is appended to)")
    args = ap.parse_args(argv)

    ids = [x.strip() for x in args.conversations.split(",") if x.strip()]
    convs, questions = load_slice(Path(args.data), ids, args.sessions)
    cfg = load_config()
    if not cfg.llm.base_url and not cfg.llm.api_key:
        raise SystemExit("no LLM endpoint configured: set OPENAI_BASE_URL (and LYCHEE_LLM_MODEL) — see docs/llm-quality.md")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    work = Path(args.work) / f"{args.label or 'run'}-{stamp}"
    run: dict[str, Any] = {
        "label": args.label,
        "conversations": ids,
        "sessions": args.sessions,
        "turns": sum(c.num_turns for c in convs),
        "endpoint": cfg.llm.base_url,
        "model": cfg.llm.model,
        "machine": platform.node(),
        "openai": build_and_measure(convs, questions, work / "openai", "openai", args.sets),
    }
    if not args.skip_rules:
        run["rules"] = build_and_measure(convs, questions, work / "rules", "rules", [])
    out = Path(args.out)
    runs = json.loads(out.read_text()) if out.exists() else []
    runs.append(run)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(runs, indent=1))
    for name in ("openai", "rules"):
        if name in run:
            m = run[name]["measured"]
            print(f"{name:7s} records {m['records']:4d}  rec/seg {m['records_per_segment']:5.2f}  "
                  f"dup {m['duplicate_earlier_share']:.0%}  near-dup {m['near_duplicate_earlier_share']:.0%}  "
                  f"no-shared-word {m['no_shared_word_share']:.0%}  empty-entities {m['empty_entities_share']:.0%}  "
                  f"evidence recall {run[name]['evidence_recall']}  failed segments {m['segments_failed']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
