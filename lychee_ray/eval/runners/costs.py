"""Construction costs of an eval's stores: encode tokens and calls, build times, bytes on disk.

``openai`` stores report what the provider billed (their usage tables). ``rules`` stores make no
LLM call, so their cost is an offline count of what the ``openai`` encoder would spend on the same
segments (marked estimated): the exact encode prompts, built by the same functions the build uses
(:func:`~lychee_ray.ingest.dryrun.segment_request` → :func:`~lychee_ray.ingest.pipeline.encode_turns`),
plus the stored records serialised as the encoder's JSON reply. Estimates are cached per store in
``costs/<build key>.json`` and redone when a conversation is committed again.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any
from collections.abc import Iterable

import numpy as np
import pyarrow as pa

from lychee_ray.ingest.dryrun import encode_prompt_tokens, segment_request
from lychee_ray.ingest.encode.base import EncodeOutput
from lychee_ray.ingest.pipeline import speakers_of
from lychee_ray.ingest.segment import Segment, TurnRef, conversation_turn_inputs, fit_to_cap
from lychee_ray.config import LycheeConfig, SegmenterConfig
from lychee_ray.core.conversation import Conversation
from lychee_ray.eval.runners.stores import StoreInfo, markers_for
from lychee_ray.eval.setup.datasets import Dataset
from lychee_ray.eval.setup.layout import RunLayout
from lychee_ray.io.store import CommitMarker, StoreLayout, read_part
from lychee_ray.io.store.fs import AnyPath
from lychee_ray.io.store.reader import conversation_bytes as store_conversation_bytes
from lychee_ray.llm.schema import schema_for
from lychee_ray.text.tokens import count_tokens
from lychee_ray.names import RULES_BACKEND

log = logging.getLogger(__name__)

# Marker timings that make up a conversation's build time.
BUILD_STAGES = ("segment", "encode", "index")
# Cached estimates of another version are redone (2: split and truncated turns count their pieces).
ESTIMATE_VERSION = 2


def usage_totals(path: AnyPath, marker: CommitMarker) -> dict[str, Any]:
    """Encode-stage tokens of one conversation from the store's usage table (marker tokens as fallback)."""
    out = {"prompt_tokens": 0, "completion_tokens": 0, "cached_tokens": 0, "calls": 0, "estimated": False}
    try:
        t = read_part(path, "usage", marker)
        rows = [r for r in t.to_pylist() if r.get("stage") == "encode"]
        for r in rows:
            out["prompt_tokens"] += int(r["prompt_tokens"])
            out["completion_tokens"] += int(r["completion_tokens"])
            out["cached_tokens"] += int(r["cached_tokens"])
            out["estimated"] = out["estimated"] or bool(r["estimated"])
        out["calls"] = len(rows)
        return out
    except (FileNotFoundError, OSError, KeyError, pa.ArrowInvalid):
        tok = marker.tokens.get("encode") or {}
        for k in ("prompt_tokens", "completion_tokens", "cached_tokens", "calls"):
            out[k] = int(tok.get(k, 0))
        return out


def _turn_units(conv: Conversation, scfg: SegmenterConfig, encoding: str) -> list[tuple[TurnRef, int]]:
    """Every turn of ``conv`` as the segmenter cut it, in order: whole turns, or the pieces of a turn
    over ``max_segment_tokens`` (and only the first ``max_turn_chars`` characters), with their tokens."""
    no_vectors = np.zeros((conv.num_turns, 1))  # the cut depends on tokens only, never on vectors
    units: list[tuple[TurnRef, int]] = []
    for t in conversation_turn_inputs(conv, no_vectors, encoding, scfg.max_turn_chars):
        if t.tokens <= scfg.max_segment_tokens:
            units.append((t.ref, t.tokens))
            continue
        for ex in fit_to_cap([t], scfg.max_segment_tokens, scfg.exchange_weighting, encoding):
            units.extend((r, count_tokens(r.slice(t.text), encoding)) for r in ex.turns)
    return units


def _as_segment(row: dict[str, Any], refs: list[TurnRef]) -> Segment:
    # Only the turn references matter to the encoder; the stored row supplies the rest as is.
    return Segment.model_construct(
        segment_index=int(row["index"]), session_index=refs[0].session_index if refs else 0,
        session_id=refs[0].session_id if refs else "", turns=refs, num_exchanges=1, first_exchange=0,
        tokens=int(row.get("num_tokens") or 0), reason=row.get("close_reason") or "end_of_stream", method="semantic",
    )


def stored_segments(conv: Conversation, rows: list[dict[str, Any]], scfg: SegmenterConfig, encoding: str) -> list[Segment]:
    """The segments of a stored segments table (sorted by index), with the turn pieces the encoder read.

    A stored row keeps its turn ids and token count, not the character ranges of split turns. The
    segmenter's units are consecutive (whole turns or pieces, in conversation order) and a segment's
    tokens are the sum of its units' tokens, so each row takes units while their turn is one of its
    turns and its token count is not passed. When that does not reproduce every row (a store from
    other settings), each segment falls back to its whole turns.
    """
    rows = sorted(rows, key=lambda r: r["index"])
    in_rows = {tid for r in rows for tid in (r["turn_ids"] or [])}
    units = [u for u in _turn_units(conv, scfg, encoding) if u[0].turn_id in in_rows]
    out: list[Segment] = []
    pos = 0
    for row in rows:
        ids, budget = set(row["turn_ids"] or []), int(row.get("num_tokens") or 0)
        refs: list[TurnRef] = []
        used = 0
        while pos < len(units) and units[pos][0].turn_id in ids and used + units[pos][1] <= budget:
            refs.append(units[pos][0])
            used += units[pos][1]
            pos += 1
        if {r.turn_id for r in refs} != ids or used != budget:
            log.debug("%s: stored segments do not match the segmenter's cut; counting whole turns", conv.conversation_id)
            return [_as_segment(r, _whole_turns(conv, r["turn_ids"] or [])) for r in rows]
        out.append(_as_segment(row, refs))
    return out


def _whole_turns(conv: Conversation, turn_ids: Iterable[str]) -> list[TurnRef]:
    where = {t.turn_id: TurnRef(session_index=si, turn_index=ti, turn_id=t.turn_id, session_id=s.session_id)
             for si, s, ti, t in conv.iter_turns()}
    return [where[tid] for tid in turn_ids if tid in where]


def estimate_encode_tokens(conv: Conversation, records: pa.Table, segments: pa.Table, cfg: LycheeConfig) -> dict[str, Any]:
    """Offline count of what the ``openai`` encoder would spend on these segments.

    Prompt: the exact encode messages with the segment's turns (pieces of split turns) and the
    reference context built from the stored records, plus the output JSON schema (providers bill
    it). Completion: the stored records serialised as the encoder's JSON.
    """
    enc = cfg.tokenizer.encoding
    schema_tokens = count_tokens(json.dumps(schema_for(EncodeOutput)[0]), enc)
    speakers = speakers_of(conv)
    by_seg: dict[str, list[dict[str, Any]]] = {}
    for r in sorted(records.to_pylist(), key=lambda r: (r["segment_id"], r["ordinal"])):
        by_seg.setdefault(r["segment_id"], []).append(r)
    rows = segments.to_pylist()
    prompt = completion = calls = 0
    prev_records: list[str] = []
    state = ""
    for row, seg in zip(sorted(rows, key=lambda r: r["index"]), stored_segments(conv, rows, cfg.segmenter, enc), strict=False):
        if not seg.turns:
            continue
        ctx = prev_records[-cfg.encoder.context_records:] if cfg.encoder.context_records else []
        req = segment_request(conv, seg, speakers, prev_resolution_state=state, prev_records=ctx)
        prompt += encode_prompt_tokens(req, cfg) + schema_tokens
        recs = by_seg.get(row["segment_id"], [])
        local: dict[str, int] = {}
        for t in req.turns:  # a record names its turns by their index in the request
            local.setdefault(t.turn_id, t.index)
        out = {"records": [{"type": r["type"], "text": r["text"], "entities": r["entities"] or [], "topics": r["topics"] or [],
                            "time": ({"start": r["time_start"], "end": r["time_end"], "expression": r["time_expression"]}
                                     if r["time_start"] else None),
                            "source_turns": [local[t] for t in (r["source_turn_ids"] or []) if t in local]} for r in recs],
               "resolution_state": row.get("resolution_state") or ""}
        completion += count_tokens(json.dumps(out, ensure_ascii=False), enc)
        calls += 1
        prev_records.extend(r["text"] for r in recs)
        state = row.get("resolution_state") or state
    return {"prompt_tokens": prompt, "completion_tokens": completion, "cached_tokens": 0, "calls": calls, "estimated": True}


def conversation_bytes(root: AnyPath, marker: CommitMarker, tables: Iterable[str] | None = None,
                       indexes: Iterable[str] | None = None) -> int:
    """On-disk bytes of one conversation (every table of the store's registry unless ``tables``):
    :func:`lychee_ray.io.store.reader.conversation_bytes`."""
    return store_conversation_bytes(StoreLayout(root), marker, tables, indexes)


def _cached_estimates(path: Path) -> dict[str, Any]:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError:
        return {}


def construction_costs(info: StoreInfo, ds: Dataset, run_dir: Path) -> dict[str, dict[str, Any]]:
    """Per conversation: encode tokens/calls, timings, store bytes (rules: estimated tokens, cached)."""
    assert info.path is not None
    markers = markers_for(info.path, ds.conversation_ids)
    cache_path = RunLayout(run_dir).costs_path(info.key)
    cache = _cached_estimates(cache_path) if info.backend == RULES_BACKEND else {}
    convs = {c.conversation_id: c for c in ds.conversations}
    out: dict[str, dict[str, Any]] = {}
    dirty = False
    for cid, m in markers.items():
        if info.backend == RULES_BACKEND:
            c = cache.get(cid)
            if c is None or c.get("committed_at") != m.committed_at or c.get("estimate_version") != ESTIMATE_VERSION:
                tok = estimate_encode_tokens(convs[cid], read_part(info.path, "records", m), read_part(info.path, "segments", m),
                                             info.cfg)
                c = cache[cid] = {**tok, "committed_at": m.committed_at, "estimate_version": ESTIMATE_VERSION}
                dirty = True
            tok = {k: v for k, v in c.items() if k not in ("committed_at", "estimate_version")}
            tok["real_calls"] = 0
        else:
            tok = usage_totals(info.path, m)
            tok["real_calls"] = tok["calls"]
        timings = m.timings_s
        out[cid] = {
            **tok,
            "segments": m.counts.segments,
            "records": m.counts.records,
            "turns": m.counts.turns,
            "build_s": round(sum(float(timings.get(k, 0.0)) for k in BUILD_STAGES), 4),
            "timings_s": {k: timings.get(k) for k in BUILD_STAGES},
            "store_bytes": conversation_bytes(info.path, m),
            "turns_bytes": conversation_bytes(info.path, m, tables=("turns",), indexes=("turns",)),
        }
    if dirty:
        cache_path.parent.mkdir(parents=True, exist_ok=True)
        cache_path.write_text(json.dumps(cache, indent=1), encoding="utf-8")
    return out


__all__ = ["conversation_bytes", "construction_costs", "estimate_encode_tokens", "stored_segments", "usage_totals"]
