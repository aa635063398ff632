"""Record units: a turn's kept sentences, short ones merged into a neighbour."""

from __future__ import annotations

import re

from lychee_ray.ingest.encode.rules.cleaning import clean_sentence, content_word_count, is_trivial, strip_markup
from lychee_ray.text.sentences import split_sentences

# A sentence opening with an identifier (``self.conn.commit()``, ``get_order_details``, ``npm``-style
# camelCase) keeps its case: capitalising it would change the name.
IDENTIFIER_START = re.compile(r"^[a-z]\w*(?:_\w|\(|\.[a-z]\w|[A-Z])")


class RecordUnit:
    """A record-to-be: one or more sentences of one turn."""

    __slots__ = ("sentences", "question")

    def __init__(self, sentence: str) -> None:
        self.sentences = [sentence]
        self.question = sentence.rstrip().endswith("?")

    def add(self, sentence: str, front: bool = False) -> None:
        """Merge a sentence in (after the others, or before them with ``front``)."""
        if front:
            self.sentences.insert(0, sentence)
        else:
            self.sentences.append(sentence)
        self.question = self.question and sentence.rstrip().endswith("?")

    @property
    def text(self) -> str:
        """The unit's sentences joined."""
        return " ".join(self.sentences)


def record_units(
    content: str,
    vocative: re.Pattern,
    names_low: set[str],
    *,
    min_words: int,
    keep_questions: bool,
    question_min_content_words: int,
) -> tuple[list[RecordUnit], str | None]:
    """Clean, split, drop trivial sentences and merge short ones into record units.

    Also returns the turn's last sentence when it is a question too short to be a record on its
    own ("What did you paint?"): it still gives the next turn's answer its meaning.
    """
    text = strip_markup(content)
    names_t = tuple(names_low)
    units: list[RecordUnit] = []
    pending: list[str] = []  # short sentences waiting for a following unit
    trailing_question: str | None = None
    for raw in split_sentences(text):
        trailing_question = None
        s = clean_sentence(raw, vocative)
        if not s or not any(c.isalpha() for c in s):
            continue
        if is_trivial(s, names_t):
            continue
        if not IDENTIFIER_START.match(s):
            s = s[0].upper() + s[1:]
        question = s.rstrip().endswith("?")
        n_content = content_word_count(s, names_low)
        if question and (not keep_questions or n_content < question_min_content_words):
            trailing_question = s if n_content > 0 else None
            continue
        if n_content == 0:
            continue
        if len(s.split()) < min_words:
            if units:
                units[-1].add(s)
            else:
                pending.append(s)
            continue
        unit = RecordUnit(s)
        for p in reversed(pending):
            unit.add(p, front=True)
        pending = []
        units.append(unit)
    if pending:
        unit = RecordUnit(pending[0])
        for p in pending[1:]:
            unit.add(p)
        units.append(unit)
    return units, trailing_question
