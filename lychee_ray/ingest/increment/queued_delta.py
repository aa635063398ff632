"""The delta of a queued append — its turn rows, their vectors and the passages of the long ones, on
top of the stored commit — and the amendment a catch-up's delta gets for the turns queued since
it read the state (docs/incremental.md "Delta generations and queued appends")."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import pyarrow as pa

from lychee_ray.core.conversation import TURN_SCHEMA, Turn
from lychee_ray.core.passages import passages_table
from lychee_ray.core.turn_identity import turns_digest
from lychee_ray.ingest.passages import passages_of_turns
from lychee_ray.ingest.pipeline import BuildContext
from lychee_ray.ingest.segment import turn_embedding_text
from lychee_ray.io.store.artifacts import ConversationDelta, TableDelta, TableVectors
from lychee_ray.io.store.marker import BuildInfo, CommitMarker, LastIncrement


def chained_digest(previous: str | None, turns: pa.Table) -> str | None:
    """The turns digest after ``turns`` are appended to a commit whose digest is ``previous``
    (None: that commit has none, and neither has the next)."""
    return turns_digest(turns, previous) if previous else None


async def construct_queued(marker: CommitMarker, rows: list[dict[str, Any]], turns: list[Turn], ctx: BuildContext,
                           timings: dict[str, float] | None = None) -> ConversationDelta:
    """The delta that stores a queued append's new turns (``rows``, as turns-table rows, and
    ``turns``) on top of ``marker``: their rows and vectors, the passages of the long ones with
    theirs; the marker counts them as turns, open and unsegmented, its build info carried over
    (the digest chained over them). ``timings["embed"]``: the embedding's milliseconds."""
    cid, user = marker.conversation_id, marker.owner
    t0 = time.perf_counter()
    max_chars = ctx.cfg.segmenter.max_turn_chars
    vecs = np.asarray(await ctx.embed([turn_embedding_text(t, max_chars) for t in turns]), dtype=np.float32)
    passages = passages_of_turns(cid, user, turns, ctx.cfg.passages, ctx.cfg.tokenizer.encoding)
    pvecs = (np.asarray(await ctx.memory_embed([p.text for p in passages]), dtype=np.float32) if passages
             else np.zeros((0, ctx.embed_dim), np.float32))
    if timings is not None:
        timings["embed"] = (time.perf_counter() - t0) * 1e3
    table = pa.Table.from_pylist(rows, schema=TURN_SCHEMA)
    tables = {"turns": TableDelta(table, TableVectors.of(vecs, None, ctx.embed_dim))}
    if passages:
        tables["passages"] = TableDelta(passages_table(passages), TableVectors.of(pvecs, None, ctx.embed_dim))
    info = {k: getattr(marker, k) for k in BuildInfo.model_fields}  # how the stored commit was built
    info.update(turns_digest=chained_digest(marker.turns_digest, table),
                last_increment=LastIncrement(turns_added=len(rows), segments_encoded=0))
    return ConversationDelta(
        conversation_id=cid, user_id=user, fingerprint=ctx.fingerprint, tables=tables,
        counts=marker.counts.model_copy(update={"turns": marker.counts.turns + len(rows)}),
        open_turns=marker.open_turns + len(rows), info=BuildInfo(**info), dim=ctx.embed_dim,
        unsegmented_turns=marker.unsegmented_turns + len(rows))


def queued_since(current: CommitMarker, added: int) -> Callable[[ConversationDelta], None]:
    """Amends a background encoding's delta for the ``added`` turns queued since the state it
    encoded from: they stay stored, queued, open and counted in ``current``'s terms."""
    def adjust(delta: ConversationDelta) -> None:
        delta.counts = delta.counts.model_copy(update={"turns": current.counts.turns})
        delta.open_turns += added
        delta.unsegmented_turns = added
        if added:  # the turns' digest chain already runs over the turns queued since
            delta.info = delta.info.model_copy(update={"turns_digest": current.turns_digest})
    return adjust


__all__ = ["chained_digest", "construct_queued", "queued_since"]
