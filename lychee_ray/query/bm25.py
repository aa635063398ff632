"""The lexical channel (DESIGN §1 step 5e): BM25 over a conversation's record and turn texts.

Names, numbers and rare words are what vector search misses; :class:`BM25Index` is built once
when a conversation is loaded (and cached with its view); the lexical channels
(:mod:`lychee_ray.query.channels.lexical`) search it.

Why not ``bm25s`` itself: ``bm25s`` precomputes every (term, document) score, and those depend on
the corpus size and mean document length, so adding one document means rebuilding the whole index
— on a 10,000-turn conversation that is most of a second for every appended turn. This
index keeps postings (documents and term frequencies) and scores at query time, so
:meth:`BM25Index.extended` adds documents at the cost of the new ones. It computes exactly what
``bm25s`` computes (Lucene BM25, float32 scores, the same operations in the same order):
``tests/query/test_bm25.py`` checks the scores are equal, not close, to ``bm25s``'s on the same corpus.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

import numpy as np

from lychee_ray.query.hits import Hit, ItemKind
from lychee_ray.query.pacing import Pause, paced
from lychee_ray.text.lexical import search_terms

# an empty document is indexed as one term no query can produce (as bm25s needs one: it counts
# towards the corpus size and the mean length the way it always did here)
_EMPTY_DOC = "\x00empty"

_EMPTY_I32 = np.zeros(0, dtype=np.int32)
_EMPTY_F32 = np.zeros(0, dtype=np.float32)


def doc_terms(text: str) -> list[str]:
    """The terms a document is indexed by (never empty)."""
    return search_terms(text) or [_EMPTY_DOC]


class _Postings:
    """Immutable postings of a document range: per term, the documents (ascending) and their term
    frequencies, in CSR form (``ptr[t]:ptr[t + 1]`` slices ``docs`` / ``tfs`` for term id ``t``)."""

    __slots__ = ("vocab", "ptr", "docs", "tfs")

    def __init__(self, tokens: Sequence[Sequence[str]], first_doc: int, pause: Pause | None = None) -> None:
        vocab: dict[str, int] = {}
        term_ids: list[int] = []
        tfs: list[int] = []
        docs: list[int] = []
        for i, toks in enumerate(paced(tokens, pause)):
            counts = Counter(toks)
            term_ids.extend(vocab.setdefault(t, len(vocab)) for t in counts)
            tfs.extend(counts.values())
            docs.extend([first_doc + i] * len(counts))
        tid = np.asarray(term_ids, dtype=np.int64)
        order = np.argsort(tid, kind="stable")  # by term; documents stay ascending within a term
        self.vocab = vocab
        self.ptr = np.zeros(len(vocab) + 1, dtype=np.int64)
        np.cumsum(np.bincount(tid, minlength=len(vocab)), out=self.ptr[1:])
        self.docs = np.asarray(docs, dtype=np.int32)[order]
        self.tfs = np.asarray(tfs, dtype=np.float32)[order]

    def get(self, term: str) -> tuple[np.ndarray, np.ndarray]:
        t = self.vocab.get(term)
        if t is None:
            return _EMPTY_I32, _EMPTY_F32
        a, b = self.ptr[t], self.ptr[t + 1]
        return self.docs[a:b], self.tfs[a:b]


class BM25Index:
    """Lucene BM25 over a mixed corpus of record and turn texts, with kind tags; documents can be
    appended (:meth:`extended`, a new index: an index is never changed once built, so searches on
    an older one are unaffected).

    Postings live in a *base* part (built with the index) and a *tail* part (documents appended
    since), both immutable; when the tail would outgrow the base they are rebuilt as one base, so
    an append costs the new documents plus, amortised, a constant.
    """

    def __init__(self, texts: Sequence[str] | None, kinds: Sequence[ItemKind], ids: Sequence[str], k1: float, b: float,
                 tokens: Sequence[list[str]] | None = None, pause: Pause | None = None) -> None:
        """``tokens``: ``doc_terms`` of ``texts`` when the caller has them already (``texts`` may then
        be None); ``pause``: called every few hundred documents (query/pacing.py)."""
        self.k1, self.b = k1, b
        self.kinds = list(kinds)
        self.ids = list(ids)
        # kept: rebuilding the base re-reads them
        if tokens is None and texts is None:
            raise ValueError("BM25Index needs texts or tokens")
        self._tokens = list(tokens) if tokens is not None else [doc_terms(t) for t in paced(texts or [], pause)]
        self._doc_len = np.asarray([len(t) for t in self._tokens], dtype=np.int64)
        self._total_len = int(self._doc_len.sum())
        self._base = _Postings(self._tokens, 0, pause)
        self._tail: dict[str, tuple[np.ndarray, np.ndarray]] = {}
        self._tail_docs = 0

    @property
    def num_docs(self) -> int:
        return len(self.ids)

    def extended(self, texts: Sequence[str] | None, kinds: Sequence[ItemKind], ids: Sequence[str],
                 tokens: Sequence[list[str]] | None = None) -> BM25Index:
        """A new index: this one's documents followed by ``texts`` (scores as if built at once)."""
        new = object.__new__(BM25Index)
        new.k1, new.b = self.k1, self.b
        new.kinds = self.kinds + list(kinds)
        new.ids = self.ids + list(ids)
        toks = list(tokens) if tokens is not None else [doc_terms(t) for t in texts or []]
        new._tokens = self._tokens + toks
        lens = np.asarray([len(t) for t in toks], dtype=np.int64)
        new._doc_len = np.concatenate([self._doc_len, lens])
        new._total_len = self._total_len + int(lens.sum())
        new._tail_docs = self._tail_docs + len(toks)
        if new._tail_docs > len(new._tokens) - new._tail_docs:  # the tail would outgrow the base
            new._base, new._tail, new._tail_docs = _Postings(new._tokens, 0), {}, 0
            return new
        new._base = self._base
        add = _Postings(toks, len(self._tokens))
        tail = dict(self._tail)  # copy-on-write: arrays are shared, never changed
        for term in add.vocab:
            d, f = add.get(term)
            if term in tail:
                od, of = tail[term]
                d, f = np.concatenate([od, d]), np.concatenate([of, f])
            tail[term] = (d, f)
        new._tail = tail
        return new

    def has_term(self, term: str) -> bool:
        return term in self._base.vocab or term in self._tail

    def scores(self, terms: Sequence[str]) -> np.ndarray:
        """BM25 score of every document for ``terms`` (float32, as ``bm25s.BM25.get_scores``):
        per term, in order, ``float32(idf * tfc)`` added to the documents that hold it."""
        n = self.num_docs
        out = np.zeros(n, dtype=np.float32)
        if n == 0:
            return out
        avg = self._total_len / n  # what numpy's mean of the integer lengths gives
        k1, b = self.k1, self.b
        for term in terms:
            d0, f0 = self._base.get(term)
            d1, f1 = self._tail.get(term, (_EMPTY_I32, _EMPTY_F32))
            df = len(d0) + len(d1)
            if df == 0:
                continue
            idf = np.float32(math.log(1 + (n - df + 0.5) / (df + 0.5)))
            for docs, tf in ((d0, f0), (d1, f1)):
                if len(docs):
                    tfc = tf / (k1 * ((1 - b) + b * self._doc_len[docs] / avg) + tf)
                    out[docs] += (idf * tfc).astype(np.float32)
        return out

    def search(self, query: str, depth: int) -> list[Hit]:
        """The ``depth`` best-scoring items with a positive score, best first (ties by position)."""
        terms = [t for t in dict.fromkeys(search_terms(query)) if self.has_term(t)]
        if not terms or depth <= 0 or not self.ids:
            return []
        scores = self.scores(terms)
        k = min(depth, int((scores > 0).sum()))
        if k == 0:
            return []
        top = np.argpartition(-scores, k - 1)[:k]
        top = top[np.lexsort((top, -scores[top]))]  # score desc, position asc (deterministic)
        return [Hit(self.kinds[i], self.ids[i], float(scores[i])) for i in top]


__all__ = ["BM25Index", "doc_terms"]
