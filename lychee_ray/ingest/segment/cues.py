"""Surface cues of a decision unit's text, next to the embedding signals (docs/segmenter.md §4).

Sentence embeddings of short chat turns say little about *where* a speaker moves on; the text's form
does. Two dialogue-act cues and one lexical one, all computed from the unit alone or from the units
already seen (online, no look-ahead):

* question: the unit's opening turn asks a question. In open-domain chat a new topic is typically
  introduced by a question ("what do you do for a living?"); in support dialogue by the user's request.
* answer: the previous unit ended with a question, so this unit answers it and continues its topic.
* lexical novelty: the share of the unit's content words absent from the open segment's recent units
  (names and nouns that embeddings of short turns blur).

The question cue helps short-utterance chat and hurts long-utterance chat and agent logs
(docs/segmenter.md §3.5), so it can be gated on the stream's recent words per turn
(:class:`WordRate`), a statistic the segmenter observes in the stream itself.
"""

from __future__ import annotations

import re
from collections import deque
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


def count_words(text: str) -> int:
    """Words in ``text`` (runs of word characters of any script, as :func:`content_words` reads them)."""
    return len(_WORD.findall(text))


class WordRate:
    """The stream's recent words per turn: the mean over its last ``window`` non-empty turns.

    Counts are integers, so the mean is exact and a saved and restored stream gates every unit as an
    uninterrupted one does.
    """

    def __init__(self, window: int, min_history: int) -> None:
        self.min_history = min_history
        self.counts: deque[int] = deque(maxlen=window)

    def observe(self, counts: Iterable[int]) -> None:
        """Add the word counts of a unit's turns (empty turns carry no evidence and are skipped)."""
        self.counts.extend(c for c in counts if c > 0)

    def mean(self) -> float | None:
        """Words per turn over the window; None until ``min_history`` turns were seen."""
        if len(self.counts) < self.min_history:
            return None
        return sum(self.counts) / len(self.counts)

    def at_most(self, limit: float) -> bool:
        """The gate: True when ``limit`` is 0 (no gate) or the stream's mean is known and at most ``limit``."""
        if limit <= 0:
            return True
        m = self.mean()
        return m is not None and m <= limit


def lexical_novelty(words: Sequence[str], recent: Sequence[Sequence[str]]) -> float | None:
    """Share of ``words`` in none of the ``recent`` word lists; None when the unit has no content word."""
    if not words:
        return None
    known = {w for ws in recent for w in ws}
    return sum(1 for w in words if w not in known) / len(words)
