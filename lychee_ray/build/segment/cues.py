"""Surface cues of a decision unit's text, next to the embedding signals (docs/segmenter.md §4).

Sentence embeddings of short chat turns say little about *where* a speaker moves on; the text's form
does. Two dialogue-act cues and one lexical one, all computed from the unit alone or from the units
already seen (online, no look-ahead):

* question: the unit's opening turn asks a question. In open-domain chat a new topic is typically
  introduced by a question ("what do you do for a living?"); in support dialogue by the user's request.
* answer: the previous unit ended with a question, so this unit answers it and continues its topic.
* lexical novelty: the share of the unit's content words absent from the open segment's recent units
  (names and nouns that embeddings of short turns blur).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

# Question marks of the scripts we expect (ASCII, full-width CJK, Arabic, Spanish opening mark).
QUESTION_MARKS = ("?", "\uff1f", "\u061f", "\u00bf")

# Word characters of any script (digits and apostrophes inside words kept: "don't", "2023").
_WORD = re.compile(r"[^\W_]+(?:'[^\W_]+)*", re.UNICODE)


def is_question(text: str) -> bool:
    """True when ``text`` contains a question mark (any of :data:`QUESTION_MARKS`)."""
    return any(q in text for q in QUESTION_MARKS)


def content_words(texts: Iterable[str], min_chars: int) -> tuple[str, ...]:
    """Distinct lower-cased words of at least ``min_chars`` characters, in first-seen order.

    A length floor instead of a stop-word list: short words are mostly function words in English
    and the rule needs no per-language list (it is a cue, not a parser).
    """
    seen: dict[str, None] = {}
    for text in texts:
        for w in _WORD.findall(text.lower()):
            if len(w) >= min_chars:
                seen.setdefault(w, None)
    return tuple(seen)


def lexical_novelty(words: Sequence[str], recent: Sequence[Sequence[str]]) -> float | None:
    """Share of ``words`` in none of the ``recent`` word lists; None when the unit has no content word."""
    if not words:
        return None
    known = {w for ws in recent for w in ws}
    return sum(1 for w in words if w not in known) / len(words)
