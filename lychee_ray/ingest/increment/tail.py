"""The tail delta: an increment written as a delta straight from what it changed.

:func:`~lychee_ray.ingest.increment.construct.construct_increment` normally assembles the conversation's
whole artifacts (every record, node and vector) and the writer diffs them against the stored
tables — correct for any change, but linear in the conversation. In the common case — the segmenter
continued from its resume point, the re-opened tail segments are the last ones — only the tail
changed, and this module builds the :class:`~lychee_ray.io.store.artifacts.ConversationDelta` from
the tail alone: the new turns, the tail segments and their records, the nodes those records touch
(:class:`~lychee_ray.ingest.increment.node_index.NodeIndex`), their vectors, the new usage rows. It also
returns the state the next increment starts from, so nothing is re-read between increments.
The store it produces is row for row the one the full path produces (``tests/ingest/test_deltas.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from lychee_ray.ingest.increment.node_index import NodeIndex
from lychee_ray.ingest.increment.queued_delta import chained_digest
from lychee_ray.ingest.increment.stored import StoredConversation
from lychee_ray.ingest.passages import conversation_passages
from lychee_ray.ingest.pipeline import (
    BuildContext,
    KnownVectors,
    segments_quality,
    usage_tokens,
)
from lychee_ray.ingest.resume_point import ResumePoint
from lychee_ray.ingest.vectors import passage_key
from lychee_ray.config import LycheeConfig
from lychee_ray.core.conversation import TURN_SCHEMA, Conversation
from lychee_ray.core.passages import passages_table
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import (
    MemoryRecord,
    SegmentRow,
    nodes_table,
    records_table,
    segments_table,
)
from lychee_ray.io.store.artifacts import ConversationDelta, TableDelta, TableVectors
from lychee_ray.io.store.marker import BuildInfo, LastIncrement, MarkerCounts
from lychee_ray.llm.usage import UsageLedger


@dataclass
class DeltaIncrement:
    """The delta to commit and the state after it (its marker is set once committed)."""

    delta: ConversationDelta
    next_state: StoredConversation
    records_written: int
    records_removed: int


def tail_start(stored: StoredConversation, final_ids: set[str]) -> int | None:
    """How many stored records belong to the final segments, if they are exactly the first ones
    (the tail is then the re-opened segments' records); None when they are not. A kept state
    counted them when it was made (the final segments then are these)."""
    if stored.final_records is not None and stored.final_segments == final_ids:
        return stored.final_records
    k = sum(r.segment_id in final_ids for r in stored.records)
    return k if all(r.segment_id in final_ids for r in stored.records[:k]) else None


def node_index_of(stored: StoredConversation, cfg: LycheeConfig) -> NodeIndex:
    """The stored conversation's node index (built once from its records, then kept)."""
    if stored.node_index is None:
        stored.node_index = NodeIndex.build(stored.records, stored.turns.column("turn_id").to_pylist(), cfg.nodes,
                                            stored.conversation_id, stored.user_id)
    return stored.node_index


async def delta_increment(
    stored: StoredConversation, conv: Conversation, ctx: BuildContext, *, keep: int, records: list[MemoryRecord],
    all_rows: list[SegmentRow], final_ids: set[str], new_vectors: np.ndarray, all_vectors: np.ndarray,
    segstate: ResumePoint, mine: UsageLedger, timings: dict[str, float], last_increment: LastIncrement,
) -> DeltaIncrement:
    """The delta of an increment that kept ``stored``'s first ``keep`` records and final segments
    (``final_ids``) and replaced the rest by the tail of ``records`` / ``all_rows``."""
    cfg, cid = ctx.cfg, conv.conversation_id
    dim = int(all_vectors.shape[1]) if all_vectors.ndim == 2 else ctx.embed_dim
    n_stored = stored.num_turns
    added_rows = conv.turn_rows(n_stored)
    idx = node_index_of(stored, cfg)
    idx.add_turns(r["turn_id"] for r in added_rows)
    tail = records[keep:]
    changed_nodes, gone_nodes = idx.replace_tail(keep, tail)
    old_tail = {r.record_id: r for r in stored.records[keep:]}
    up_records = [r for r in tail if old_tail.get(r.record_id) != r]
    tail_ids = {r.record_id for r in tail}
    gone_records = [rid for rid in old_tail if rid not in tail_ids]
    old_rows = {r.segment_id: r for r in stored.rows if r.segment_id not in final_ids}
    tail_rows = [r for r in all_rows if r.segment_id not in final_ids]
    up_rows = [r for r in tail_rows if old_rows.get(r.segment_id) != r]
    tail_row_ids = {r.segment_id for r in tail_rows}
    gone_rows = [sid for sid in old_rows if sid not in tail_row_ids]

    # vectors: what is stored by id (records) or by id and text (nodes), else embedded in one call
    # (the passages of the added turns are new: embedded in the same call)
    known = stored.known
    embedded = [i for i, n in enumerate(changed_nodes) if len(n.record_ids) >= cfg.nodes.min_records_to_embed]
    wanted = [(r.record_id, r.text) for r in up_records] + [((changed_nodes[i].node_id, changed_nodes[i].text),
                                                               changed_nodes[i].text) for i in embedded]
    have = [known.records.get(k) if isinstance(k, str) else known.nodes.get(k) for k, _ in wanted]
    passages = conversation_passages(conv, cfg.passages, cfg.tokenizer.encoding, start=n_stored)
    have += [None] * len(passages)
    texts = [t for (_, t), v in zip(wanted, have, strict=False) if v is None] + [p.text for p in passages]
    fresh = iter(await ctx.memory_embed(texts) if texts else np.zeros((0, dim), dtype=np.float32))
    vecs = np.asarray([v if v is not None else next(fresh) for v in have], dtype=np.float32).reshape(-1, dim)
    n_up, n_nodes = len(up_records), len(embedded)
    rec_vecs, node_vecs, pas_vecs = vecs[:n_up], vecs[n_up:n_up + n_nodes], vecs[n_up + n_nodes:]

    usage_new = mine.to_table()
    usage = stored.usage
    if usage_new.num_rows:
        usage = pa.concat_tables([usage, usage_new.cast(usage.schema)]) if usage.num_rows else usage_new
    new_turns = pa.Table.from_pylist(added_rows, schema=TURN_SCHEMA)
    tables = {
        "turns": TableDelta(new_turns, TableVectors.of(new_vectors, None, dim)),
        "segments": TableDelta(segments_table(up_rows), None, gone_rows),
        "records": TableDelta(records_table(up_records), TableVectors.of(rec_vecs, None, dim), gone_records),
        "nodes": TableDelta(nodes_table(changed_nodes), TableVectors.of(node_vecs, embedded, dim), gone_nodes),
        "usage": TableDelta(usage_new),
        "passages": TableDelta(passages_table(passages), TableVectors.of(pas_vecs, None, dim)),
    }
    tables = {k: v for k, v in tables.items() if v.rows}
    covered = {t for r in all_rows for t in r.turn_ids}
    n_turns = n_stored + len(added_rows)
    digest = stored.marker.turns_digest
    info = BuildInfo(
        backend=ctx.encoder.backend, model=ctx.encoder.model, embedder=ctx.embedder_name, embedding_dim=ctx.embed_dim,
        tokens=usage_tokens(UsageLedger.from_table(usage)), timings_s=timings,
        mean_turns_per_segment=round(n_turns / max(1, len(all_rows)), 3),
        quality=_quality(stored, final_ids, tail_rows).report(),
        turns_digest=chained_digest(digest, new_turns), last_increment=last_increment)
    counts = MarkerCounts(turns=n_turns, segments=len(all_rows), failed_segments=sum(r.status == "failed" for r in all_rows),
                          records=len(records), nodes=len(idx))
    delta = ConversationDelta(conversation_id=cid, user_id=conv.user_id, fingerprint=ctx.fingerprint, tables=tables,
                              counts=counts, open_turns=n_turns - len(covered), info=info, dim=dim,
                              segstate=segstate.to_dict())
    next_known = KnownVectors(records={**known.records, **{r.record_id: v for r, v in zip(up_records, rec_vecs, strict=False)}},
                              nodes={**known.nodes, **{(changed_nodes[i].node_id, changed_nodes[i].text): v
                                                       for i, v in zip(embedded, node_vecs, strict=False)}},
                              passages={**known.passages, **{passage_key(p): v for p, v in zip(passages, pas_vecs, strict=False)}})
    log = stored.kept_log
    if log is not None:
        log.add(added_rows)
    provisional = set(segstate.provisional)
    now_final = [r for r in tail if r.segment_id not in provisional]  # the first of the tail (segment order)
    memory = stored.kept_memory  # of the old final records: add the records of segments final now
    if memory is not None:
        memory.accept(now_final)
    slots = stored.kept_slots  # likewise the slot state (the speakers of the new turns first)
    if slots is not None:
        slots.hear(conv)
        slots.absorb(now_final)
    state = StoredConversation(
        marker=stored.marker, turns=pa.concat_tables([stored.turns, new_turns.cast(stored.turns.schema)]),
        rows=all_rows, records=records, usage=usage, turn_vectors=all_vectors, known=next_known, segstate=segstate,
        kept_conv=conv, node_index=idx, applied=set(stored.applied), kept_log=log, kept_memory=memory, kept_slots=slots,
        final_records=keep + len(now_final), final_segments=final_ids | {r.segment_id for r in tail_rows
                                                                         if r.segment_id not in provisional},
        final_quality=_quality(stored, final_ids, [r for r in tail_rows if r.segment_id not in provisional]))
    return DeltaIncrement(delta, state, len(up_records) - sum(r.record_id in old_tail for r in up_records),
                          len(gone_records))


def _quality(stored: StoredConversation, final_ids: set[str], more: list[SegmentRow]) -> QualityCounts:
    """The memory checks' counts of the final segments (kept, or summed once) plus ``more`` rows."""
    if stored.final_quality is None or stored.final_segments != final_ids:
        stored.final_quality = segments_quality([r for r in stored.rows if r.segment_id in final_ids])
        stored.final_segments = set(final_ids)
    return QualityCounts().add(stored.final_quality).add(segments_quality(more))


__all__ = ["DeltaIncrement", "delta_increment", "node_index_of", "tail_start"]
