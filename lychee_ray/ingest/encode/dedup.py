"""Near-duplicate drafts of one encode reply collapse into one record with all their sources.

A user who says "my deadline is March 15" twice in a segment, an assistant that repeats the
user's figures, a model that writes the same fact from two turns: one record is the memory, and
every turn that said it is its source (a question about either turn finds it). Two drafts are
*near-duplicates* (:func:`near_duplicates`) when

* they have the same type and the same artifact kind,
* their content words (:func:`~lychee_ray.ingest.encode.guard.content_terms`: no attribution verbs,
  calendar words or bare numbers) overlap with Jaccard ≥ ``encoder.dedup.min_jaccard`` (0.8), and
* their **specifics** are equal, in the same order: numbers, capitalised names, identifiers
  (``snake_case``, dotted and slashed names, calls, ``key=value`` arguments) and time span. "The
  meeting is at 3 PM" and "The meeting is at 4 PM" differ only in a number: that is an update, never
  a duplicate, whatever the word overlap.

The first draft is kept (its text, type, time), with the sources, entities and topics of every
draft folded into it, in order. The scope is one reply (one segment): records of earlier segments
are committed and never rewritten (appends are tail-only, and k increments must equal one build —
docs/incremental.md); a later segment restating an earlier record is the business of the guard's
echo check (a copy its turns do not say again is rejected) and of slot linking.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lychee_ray.ingest.encode.base import RecordDraft, merge_into, normalise_artifact
from lychee_ray.ingest.encode.guard import content_terms
from lychee_ray.core.records import normalise_type

_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_IDENT = re.compile(r"\b\w+=[^\s,;)]+|\b\w+(?:[._/]\w+)+(?:\(\))?|\b\w+\(\)|\b[a-z]+[A-Z]\w*")
_WORD = re.compile(r"[A-Za-z][\w'&-]*")
# Only a sentence's first word is capitalised for being first: after a colon or a bracket a capital
# names something ("Policy (Cancel flight): …"), and a difference there keeps two drafts apart.
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+)$")
# Capitalised words that name the parties or open clauses: never a difference between two drafts.
_NOT_NAMES = frozenset({"i", "user", "assistant", "the", "a", "an"})


@dataclass(frozen=True)
class Specifics:
    """What must be equal for two drafts to be one: numbers, names, identifiers (each in order of
    first appearance: "from DEN to PHL" is not "from PHL to DEN") and time."""

    numbers: tuple[str, ...]
    names: tuple[str, ...]
    identifiers: tuple[str, ...]
    time: tuple[str | None, str | None]


def specifics(d: RecordDraft) -> Specifics:
    """A draft's specifics: numbers (thousands separators ignored), capitalised words that do not
    open a sentence, identifiers and ``key=value`` arguments, and its time span."""
    text = d.text
    numbers = tuple(dict.fromkeys(n.replace(",", "") for n in _NUMBER.findall(text)))
    names: list[str] = []
    for m in _WORD.finditer(text):
        w = m.group(0)
        if w[:1].isupper() and not _SENTENCE_START.search(text[: m.start()]) and w.lower() not in _NOT_NAMES:
            names.append(w.lower())
    idents = tuple(dict.fromkeys(_IDENT.findall(text)))
    t = d.time
    return Specifics(numbers, tuple(dict.fromkeys(names)), idents, (t.start, t.end) if t else (None, None))


@dataclass
class _Draft:
    """What the comparison reads of a draft, computed once per draft of a reply (a fold compares
    each draft with every kept one; merging adds sources, never changes these)."""

    kind: tuple[str | None, str | None]
    text: str
    terms: frozenset[str]
    draft: RecordDraft
    _specifics: Specifics | None = None

    @classmethod
    def of(cls, d: RecordDraft) -> _Draft:
        return cls((normalise_type(d.type), normalise_artifact(d.artifact)), " ".join(d.text.split()),
                   frozenset(content_terms(d.text)), d)

    @property
    def specifics(self) -> Specifics:
        if self._specifics is None:
            self._specifics = specifics(self.draft)
        return self._specifics


def _same(a: _Draft, b: _Draft, min_jaccard: float) -> bool:
    if a.kind != b.kind:
        return False
    if a.text != b.text:
        if not a.terms or not b.terms or len(a.terms & b.terms) / len(a.terms | b.terms) < min_jaccard:
            return False
    return a.specifics == b.specifics


def near_duplicates(a: RecordDraft, b: RecordDraft, min_jaccard: float) -> bool:
    """Whether ``b`` says what ``a`` says (see the module doc); never when their specifics differ."""
    return _same(_Draft.of(a), _Draft.of(b), min_jaccard)


def fold_near_duplicates(drafts: list[RecordDraft], min_jaccard: float) -> tuple[list[RecordDraft], int]:
    """(the drafts with every near-duplicate folded into the first of its kind, how many were folded)."""
    kept: list[_Draft] = []
    folded = 0
    for d in drafts:
        new = _Draft.of(d)
        for k in kept:
            if _same(k, new, min_jaccard):
                k.draft = merge_into(k.draft, d)
                folded += 1
                break
        else:
            kept.append(new)
    return [k.draft for k in kept], folded


__all__ = ["Specifics", "fold_near_duplicates", "near_duplicates", "specifics"]
