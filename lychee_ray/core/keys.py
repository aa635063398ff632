"""Normalised keys of entities and topics: one spelling for the build's evidence nodes and the
query side's exact key matches (so both sides always agree on what "the same name" is)."""

from __future__ import annotations

import re
import unicodedata

_POSSESSIVE = re.compile(r"(?:'s|’s|s'|s’)\b")
_PUNCT = re.compile(r"[^\w\s]")


def normalise_key(text: str) -> str:
    """Case, whitespace, punctuation and possessives folded: "Caroline's  Dog!" → "caroline dog"."""
    t = unicodedata.normalize("NFKC", text).lower()
    t = _POSSESSIVE.sub("", t)
    t = _PUNCT.sub(" ", t)
    return " ".join(t.split())


__all__ = ["normalise_key"]
