"""The two embedding stages: turn vectors, then record and node vectors — each one model call for
the texts of a whole batch of conversations (identical texts once: the embedders deduplicate).

Quarantine as elsewhere: when a batch's call fails, each conversation is embedded alone, and only
those that fail alone are failed (stage ``embed``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from lychee_ray.ingest.segment import turn_embedding_text
from lychee_ray.ingest.stages.work import StageWork

log = logging.getLogger(__name__)

EmbedFn = Callable[[Sequence[str]], Awaitable[np.ndarray]]


def turn_texts(work: StageWork, max_turn_chars: int) -> list[str]:
    """The texts embedded for a conversation's turns not stored yet (segmenter and turn index share them)."""
    conv = work.item.conversation
    assert conv is not None
    return [turn_embedding_text(t, max_turn_chars) for *_, t in conv.iter_turns_from(work.first_turn)]


async def _embed_split(works: list[StageWork], texts: list[list[str]], embed: EmbedFn, dim: int,
                       what: str) -> list[np.ndarray | None]:
    """Vectors of each work's texts (one call for all; on failure one call per work, failures None)."""
    flat = [t for ts in texts for t in ts]
    try:
        vecs = np.asarray(await embed(flat), dtype=np.float32) if flat else np.zeros((0, dim), np.float32)
        out: list[np.ndarray | None] = []
        i = 0
        for ts in texts:
            out.append(vecs[i:i + len(ts)])
            i += len(ts)
        return out
    except Exception as e:  # noqa: BLE001 — find the conversation(s) to blame, embed the rest
        if len(works) == 1:
            log.exception("embedding the %s of %s failed", what, works[0].conversation_id)
            works[0].fail("embed", e)
            return [None]
        log.warning("embedding the %s of %d conversations failed (%s); embedding them one by one", what, len(works), e)
        res: list[np.ndarray | None] = []
        for w, ts in zip(works, texts, strict=False):
            res.extend(await _embed_split([w], [ts], embed, dim, what))
        return res


async def embed_turns(works: list[StageWork], embed: EmbedFn, dim: int, max_turn_chars: int) -> None:
    """Turn vectors of every routed work (finished ones are left alone)."""
    todo = [w for w in works if not w.done and not w.again and w.turn_vectors is None]
    if not todo:
        return
    vecs = await _embed_split(todo, [turn_texts(w, max_turn_chars) for w in todo], embed, dim, "turns")
    for w, v in zip(todo, vecs, strict=False):
        if v is not None:
            w.turn_vectors = v


async def embed_memory(works: list[StageWork], embed: EmbedFn, dim: int) -> None:
    """Record and node vectors of every built work (the texts its vector plan lacks)."""
    todo = [w for w in works if not w.done and not w.again and w.pending is not None and not w.embedded]
    if not todo:
        return
    texts = [w.pending.plan.texts for w in todo if w.pending is not None]  # (all of todo: filtered above)
    vecs = await _embed_split(todo, texts, embed, dim, "records and nodes")
    for w, v in zip(todo, vecs, strict=False):
        if v is not None and w.pending is not None:
            try:
                w.pending.complete(v)
                w.embedded = True
            except Exception as e:  # noqa: BLE001 — e.g. a dimension that does not match the turns'
                log.exception("vectors of %s do not fit", w.conversation_id)
                w.fail("embed", e)


__all__ = ["EmbedFn", "embed_memory", "embed_turns", "turn_texts"]
