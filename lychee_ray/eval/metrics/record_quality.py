"""Measuring a built store's records from the outside: the figures a reviewer checks
without trusting the build's own counters.

Per conversation and in total:

- ``duplicate_earlier``: share of records whose normalised text equals an earlier record's of the
  same conversation (conversation order = segment index, then ordinal);
- ``near_duplicate_earlier``: share whose content words overlap an earlier record's at Jaccard
  ``>= near_duplicate_jaccard`` (catches copies with a changed word or two);
- ``no_shared_word``: share of records that share no content word with their source turns' text;
- ``empty_entities``: share of records with an empty ``entities`` list;
- ``records_per_segment`` over the segments that were encoded successfully.

Content words are :func:`lychee_ray.text.lexical.lexical_terms` (stop-worded, lightly stemmed).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lychee_ray.io.store import StoreReader
from lychee_ray.text.lexical import lexical_terms, normalised_text


@dataclass
class RecordQualityFigures:
    """Counts behind the shares; ``shares()`` divides by ``records``."""

    records: int = 0
    segments_ok: int = 0
    segments_failed: int = 0
    duplicate_earlier: int = 0
    near_duplicate_earlier: int = 0
    no_shared_word: int = 0
    empty_entities: int = 0

    def add(self, other: RecordQualityFigures) -> None:
        for k, v in asdict(other).items():
            setattr(self, k, getattr(self, k) + v)

    def to_dict(self) -> dict[str, Any]:
        """Counts plus shares (rounded) and records per encoded segment."""
        d: dict[str, Any] = asdict(self)
        n = max(1, self.records)
        for k in ("duplicate_earlier", "near_duplicate_earlier", "no_shared_word", "empty_entities"):
            d[f"{k}_share"] = round(getattr(self, k) / n, 4)
        d["records_per_segment"] = round(self.records / max(1, self.segments_ok), 3)
        return d


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


def measure_conversation(records: list[dict[str, Any]], segments: list[dict[str, Any]], turns: dict[str, str],
                         near_duplicate_jaccard: float) -> RecordQualityFigures:
    """Figures of one conversation from its record rows, segment rows and ``turn_id -> content``."""
    order = {s["segment_id"]: s["index"] for s in segments}
    recs = sorted(records, key=lambda r: (order.get(r["segment_id"], 0), r["ordinal"]))
    f = RecordQualityFigures(
        records=len(recs),
        segments_ok=sum(s["status"] == "ok" for s in segments),
        segments_failed=sum(s["status"] != "ok" for s in segments),
    )
    seen_text: set[str] = set()
    seen_terms: list[frozenset[str]] = []
    for r in recs:
        norm = normalised_text(r["text"])
        terms = frozenset(lexical_terms(r["text"]))
        if norm in seen_text:
            f.duplicate_earlier += 1
        if norm in seen_text or any(_jaccard(terms, t) >= near_duplicate_jaccard for t in seen_terms):
            f.near_duplicate_earlier += 1
        source = frozenset(w for tid in r["source_turn_ids"] or [] for w in lexical_terms(turns.get(tid, "")))
        if terms and not terms & source:
            f.no_shared_word += 1
        if not r["entities"]:
            f.empty_entities += 1
        seen_text.add(norm)
        seen_terms.append(terms)
    return f


def measure_store(root: str | Path, near_duplicate_jaccard: float) -> dict[str, Any]:
    """``{"total": {...}, "conversations": {id: {...}}}`` for every committed conversation."""
    reader = StoreReader(root)
    total = RecordQualityFigures()
    per: dict[str, Any] = {}
    for cid in reader.conversation_ids():
        data = reader.load(cid)
        turns = dict(zip(data.turns.column("turn_id").to_pylist(), data.turns.column("content").to_pylist(), strict=False))
        f = measure_conversation(data.records.to_pylist(), data.segments.to_pylist(), turns, near_duplicate_jaccard)
        total.add(f)
        per[cid] = f.to_dict()
    return {"total": total.to_dict(), "conversations": per}


__all__ = ["RecordQualityFigures", "measure_conversation", "measure_store", "normalised_text"]
