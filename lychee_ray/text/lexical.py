"""Lexical terms: the word vocabulary shared by BM25, the selection's novelty rule, the extractive
answer and the build's memory-quality checks (lower-cased, stop-worded, lightly stemmed words; numbers kept).
"""

from __future__ import annotations

import re
from functools import lru_cache

from lychee_ray.text.stopwords import LEXICAL_STOPWORDS

_TOKEN = re.compile(r"[a-z0-9]+")
_STEM_CACHE = 65536  # distinct words seen by a process; stemming is on the query's hot path
_MIN_STEM_LEN = 3  # shorter words, and stems that would get shorter than this, are kept as they are


@lru_cache(maxsize=_STEM_CACHE)
def stem(word: str) -> str:
    """A light, fast English suffix stripper (plural, -ing, -ed, final e): "adopted" ~ "adoption"."""
    w = word
    if len(w) <= _MIN_STEM_LEN or w.isdigit():
        return w
    for suf, rep in (("ies", "y"), ("sses", "ss"), ("ing", ""), ("ed", ""), ("ion", ""), ("es", "e"), ("s", "")):
        if w.endswith(suf) and len(w) - len(suf) >= _MIN_STEM_LEN and not (suf == "s" and w.endswith(("ss", "us", "is"))):
            w = w[: len(w) - len(suf)] + rep
            break
    if len(w) > _MIN_STEM_LEN and w[-1] == w[-2] and w[-1] not in "lsz":  # running -> runn -> run
        w = w[:-1]
    if len(w) > _MIN_STEM_LEN and w.endswith("e"):
        w = w[:-1]
    return w


_NON_WORD = re.compile(r"[^0-9a-z]+")


def normalised_text(text: str) -> str:
    """Lower-cased words only: two texts that differ in case, spacing or punctuation compare equal."""
    return _NON_WORD.sub(" ", text.lower()).strip()


def lexical_terms(text: str) -> list[str]:
    """Lower-cased, stop-worded, stemmed word tokens (numbers kept) — BM25's vocabulary."""
    return [stem(t) for t in _TOKEN.findall(text.lower().replace("’", "'"))
            if t not in LEXICAL_STOPWORDS and (len(t) > 1 or t.isdigit())]


# Identifier-like tokens: letters and digits mixed, or joined by "_", "@", "." or "+" (reservation
# codes, order numbers, e-mail addresses, user ids). Kept whole, unstemmed, beside their pieces.
_IDENT = re.compile(r"[a-z0-9][a-z0-9_@.+]*[a-z0-9]")
_HAS_LETTER = re.compile(r"[a-z]")
_HAS_DIGIT = re.compile(r"[0-9]")


def identifier_terms(text: str) -> list[str]:
    """The identifier-like tokens of ``text``, whole and lower-cased (``fq8ape``, ``gift_card_8190333``,
    ``mia.li3818@example.com``): what an exact id search must match as one term."""
    out = []
    for tok in _IDENT.findall(text.lower()):
        if "@" in tok or "_" in tok or (_HAS_LETTER.search(tok) and _HAS_DIGIT.search(tok)) or \
                ("." in tok and _HAS_DIGIT.search(tok) and _HAS_LETTER.search(tok)):
            out.append(tok)
    return out


def search_terms(text: str) -> list[str]:
    """:func:`lexical_terms` plus the whole identifiers among them (:func:`identifier_terms`) that
    the word split or the stemmer changed: the lexical channel's vocabulary (documents and queries)."""
    terms = lexical_terms(text)
    have = set(terms)
    return terms + [t for t in identifier_terms(text) if t not in have]


# Attribution words a record adds around a turn's content ("Caroline said: ...", "Melanie shared a
# photo ...") — not new information when comparing a record with the turn it came from.
ATTRIBUTION_WORDS = frozenset("said say says saying ask asked asks asking tell told tells mention mentioned share shared "
                              "sharing photo image picture".split())
# The same words as lexical terms (what the novelty rule subtracts).
ATTRIBUTION_TERMS = frozenset(stem(w) for w in ATTRIBUTION_WORDS)


__all__ = ["ATTRIBUTION_TERMS", "ATTRIBUTION_WORDS", "identifier_terms", "lexical_terms", "normalised_text", "search_terms",
           "stem"]
