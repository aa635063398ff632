"""Memory-quality accounting of the encode step: what happened to every drafted record.

Every record draft an encoder returns has exactly one fate — stored as a record, or rejected for
one reason — so ``drafts == records + sum(rejected)`` holds per segment, per conversation and per
store. Repairs (a fixed citation, entities filled by code, a corrected time) change a stored record
and are counted separately (a record can have several). One segment's figures travel in its
segment row; a conversation's sum in its commit marker (``quality``), the store's in
``manifest.json``; the build summary, ``lychee-ray stats`` and the Serve conversation info show them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from collections.abc import Iterable, Mapping

# Why a draft was not stored.
REJECT_REASONS = (
    "echo",                 # a (near-)copy of a reference-context or earlier record, not supported by its own turns
    "ungrounded",           # its content words are not in the segment's turns
    "invalid_citation",     # it cites turns outside the segment and matches none inside
    "empty_text",
    "unknown_type",
    "duplicate_in_reply",   # the same (type, text) twice in one reply
    "merged_duplicate",     # a near-duplicate of another draft of the reply: folded into it, its sources kept there
    "replaced_by_repair",   # the segment was re-encoded in repair mode; the first reply's kept drafts are superseded
    "degenerate_segment",   # the segment failed as degenerate (still after repair); its kept drafts are not stored
    "forgotten",            # stored, then forgotten on request (ingest/forget.py); kept out of later commits
)
# What code changed on a stored record.
REPAIR_KINDS = (
    "citation_fixed",           # missing / out-of-segment / unsupported citation re-attributed to the matching turn(s)
    "entities_filled",          # names in the text added to empty or incomplete entities
    "time_corrected",           # an implausible time, or one contradicting its relative expression, recomputed by code
    "time_dropped",             # an implausible time with no usable expression removed (expression kept)
    "relative_time_rewritten",  # "yesterday" in the text rewritten as the absolute date
    "artifacts_added",          # a code block / table / document an LLM reply left out, recorded by code
)
# What became of the supersession links of a segment's records (ingest/supersede.py): links written,
# and links a reply drafted that were dropped, by reason.
LINK_OUTCOMES = (
    "supersedes",           # a record replaces an earlier record of its slot
    "conflicts",            # a record contradicts an earlier record of its slot
    "dropped_unknown",      # the reply named a record that was not one of the candidates it was shown
    "dropped_other_slot",   # the named candidate belongs to another slot than the record's
    "dropped_no_slot",      # the record names no slot, so it can replace nothing
)
# Degenerate-output error kind of a failed segment (SegmentRow.error_kind).
DEGENERATE_OUTPUT = "degenerate_output"


@dataclass
class QualityCounts:
    """Counters of one segment, conversation or store (flat keys on the wire: see :meth:`to_flat`)."""

    drafts: int = 0
    records: int = 0
    segments_encoded: int = 0
    segments_repaired: int = 0
    segments_degenerate: int = 0
    # segments whose encode reply was cut at the token limit and whose complete records were kept
    # (SegmentRow status "salvaged", ingest/encode/salvage.py)
    segments_salvaged: int = 0
    rejected: dict[str, int] = field(default_factory=dict)
    repaired: dict[str, int] = field(default_factory=dict)
    links: dict[str, int] = field(default_factory=dict)

    def link(self, outcome: str, n: int = 1) -> None:
        if outcome not in LINK_OUTCOMES:
            raise ValueError(f"unknown link outcome {outcome!r}")
        if n:
            self.links[outcome] = self.links.get(outcome, 0) + n

    def reject(self, reason: str, n: int = 1) -> None:
        if reason not in REJECT_REASONS:
            raise ValueError(f"unknown reject reason {reason!r}")
        if n:
            self.rejected[reason] = self.rejected.get(reason, 0) + n

    def repair(self, kind: str, n: int = 1) -> None:
        if kind not in REPAIR_KINDS:
            raise ValueError(f"unknown repair kind {kind!r}")
        if n:
            self.repaired[kind] = self.repaired.get(kind, 0) + n

    @property
    def rejected_total(self) -> int:
        return sum(self.rejected.values())

    def add(self, other: QualityCounts) -> QualityCounts:
        self.drafts += other.drafts
        self.records += other.records
        self.segments_encoded += other.segments_encoded
        self.segments_repaired += other.segments_repaired
        self.segments_degenerate += other.segments_degenerate
        self.segments_salvaged += other.segments_salvaged
        for k, v in other.rejected.items():
            self.rejected[k] = self.rejected.get(k, 0) + v
        for k, v in other.repaired.items():
            self.repaired[k] = self.repaired.get(k, 0) + v
        for k, v in other.links.items():
            self.links[k] = self.links.get(k, 0) + v
        return self

    # -- wire forms ---------------------------------------------------------------------------------
    def to_flat(self) -> dict[str, int]:
        """Flat ``{name: int}`` (``rejected_<reason>``, ``repaired_<kind>``) — the segment column's form."""
        out = {"drafts": self.drafts, "records": self.records, "segments_encoded": self.segments_encoded,
               "segments_repaired": self.segments_repaired, "segments_degenerate": self.segments_degenerate,
               "segments_salvaged": self.segments_salvaged}
        out.update({f"rejected_{k}": v for k, v in sorted(self.rejected.items()) if v})
        out.update({f"repaired_{k}": v for k, v in sorted(self.repaired.items()) if v})
        out.update({f"links_{k}": v for k, v in sorted(self.links.items()) if v})
        return out

    @classmethod
    def from_flat(cls, flat: Mapping[str, int] | Iterable[tuple[str, int]] | None) -> QualityCounts:
        """Inverse of :meth:`to_flat`; also accepts Arrow's map form (a list of key/value pairs)."""
        items = dict(flat.items() if isinstance(flat, Mapping) else (flat or []))
        q = cls(drafts=int(items.get("drafts", 0)), records=int(items.get("records", 0)),
                segments_encoded=int(items.get("segments_encoded", 0)),
                segments_repaired=int(items.get("segments_repaired", 0)),
                segments_degenerate=int(items.get("segments_degenerate", 0)),
                segments_salvaged=int(items.get("segments_salvaged", 0)))
        for k, v in items.items():
            if k.startswith("rejected_"):
                q.rejected[k.removeprefix("rejected_")] = int(v)
            elif k.startswith("repaired_"):
                q.repaired[k.removeprefix("repaired_")] = int(v)
            elif k.startswith("links_"):
                q.links[k.removeprefix("links_")] = int(v)
        return q

    def report(self) -> dict[str, Any]:
        """Nested, human-facing form (marker, manifest, stats, Serve): counts, shares and rates."""
        return {
            "drafts": self.drafts,
            "records": self.records,
            "records_per_segment": round(self.records / self.segments_encoded, 3) if self.segments_encoded else 0.0,
            "rejected": {k: self.rejected.get(k, 0) for k in REJECT_REASONS},
            "rejected_total": self.rejected_total,
            "rejected_share": round(self.rejected_total / self.drafts, 4) if self.drafts else 0.0,
            "repaired": {k: self.repaired.get(k, 0) for k in REPAIR_KINDS},
            "segments_encoded": self.segments_encoded,
            "segments_repaired": self.segments_repaired,
            "segments_degenerate": self.segments_degenerate,
            "segments_salvaged": self.segments_salvaged,
            "links": {k: self.links.get(k, 0) for k in LINK_OUTCOMES},
        }

    @classmethod
    def from_report(cls, report: Mapping[str, Any] | None) -> QualityCounts:
        """Inverse of :meth:`report` (reads a marker's or manifest's ``quality``)."""
        r = report or {}
        return cls(
            drafts=int(r.get("drafts", 0)), records=int(r.get("records", 0)),
            segments_encoded=int(r.get("segments_encoded", 0)), segments_repaired=int(r.get("segments_repaired", 0)),
            segments_degenerate=int(r.get("segments_degenerate", 0)),
            segments_salvaged=int(r.get("segments_salvaged", 0)),
            rejected={k: int(v) for k, v in (r.get("rejected") or {}).items() if v},
            repaired={k: int(v) for k, v in (r.get("repaired") or {}).items() if v},
            links={k: int(v) for k, v in (r.get("links") or {}).items() if v},
        )


__all__ = ["DEGENERATE_OUTPUT", "LINK_OUTCOMES", "QualityCounts", "REJECT_REASONS", "REPAIR_KINDS"]
