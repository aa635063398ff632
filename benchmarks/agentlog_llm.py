"""Agent logs on the LLM path against a real model (issue 35; not run in CI).

    ../shared/tools/local-llm.sh start
    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=sk-local LYCHEE_LLM_MODEL=local \\
      python benchmarks/agentlog_llm.py --data ../shared/data/agentlogs/tau_airline_dev.jsonl --conversations 3 \\
        --out benchmarks/results/agentlog_llm.json

Builds the first ``--conversations`` trajectories twice — the ``openai`` encoder against the
configured endpoint and the offline ``rules`` encoder — and writes for both stores: encode calls,
prompt / completion tokens (the system prompt is encoded once per distinct text: its calls are
counted apart), failed segments (replies that did not parse or broke the schema after the
retries), records per type, attribution by role (eval/metrics/attribution.py), the share of the
tool results' identifiers (ids, codes, e-mails, amounts) that some record keeps verbatim, and
answer-in-context on the tool-traffic questions of those conversations at ``--budget`` tokens.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.ingest.runner import run_local_build_items  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.eval.metrics.attribution import AttributionFigures, measure_attribution  # noqa: E402
from lychee_ray.eval.runners.retrieval import evaluate_retrieval, load_questions  # noqa: E402
from lychee_ray.io.adapters import detect_format, read_input  # noqa: E402
from lychee_ray.io.store import StoreReader  # noqa: E402
from lychee_ray.memory import MemoryStore  # noqa: E402
from lychee_ray.text.lexical import identifier_terms  # noqa: E402


def store_figures(root: Path) -> dict[str, Any]:
    reader = StoreReader(root)
    types: Counter[str] = Counter()
    attribution = AttributionFigures()
    idents = kept = 0
    failed = segments = prompt_segments = 0
    for cid in reader.conversation_ids():
        d = reader.load(cid)
        recs, turns, segs = d.records.to_pylist(), d.turns.to_pylist(), d.segments.to_pylist()
        types.update(r["type"] for r in recs)
        attribution.add(measure_attribution(recs, turns, d.user_id))
        segments += len(segs)
        failed += sum(s["status"] != "ok" for s in segs)
        prompt_segments += sum(s["close_reason"] == "system_prompt" for s in segs)
        record_terms = {t for r in recs for t in identifier_terms(r["text"])}
        for t in turns:
            if t["role"] == "tool":
                ids = set(identifier_terms(t["content"]))
                idents += len(ids)
                kept += len(ids & record_terms)
    m = reader.manifest
    return {"segments": segments, "system_prompt_segments": prompt_segments, "failed_segments": failed,
            "records": sum(types.values()), "per_type": dict(sorted(types.items())),
            "attribution": attribution.to_dict(), "tool_identifiers": idents,
            "tool_identifiers_kept_verbatim_share": round(kept / max(1, idents), 4),
            "tokens": m.get("tokens", {}), "quality": m.get("quality")}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", required=True)
    ap.add_argument("--conversations", type=int, default=3, help="the first N conversations of --data")
    ap.add_argument("--work", default="benchmarks/results/agentlog_llm_stores")
    ap.add_argument("--budget", type=int, default=1500)
    ap.add_argument("--set", dest="sets", action="append", default=[], help="config override for the openai build")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    fmt = detect_format(args.data).format
    items = [i for i in read_input(fmt, args.data) if i.conversation is not None][: args.conversations]
    ids = {i.conversation.conversation_id for i in items}
    questions = [q for q in load_questions(fmt, args.data, None) if q.conversation_id in ids]
    out: dict[str, Any] = {"data": args.data, "conversations": sorted(ids), "questions": len(questions)}
    for backend in ("openai", "rules"):
        cfg = load_config(sets=args.sets if backend == "openai" else [])
        root = Path(args.work) / backend
        t0 = time.perf_counter()
        summary = run_local_build_items(cfg, iter(items), root, backend=backend)
        wall = time.perf_counter() - t0
        figs = store_figures(root)
        with MemoryStore.open(root, cfg, llm="rules") as store:
            report, _ = evaluate_retrieval(store, questions, args.budget, baselines=["hybrid_rag"])
        out[backend] = {"built": summary.built, "failed": summary.failed, "wall_s": round(wall, 1),
                        "llm_calls": summary.llm_calls, "prompt_tokens": summary.prompt_tokens,
                        "completion_tokens": summary.completion_tokens, **figs,
                        "answer_in_context": report["lychee"]["answer_in_context"],
                        "hybrid_rag_answer_in_context": report["hybrid_rag"]["answer_in_context"]}
        print(backend, json.dumps(out[backend], indent=1), flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(out, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
