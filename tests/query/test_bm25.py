"""BM25Index computes what bm25s computes (equal float32 scores), built at once or extended."""

from __future__ import annotations

import random

import numpy as np
import pytest

from lychee_ray.query.bm25 import BM25Index, doc_terms

WORDS = ("alpha beta gamma delta caroline melanie paris 2023 support group painting camping "
         "adoption book dog cat run ran running pottery concert").split()


def corpus(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    docs = []
    for _ in range(n):
        k = rng.choice([0, 1, 3, 8, 20])  # empty documents too (indexed as one placeholder term)
        docs.append(" ".join(rng.choice(WORDS) for _ in range(k)))
    return docs


def reference_scores(texts: list[str], terms: list[str], k1: float, b: float) -> np.ndarray:
    """bm25s's scores for ``terms`` over ``texts``, tokenised as the index tokenises them."""
    import bm25s

    ref = bm25s.BM25(k1=k1, b=b)
    ref.index([doc_terms(t) for t in texts], show_progress=False)
    return np.asarray(ref.get_scores(terms), dtype=np.float32)


def query_terms(index: BM25Index, query: str) -> list[str]:
    from lychee_ray.text.lexical import lexical_terms

    return [t for t in dict.fromkeys(lexical_terms(query)) if index.has_term(t)]


QUERIES = ["caroline support group", "paris 2023 concert", "running dog", "alpha alpha beta", "pottery"]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("k1,b", [(1.2, 0.75), (1.5, 0.3)])
def test_scores_equal_bm25s(seed: int, k1: float, b: float) -> None:
    texts = corpus(seed, 300)
    index = BM25Index(texts, ["turn"] * len(texts), [f"t{i}" for i in range(len(texts))], k1, b)
    for q in QUERIES:
        terms = query_terms(index, q)
        assert terms
        assert np.array_equal(index.scores(terms), reference_scores(texts, terms, k1, b)), q


@pytest.mark.parametrize("steps", [[1] * 40, [5, 50, 1, 200, 3], [300]])
def test_extended_equals_built_at_once(steps: list[int]) -> None:
    """Appending documents (one at a time, in batches, past the base's size so the tail is folded)
    gives the scores and hits of an index built over all of them, and leaves the old index as it was."""
    texts = corpus(7, 30 + sum(steps))
    ids = [f"t{i}" for i in range(len(texts))]
    n = 30
    index = BM25Index(texts[:n], ["record"] * n, ids[:n], 1.2, 0.75)
    first = {q: index.search(q, 20) for q in QUERIES}
    grown = index
    for k in steps:
        grown = grown.extended(texts[n:n + k], ["turn"] * k, ids[n:n + k])
        n += k
        whole = BM25Index(texts[:n], ["record"] * 30 + ["turn"] * (n - 30), ids[:n], 1.2, 0.75)
        for q in QUERIES:
            terms = query_terms(whole, q)
            assert query_terms(grown, q) == terms
            assert np.array_equal(grown.scores(terms), whole.scores(terms))
            assert grown.search(q, 25) == whole.search(q, 25)
        assert np.array_equal(grown.scores(query_terms(whole, "caroline paris")),
                              reference_scores(texts[:n], query_terms(whole, "caroline paris"), 1.2, 0.75))
    assert {q: index.search(q, 20) for q in QUERIES} == first  # the original is unchanged


def test_empty_and_unknown() -> None:
    empty = BM25Index([], [], [], 1.2, 0.75)
    assert empty.search("anything", 5) == []
    one = BM25Index([""], ["turn"], ["t0"], 1.2, 0.75)
    assert one.search("alpha", 5) == [] and one.search("", 5) == []
    grown = empty.extended(["alpha beta"], ["turn"], ["t0"])
    assert [h.id for h in grown.search("alpha", 5)] == ["t0"]
