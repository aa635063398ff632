"""Records an LLM writes for a few turns of BEAM assistant chats (code, drafts), against a real model.

    OPENAI_BASE_URL=http://127.0.0.1:8765/v1 OPENAI_API_KEY=sk-local LYCHEE_LLM_MODEL=local \
      python benchmarks/beam_llm_slice.py --data ../shared/data/beam/100K --slice 1:4:6 --slice 8:2:4 \
        --set llm.timeout_s=1500 --set llm.max_attempts=1 --out benchmarks/results/beam_llm_slice.json

Each ``--slice FOLDER:FROM:TO`` keeps the turns ``FROM`` ≤ i < ``TO`` (0-based, across sessions) of
the BEAM conversation in ``FOLDER`` as a conversation of its own (``FOLDER:FROM:TO,FROM:TO``: several
ranges of it, in order — a statement and its later update, e.g. ``10:22:24,64:66``; each range is
segmented on its own, as a session of its own chat would be, so the second one's encode call gets the
first one's slotted records as candidates (``encoder.currency``) and every link shows in ``links``), builds them with the ``openai``
encoder against whatever endpoint is configured (``--set`` overrides config, e.g.
``encoder.artifact_floor=false`` for the model's records alone), and writes every record (type,
artifact kind, text) with the build's calls, tokens and quality report. Slow with a CPU model
(minutes per segment): a plumbing and cost check, not an accuracy claim; keep it out of CI.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.api import build_memory  # noqa: E402
from lychee_ray.config import load_config  # noqa: E402
from lychee_ray.core.conversation import Conversation  # noqa: E402
from lychee_ray.io.adapters import read_input  # noqa: E402
from lychee_ray.io.store import StoreReader  # noqa: E402
from lychee_ray.names import OPENAI_BACKEND  # noqa: E402
from lychee_ray.testing.results import write_result  # noqa: E402


def turn_slice(data: Path, spec: str) -> Conversation:
    """``FOLDER:FROM:TO[,FROM:TO...]`` → that conversation's turns of those ranges, in their sessions."""
    folder, _, ranges = spec.partition(":")
    spans = [tuple(int(x) for x in r.split(":")) for r in ranges.split(",")]
    conv = next(iter(read_input("beam", data / folder))).conversation
    n, sessions = 0, []
    for s in conv.sessions:
        keep: dict[int, list[Any]] = {}
        for t in s.turns:
            for k, (lo, hi) in enumerate(spans):
                if lo <= n < hi:
                    keep.setdefault(k, []).append(t)
            n += 1
        # a range is a session of its own (its own id): the segmenter cuts between ranges
        sessions += [s.model_copy(update={"session_id": f"{s.session_id}.{k}" if len(spans) > 1 else s.session_id,
                                          "turns": ts}) for k, ts in sorted(keep.items())]
    if not sessions:
        raise SystemExit(f"--slice {spec}: no turns in that range ({n} turns)")
    name = "-".join(f"{lo}-{hi}" for lo, hi in spans)
    return conv.model_copy(update={"conversation_id": f"beam-{folder}-{name}", "sessions": sessions})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", type=Path, required=True, help="BEAM folder (a folder per conversation)")
    ap.add_argument("--slice", action="append", required=True, help="FOLDER:FROM:TO (0-based turns, TO excluded)")
    ap.add_argument("--set", dest="sets", action="append", default=[], help="config override KEY=VALUE")
    ap.add_argument("--work", type=Path, default=None, help="store folder (default: a temporary one)")
    ap.add_argument("--out", required=True, help="JSON result file")
    args = ap.parse_args()
    convs = [turn_slice(args.data, s) for s in args.slice]
    work = args.work or Path(tempfile.mkdtemp(prefix="beam-llm-"))
    summary = build_memory(convs, work / "store", config=load_config(sets=args.sets), llm=OPENAI_BACKEND)
    reader = StoreReader(work / "store")
    records: dict[str, list[dict[str, Any]]] = {}
    for cid in reader.conversation_ids():
        rows = reader.load(cid).records.to_pylist()
        records[cid] = [{"id": r["record_id"], "type": r["type"], "artifact": r.get("artifact"), "text": r["text"],
                         "turns": r["source_turn_ids"], "slot": r.get("slot"), "value": r.get("slot_value"),
                         "supersedes": r.get("supersedes") or [], "conflicts_with": r.get("conflicts_with") or []}
                        for r in rows]
    run = reader.manifest.get("last_run", {})
    write_result({"slices": args.slice, "sets": args.sets, "built": summary.built, "failed": summary.failed,
                  "llm_calls": run.get("llm_calls"), "prompt_tokens": run.get("prompt_tokens"),
                  "completion_tokens": run.get("completion_tokens"), "quality": run.get("quality"),
                  "errors": reader.errors().to_pylist(), "records": records, "store": str(work / "store"),
                  "links": [{"record": r["text"], "supersedes": r["supersedes"], "conflicts_with": r["conflicts_with"]}
                            for rs in records.values() for r in rs if r["supersedes"] or r["conflicts_with"]]}, args.out)


if __name__ == "__main__":
    main()
