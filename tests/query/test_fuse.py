"""Reciprocal rank fusion: a hand-computed example, weights, provenance, duplicates."""

from __future__ import annotations

import pytest

from lychee_ray.query.fuse import ItemKey, RankedList, rrf
from lychee_ray.query.hits import Hit


def h(*ids: str) -> list[Hit]:
    return [Hit("turn" if i.startswith("t") else "record", i, 0.0) for i in ids]


LISTS = [
    RankedList("records", 0, "c", h("x", "y", "z")),
    RankedList("bm25", 0, "c", h("y", "x")),
    RankedList("turns", 1, "c", h("t1", "z")),
]


def test_rrf_hand_computed():
    out = rrf(LISTS, k=60)
    scores = {it.key.id: it.score for it in out}
    # x: rank 1 in records, rank 2 in bm25; y: rank 2 and 1; z: rank 3 and 2; t1: rank 1
    assert scores["x"] == pytest.approx(1 / 61 + 1 / 62)
    assert scores["y"] == pytest.approx(1 / 62 + 1 / 61)
    assert scores["z"] == pytest.approx(1 / 63 + 1 / 62)
    assert scores["t1"] == pytest.approx(1 / 61)
    # x and y tie: the first seen comes first; then z, then t1
    assert [it.key.id for it in out] == ["x", "y", "z", "t1"]
    z = next(it for it in out if it.key.id == "z")
    assert z.channels == {"records", "turns"} and z.routes == {0, 1} and z.ranks == {"records": 3, "turns": 2}
    assert out[3].key == ItemKey("c", "turn", "t1")


def test_rrf_weights_and_limit():
    out = rrf(LISTS, k=60, weights={"bm25": 2.0}, limit=2)
    assert [it.key.id for it in out] == ["y", "x"]
    assert out[0].score == pytest.approx(2 / 61 + 1 / 62)


def test_rrf_counts_an_item_once_per_list_and_keeps_conversations_apart():
    out = rrf([RankedList("records", 0, "a", h("x", "x", "y")), RankedList("records", 0, "b", h("x"))], k=1)
    by = {(it.key.conversation_id, it.key.id): it.score for it in out}
    assert by[("a", "x")] == pytest.approx(1 / 2) and by[("a", "y")] == pytest.approx(1 / 3)
    assert by[("b", "x")] == pytest.approx(1 / 2)  # same id, other conversation: a separate item
