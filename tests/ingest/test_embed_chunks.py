"""The embedding stages' calls in chunks: shortest texts first, every vector back in its text's place,
each conversation's share reported as its texts are embedded."""

from __future__ import annotations

import asyncio

import numpy as np

from lychee_ray.ingest.stages.embedding import _embed_chunks


def test_chunks_go_shortest_first_and_vectors_come_back_in_order():
    calls: list[list[str]] = []

    async def embed(texts):
        calls.append(list(texts))
        return np.asarray([[float(len(t)), float(sum(map(ord, t)))] for t in texts], dtype=np.float32)

    works = ["a", "b"]  # stand-ins: the function only hands them back to on_chunk
    texts = [["a long sentence about the garden shed", "hi", "a medium one"], ["ok", "the longest sentence of them all, really"]]
    heard: list[tuple[str, float]] = []
    vecs = asyncio.run(_embed_chunks(works, texts, embed, 2, 2, lambda w, share: heard.append((w, share))))
    flat = [t for ts in texts for t in ts]
    assert [v[0] for v in vecs] == [float(len(t)) for t in flat]  # each vector in its text's place
    assert [v[1] for v in vecs] == [float(sum(map(ord, t))) for t in flat]
    assert [len(c) for c in calls] == [2, 2, 1]
    lengths = [len(t) for c in calls for t in c]
    assert lengths == sorted(lengths)  # shortest first: each call holds texts of about one length
    last = {w: share for w, share in heard}
    assert last == {"a": 1.0, "b": 1.0}
    shares_a = [s for w, s in heard if w == "a"]
    assert shares_a == sorted(shares_a) and shares_a[0] < 1.0


def test_without_a_listener_one_call_for_everything():
    calls = []

    async def embed(texts):
        calls.append(len(texts))
        return np.zeros((len(texts), 3), np.float32)

    out = asyncio.run(_embed_chunks(["w"], [["x", "yy", "zzz"]], embed, 3, 2, None))
    assert out.shape == (3, 3) and calls == [3]
