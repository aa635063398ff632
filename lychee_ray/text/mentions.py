"""Mentions of a name in a text, and the text without them: what forgetting an entity keeps.

A record or turn that names an entity may hold other facts too ("User's beagle Biscuit loves the
park and User has a peanut allergy."). Forgetting the entity removes the parts that name it and
keeps the rest:

- the text is cut into sentences (after ``.``/``!``/``?`` and whitespace, and at newlines), a
  sentence naming the entity into clauses (at ``;`` and at the coordinating words of
  :data:`CONJUNCTIONS`);
- a clause that names the entity goes;
- a piece that starts in lower case (and not with a pronoun) is no clause of its own but more of the
  clause before it ("User has a beagle called Biscuit and a peanut allergy": "a peanut allergy");
  when that clause goes, the piece keeps its head — the clause's words before its first determiner,
  "User has" — unless the head names the entity too, and then it goes with it.

:func:`strip_mentions` rewrites a record's text this way (the surviving sentence reads on its own);
:func:`redact_mentions` replaces each part that goes with a marker and leaves the rest of a raw turn
as the user wrote it. Names match as whole words, in any case, with any run of whitespace between
their words (:func:`mention_pattern`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# words that join two clauses of one sentence (a clause naming the entity is cut off at them)
CONJUNCTIONS = ("and", "but", "while", "whereas", "although", "though", "so", "also", "plus")
# lower-case words a clause may start with (a piece starting with another lower-case word is a fragment)
_PRONOUNS = frozenset("i we you he she it they there this that these those who which".split())

_SENTENCE_SEP = re.compile(r"((?<=[.!?])\s+|\n+)")
_CLAUSE_SEP = re.compile(r"(\s*;\s*|,?\s+(?:" + "|".join(CONJUNCTIONS) + r")\s+)", re.IGNORECASE)
_TERMINAL = re.compile(r"[.!?]+[\"')\]]*\s*$")
# a clause's head: its words before the first determiner ("User has" of "User has a beagle")
_HEAD = re.compile(r"^(.*?\S)\s+(?:a|an|the|my|your|his|her|its|our|their|some|several|two|three|\S+'s)\s",
                   re.IGNORECASE)
_WORD = re.compile(r"\w")


def mention_pattern(name: str) -> re.Pattern[str]:
    """``name`` as a whole-word, case-insensitive pattern (any whitespace between its words)."""
    words = name.split()
    if not words:
        raise ValueError("an empty name")
    return re.compile(r"(?<!\w)" + r"\s+".join(re.escape(w) for w in words) + r"(?!\w)", re.IGNORECASE)


@dataclass(frozen=True)
class _Piece:
    connector: str  # the text joining it to the piece before ("" for a sentence's first)
    body: str
    keep: bool
    head: str | None = None  # a kept fragment of a dropped clause: that clause's head, put in front


def _is_fragment(body: str) -> bool:
    first = body.split(None, 1)[0] if body.split() else ""
    return bool(first) and first[0].islower() and first.casefold() not in _PRONOUNS


def _pieces(sentence: str, pattern: re.Pattern[str]) -> list[_Piece]:
    """``sentence`` (without its terminal punctuation) as clauses and fragments, each marked kept or not."""
    parts = _CLAUSE_SEP.split(sentence)
    out: list[_Piece] = []
    clause_head: str | None = None  # the head of the last clause that went (None: it stayed)
    clause_kept = True
    for i in range(0, len(parts), 2):
        connector = parts[i - 1] if i else ""
        body = parts[i]
        named = bool(pattern.search(body))
        if i and _is_fragment(body):
            if named:
                out.append(_Piece(connector, body, False))
            elif clause_kept:
                out.append(_Piece(connector, body, True))
            else:
                ok = clause_head is not None and not pattern.search(clause_head)
                out.append(_Piece(connector, body, ok, clause_head if ok else None))
            continue
        clause_kept = not named
        head = _HEAD.match(body)
        clause_head = None if clause_kept or head is None else head.group(1)
        out.append(_Piece(connector, body, clause_kept))
    return out


def _split_terminal(sentence: str) -> tuple[str, str]:
    m = _TERMINAL.search(sentence)
    return (sentence[: m.start()], sentence[m.start():]) if m else (sentence, "")


def _capitalised(text: str) -> str:
    return text[:1].upper() + text[1:]


def strip_mentions(text: str, pattern: re.Pattern[str]) -> str | None:
    """``text`` without its clauses naming ``pattern``'s name (module doc); ``text`` itself when it
    names it nowhere; None when nothing of it is left."""
    if not pattern.search(text):
        return text
    parts = _SENTENCE_SEP.split(text)
    kept: list[str] = []
    for i in range(0, len(parts), 2):
        sentence = parts[i].strip()
        if not sentence:
            continue
        if not pattern.search(sentence):
            kept.append(sentence)
            continue
        body, terminal = _split_terminal(sentence)
        out = ""
        for p in _pieces(body, pattern):
            if not p.keep:
                continue
            piece = f"{p.head} {p.body}" if p.head else p.body
            out = _capitalised(piece.strip()) if not out else out + p.connector + piece
        if out.strip():
            kept.append(out.rstrip(" ,;") + (terminal.strip() or "."))
    result = " ".join(kept)
    return result if _WORD.search(result) else None


def redact_mentions(text: str, pattern: re.Pattern[str], marker: str) -> str:
    """``text`` with each clause naming ``pattern``'s name (module doc) replaced by ``marker``
    (neighbouring ones by one), the rest as it was; ``text`` itself when it names it nowhere."""
    if not pattern.search(text):
        return text
    parts = _SENTENCE_SEP.split(text)
    out: list[str] = []
    for i, part in enumerate(parts):
        if i % 2 or not pattern.search(part):
            out.append(part)
            continue
        lead = part[: len(part) - len(part.lstrip())]
        body, terminal = _split_terminal(part.strip())
        pieces: list[str] = []
        for p in _pieces(body, pattern):
            if p.keep:
                pieces.append(p.connector + p.body)
            elif not pieces or not pieces[-1].endswith(marker):
                pieces.append((p.connector if pieces else "") + marker)
        out.append(lead + "".join(pieces) + terminal)
    return "".join(out)


__all__ = ["CONJUNCTIONS", "mention_pattern", "redact_mentions", "strip_mentions"]
