"""Sentence boundaries: the splitter, its rough variant, and the sentence around a span.

- :func:`split_sentences` — the splitter: abbreviations (Mr./Dr./e.g.), initials and decimals do not
  end a sentence, closing quotes/brackets stay with their sentence, newlines always split. Used
  where a sentence becomes a record (the rules encoder).
- :func:`rough_sentences` — the rough variant: breaks after every ``.``/``!``/``?`` that whitespace
  follows and at newlines, pieces returned as split (unstripped, possibly empty). Used to score
  already-clean record texts sentence by sentence (the extractive answer), where an abbreviation
  cut only costs a slightly shorter snippet.
- :func:`sentence_around` — the sentence containing a span (for tense cues around a time expression).
"""

from __future__ import annotations

import re

# Tokens ending in "." that do not end a sentence.
ABBREVIATIONS = frozenset(
    "mr mrs ms dr prof sr jr st vs etc e.g i.e eg ie a.m p.m am pm u.s u.k no approx dept est fig inc ltd co "
    "jan feb mar apr jun jul aug sep sept oct nov dec mt ave rd blvd".split()
)

_BOUNDARY = re.compile(r"([.!?]+)([\"')\]]*)(\s+)|\n+")
# How far back a "." looks for the word it ends (an abbreviation is short).
_ABBREVIATION_LOOKBACK = 12
_ROUGH_BOUNDARY = re.compile(r"(?<=[.!?])\s+|\n+")
_SENTENCE_END = re.compile(r"[.!?\n]")


def split_sentences(text: str) -> list[str]:
    """Split a turn into sentences; newlines always split, '.' after an abbreviation does not."""
    out: list[str] = []
    start = 0
    for m in _BOUNDARY.finditer(text):
        if m.group(0).startswith("\n"):
            cut = m.start()
            nxt = m.end()
        else:
            if m.group(1) == ".":
                before = text[max(start, m.start() - _ABBREVIATION_LOOKBACK) : m.start()].rsplit(None, 1)  # last word only
                last = before[-1].lower().rstrip(".") if before else ""
                if last in ABBREVIATIONS or (len(last) == 1 and last.isalpha()):
                    continue  # "Dr. Smith", "J. Doe"
            cut = m.end(2)
            nxt = m.end()
        piece = text[start:cut].strip()
        if piece:
            out.append(piece)
        start = nxt
    tail = text[start:].strip()
    if tail:
        out.append(tail)
    return out


def rough_sentences(text: str) -> list[str]:
    """Pieces of ``text`` split after ``.``/``!``/``?`` + whitespace and at newlines (not stripped)."""
    return _ROUGH_BOUNDARY.split(text)


def sentence_around(text: str, start: int, end: int) -> str:
    """The sentence of ``text`` around the span ``start:end`` (bounded by ``.``, ``!``, ``?``, newline)."""
    s = max((m.end() for m in _SENTENCE_END.finditer(text, 0, start)), default=0)
    e = _SENTENCE_END.search(text, end)
    return text[s : e.start() if e else len(text)]


__all__ = ["ABBREVIATIONS", "rough_sentences", "sentence_around", "split_sentences"]
