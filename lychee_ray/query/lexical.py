"""Lexical terms for the query side; the vocabulary itself lives in :mod:`lychee_ray.text.lexical`
(the build's memory-quality checks use the same words, and build sits below query)."""

from lychee_ray.text.lexical import ATTRIBUTION_TERMS, ATTRIBUTION_WORDS, lexical_terms, stem

__all__ = ["ATTRIBUTION_TERMS", "ATTRIBUTION_WORDS", "lexical_terms", "stem"]
