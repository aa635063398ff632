"""What ``lychee-ray list`` and ``lychee-ray errors`` show: one row per conversation, one per error.

Read from the commit markers, the ``turns`` tables (sessions), the ``segments`` tables (failed and
salvaged segments) and the ``errors/`` parts, so a user needs neither pyarrow nor Python to see what
a store holds.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from lychee_ray.config.store import StoreConfig
from lychee_ray.core.quality import QualityCounts
from lychee_ray.io.store import CommitMarker, NotAStoreError, StoreLayout, read_part, read_parts
from lychee_ray.io.store.fs import AnyPath, read_parquet


@dataclass
class ConversationRow:
    """One conversation of a store: built (committed) or failed (only in ``errors/``)."""

    conversation_id: str
    status: str  # built | failed
    user_id: str | None = None
    sessions: int | None = None
    turns: int | None = None
    records: int | None = None
    failed_segments: int | None = None
    committed_at: str | None = None
    key: str | None = None  # the commit marker's name: commits/<key>.json

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def open_layout(root: str | Path, settings: StoreConfig | None = None) -> StoreLayout:
    """The store's layout (with the ``store`` settings of the command's config, when it has one);
    :class:`NotAStoreError` when ``root`` is not a store."""
    layout = StoreLayout(root, settings)
    if not layout.is_store():
        raise NotAStoreError(root)
    return layout


def _sessions(layout: StoreLayout, marker: CommitMarker) -> int | None:
    """Distinct sessions among the conversation's turns (None when its turns part is unreadable)."""
    try:
        col = read_part(layout, "turns", marker, columns=["session_id"]).column(0)
    except (OSError, KeyError, ValueError):
        return None
    return len(set(col.to_pylist()))


def error_rows(layout: StoreLayout, warnings: bool = False) -> list[dict[str, Any]]:
    """Rows of ``errors/`` in time order: failures, plus input warnings when ``warnings``."""
    rows: list[dict[str, Any]] = []
    found: list[AnyPath] = list(layout.errors_dir.glob("*.parquet"))
    for f in sorted(found):
        rows += read_parquet(f).to_pylist()
    rows = [r for r in rows if warnings or r.get("stage") != "warning"]
    return sorted(rows, key=lambda r: r.get("time") or "")


# The keys of every row ``lychee-ray errors`` prints: an ``errors/`` row (a conversation or input line
# that failed, an input warning) leaves the segment keys None; a segment row has no file or line.
PROBLEM_KEYS = ("time", "conversation_id", "stage", "kind", "status", "segment_id", "turn_range", "attempts",
                "message", "file", "line")
# The segment columns a segment row is made of.
_SEGMENT_COLUMNS = ["segment_id", "turn_ids", "status", "error", "error_kind", "attempts"]


def _has_salvaged(m: CommitMarker) -> bool:
    return QualityCounts.from_report(m.quality).segments_salvaged > 0


def segment_problem_rows(layout: StoreLayout, warnings: bool = False) -> list[dict[str, Any]]:
    """One row per failed segment of the committed conversations (stage ``encode``, the failure's
    ``kind`` as stored), plus, when ``warnings``, one per salvaged segment (stage ``warning``, kind
    of the cut reply). Only the segments tables of conversations whose commit counts such segments
    are read."""
    markers = {m.conversation_id: m for m in layout.iter_markers()
               if m.counts.failed_segments > 0 or (warnings and _has_salvaged(m))}
    rows: list[dict[str, Any]] = []
    for cid, table in read_parts(layout, "segments", markers.values(), columns=_SEGMENT_COLUMNS).items():
        m = markers[cid]
        for seg in table.to_pylist():
            if seg["status"] == "ok" or (seg["status"] != "failed" and not warnings):
                continue
            turns = seg["turn_ids"] or []
            rows.append({
                "time": m.committed_at, "conversation_id": cid,
                "stage": "encode" if seg["status"] == "failed" else "warning",
                "kind": seg["error_kind"], "status": seg["status"], "segment_id": seg["segment_id"],
                "turn_range": [turns[0], turns[-1]] if turns else None, "attempts": seg["attempts"],
                "message": seg["error"], "file": None, "line": None,
            })
    return rows


def problem_rows(layout: StoreLayout, warnings: bool = False) -> list[dict[str, Any]]:
    """What ``lychee-ray errors`` lists, oldest first, each row with :data:`PROBLEM_KEYS`: the
    ``errors/`` rows and the failed (with ``warnings``: also salvaged) segments."""
    rows = [{k: r.get(k) for k in PROBLEM_KEYS} for r in error_rows(layout, warnings)]
    rows += segment_problem_rows(layout, warnings)
    return sorted(rows, key=lambda r: r.get("time") or "")


def conversation_rows(layout: StoreLayout) -> list[ConversationRow]:
    """Built conversations (by id), then the ones that failed and were never built."""
    out: list[ConversationRow] = []
    for m in layout.iter_markers():
        c = m.counts
        out.append(ConversationRow(m.conversation_id, "built", m.user_id, _sessions(layout, m), c.turns,
                                   c.records, c.failed_segments, m.committed_at, m.key))
    out.sort(key=lambda r: r.conversation_id)
    built = {r.conversation_id for r in out}
    failed: dict[str, str | None] = {}
    for e in error_rows(layout):
        cid = e.get("conversation_id")
        if cid and cid not in built:
            failed[cid] = e.get("time")
    out += [ConversationRow(cid, "failed", committed_at=None) for cid in sorted(failed)]
    return out


def format_table(header: list[str], rows: list[list[Any]]) -> str:
    """Plain aligned columns (no colours: the same on a terminal and in a file)."""
    cells = [header] + [["-" if v is None else str(v) for v in r] for r in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
    return "\n".join("  ".join(v.ljust(w) for v, w in zip(r, widths, strict=False)).rstrip() for r in cells)


def format_pairs(pairs: list[tuple[str, Any]]) -> str:
    """A two-column table of labelled figures (as the build summary prints them)."""
    width = max((len(k) for k, _ in pairs), default=0)
    return "\n".join(f"{k.ljust(width)}  {'-' if v is None else v}".rstrip() for k, v in pairs)


__all__ = ["ConversationRow", "PROBLEM_KEYS", "conversation_rows", "error_rows", "format_pairs", "format_table", "open_layout",
           "problem_rows", "segment_problem_rows"]
