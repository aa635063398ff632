"""A random sample of the links a store's records carry, to judge by hand (docs/current-memory.md
"The 100-link sample"; not run in CI).

    python benchmarks/link_sample.py --store /tmp/beam --store /tmp/locomo --n 100 --seed 7 \\
        --out benchmarks/results/link_sample.json

Reads every record of each store, lists each link (a statement of value's ``supersedes``, a
record's ``conflicts_with``, and a record's ``supersedes`` that no statement gives: one row per
(newer, older) pair) with both records' texts, slots and source turns, and draws ``--n`` of
them at random with ``--seed`` from all stores together. Writes the counts per store and kind and
the sample; a reader then marks each pair right (the newer statement replaces, or contradicts, the
older one) or wrong.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lychee_ray.core.statements import statement_parts  # noqa: E402
from lychee_ray.io.store import StoreReader  # noqa: E402


def store_links(root: str) -> list[dict[str, Any]]:
    """Every (newer, older) link of the store at ``root``, with both records."""
    rows = StoreReader(root).read_table("records").to_pylist()
    by_id = {(r["conversation_id"], r["record_id"]): r for r in rows}
    out: list[dict[str, Any]] = []

    def add(r: dict[str, Any], kind: str, old_id: str, slot: Any, value: Any, said: Any = None) -> None:
        old = by_id.get((r["conversation_id"], old_id))
        if old is not None:
            out.append({
                "store": root, "conversation": r["conversation_id"], "kind": kind, "slot": slot, "value": value,
                "replaced": said,
                "newer": {"id": r["record_id"], "turns": list(r.get("source_turn_ids") or []), "text": r["text"]},
                "older": {"id": old_id, "turns": list(old.get("source_turn_ids") or []), "text": old["text"]},
            })

    for r in rows:
        stated: set[str] = set()
        for st in r.get("statements") or []:
            for sid in st.get("supersedes") or []:
                old_id, i = statement_parts(sid)
                stated.add(old_id)
                old = by_id.get((r["conversation_id"], old_id))
                olds = (old or {}).get("statements") or []
                said = olds[i]["said"] if 0 <= i < len(olds) else None
                add(r, "supersedes", old_id, st.get("slot"), st.get("said"), said)
        for old_id in r.get("supersedes") or []:
            if old_id not in stated:
                add(r, "supersedes", old_id, r.get("slot"), r.get("slot_value"))
        for old_id in r.get("conflicts_with") or []:
            add(r, "conflicts", old_id, r.get("slot"), r.get("slot_value"))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--store", action="append", required=True, help="a store directory (repeat for several)")
    ap.add_argument("--n", type=int, default=100, help="links drawn")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default=str(ROOT / "benchmarks" / "results" / "link_sample.json"))
    args = ap.parse_args(argv)
    links: list[dict[str, Any]] = []
    counts: dict[str, dict[str, int]] = {}
    for root in args.store:
        found = store_links(root)
        links.extend(found)
        counts[root] = {k: sum(1 for x in found if x["kind"] == k) for k in ("supersedes", "conflicts")}
    sample = random.Random(args.seed).sample(links, min(args.n, len(links)))
    doc = {"seed": args.seed, "n": len(sample), "links": len(links), "per_store": counts,
           "sample": [{"n": i + 1, **x} for i, x in enumerate(sample)]}
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(doc, indent=1, ensure_ascii=False))
    print(json.dumps({k: v for k, v in doc.items() if k != "sample"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
