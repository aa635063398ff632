"""The two embedding stages: turn vectors, then record and node vectors — each one model call for
the texts of a batch of conversations, or calls of ``chunk`` texts (identical texts once: the
embedders deduplicate).

Quarantine as elsewhere: when a batch's call fails, each conversation is embedded alone, and only
those that fail alone are failed (stage ``embed``). With ``chunk``, the texts go to the model
``chunk`` at a time (``embedding.progress_texts``) and ``on_chunk`` hears, after each call, what
share of each conversation's texts is embedded (the progress display moves during a long call).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence

import numpy as np

from lychee_ray.ingest.segment import turn_embedding_text
from lychee_ray.ingest.stages.work import StageWork

log = logging.getLogger(__name__)

EmbedFn = Callable[[Sequence[str]], Awaitable[np.ndarray]]
# (work, share of its texts embedded so far)
OnChunk = Callable[[StageWork, float], None]


def turn_texts(work: StageWork, max_turn_chars: int) -> list[str]:
    """The texts embedded for a conversation's turns not stored yet (segmenter and turn index share them)."""
    conv = work.item.conversation
    assert conv is not None
    return [turn_embedding_text(t, max_turn_chars) for *_, t in conv.iter_turns_from(work.first_turn)]


async def _embed_chunks(works: list[StageWork], texts: list[list[str]], embed: EmbedFn, dim: int, chunk: int,
                        on_chunk: OnChunk | None) -> np.ndarray:
    """The vectors of all works' texts, ``chunk`` texts per call (0: one call), ``on_chunk`` told after each.

    In chunks the texts go shortest first, so that each call holds texts of about one length, as the
    model's own length-sorted batches of one large call would (a call of mixed lengths pads every
    batch to its longest text)."""
    flat = [t for ts in texts for t in ts]
    if not flat:
        return np.zeros((0, dim), np.float32)
    if not (chunk > 0 and on_chunk is not None) or chunk >= len(flat):
        vecs = np.asarray(await embed(flat), dtype=np.float32)
        if on_chunk is not None:
            for w, ts in zip(works, texts, strict=False):
                if ts:
                    on_chunk(w, 1.0)
        return vecs
    owner = np.repeat(np.arange(len(texts)), [len(ts) for ts in texts])
    order = sorted(range(len(flat)), key=lambda i: (len(flat[i]), i))
    out = np.empty((len(flat), dim), dtype=np.float32)
    done = np.zeros(len(texts), dtype=np.int64)
    for start in range(0, len(flat), chunk):
        part = order[start:start + chunk]
        out[part] = np.asarray(await embed([flat[i] for i in part]), dtype=np.float32).reshape(len(part), dim)
        np.add.at(done, owner[part], 1)
        for k in sorted(set(owner[part].tolist())):
            on_chunk(works[k], float(done[k]) / len(texts[k]))
    return out


async def _embed_split(works: list[StageWork], texts: list[list[str]], embed: EmbedFn, dim: int,
                       what: str, chunk: int = 0, on_chunk: OnChunk | None = None) -> list[np.ndarray | None]:
    """Vectors of each work's texts (one call for all, or ``chunk`` texts per call; on failure one
    work at a time, failures None)."""
    try:
        vecs = await _embed_chunks(works, texts, embed, dim, chunk, on_chunk)
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
            res.extend(await _embed_split([w], [ts], embed, dim, what, chunk, on_chunk))
        return res


async def embed_turns(works: list[StageWork], embed: EmbedFn, dim: int, max_turn_chars: int, chunk: int = 0,
                      on_chunk: OnChunk | None = None) -> None:
    """Turn vectors of every routed work (finished ones are left alone); ``chunk``, ``on_chunk``: see the module."""
    todo = [w for w in works if not w.done and not w.again and w.turn_vectors is None]
    if not todo:
        return
    vecs = await _embed_split(todo, [turn_texts(w, max_turn_chars) for w in todo], embed, dim, "turns", chunk,
                              on_chunk)
    for w, v in zip(todo, vecs, strict=False):
        if v is not None:
            w.turn_vectors = v


async def embed_memory(works: list[StageWork], embed: EmbedFn, dim: int, chunk: int = 0,
                       on_chunk: OnChunk | None = None) -> None:
    """Record and node vectors of every built work (the texts its vector plan lacks); ``chunk``,
    ``on_chunk``: see the module."""
    todo = [w for w in works if not w.done and not w.again and w.pending is not None and not w.embedded]
    if not todo:
        return
    texts = [w.pending.plan.texts for w in todo if w.pending is not None]  # (all of todo: filtered above)
    vecs = await _embed_split(todo, texts, embed, dim, "records and nodes", chunk, on_chunk)
    for w, v in zip(todo, vecs, strict=False):
        if v is not None and w.pending is not None:
            try:
                w.pending.complete(v)
                w.embedded = True
            except Exception as e:  # noqa: BLE001 — e.g. a dimension that does not match the turns'
                log.exception("vectors of %s do not fit", w.conversation_id)
                w.fail("embed", e)


__all__ = ["EmbedFn", "OnChunk", "embed_memory", "embed_turns", "turn_texts"]
