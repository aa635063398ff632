"""Question → answer pairs: a short answer folded into the record of the question it answers.

An elliptical answer ("A sunset by the lake.") means nothing alone; an LLM reading the segment
writes the pair as one fact, and so does the rules encoder.
"""

from __future__ import annotations

from lychee_ray.ingest.encode.base import RecordDraft
from lychee_ray.ingest.encode.rules.cleaning import strip_markup
from lychee_ray.ingest.encode.rules.metadata import classify
from lychee_ray.ingest.encode.rules.persons import rewrite_persons

# The question a turn ended with: (asker, its index in the records or None, its draft).
OpenQuestion = tuple[str, int | None, RecordDraft]


def fold_answer(records: list[RecordDraft], question: OpenQuestion, answer: RecordDraft, speaker: str, *,
                max_entities: int, max_topics: int) -> None:
    """Merge an answer into the record of the question it answers (in place, or appended when the
    question was too short to be a record of its own)."""
    _, index, q = question
    text = answer.text
    if text.startswith(f"{speaker} said: "):
        text = f"{speaker} answered: " + text[len(speaker) + len(" said: "):]
    elif not text.startswith(speaker):  # "Mostly at Mount Tam with Melanie's dad." names them later
        text = f"{speaker} answered: {text}"
    merged_text = f"{q.text} {text}"
    entities = list(dict.fromkeys(q.entities + answer.entities))[: max(max_entities, 1)]
    topics = list(dict.fromkeys(answer.topics + q.topics))[:max_topics]
    time = answer.time or q.time
    merged = RecordDraft(
        type=classify(merged_text, time is not None), text=merged_text, entities=entities, topics=topics,
        time=time, source_turns=list(dict.fromkeys(q.source_turns + answer.source_turns)),
    )
    if index is None:
        records.append(merged)
    else:
        records[index] = merged


def short_answer(content: str, speaker: str, other: str | None, max_words: int) -> str | None:
    """The whole turn, cleaned and person-rewritten, when it has at most ``max_words`` words."""
    text = " ".join(strip_markup(content).split())
    if not text or not any(c.isalpha() for c in text) or len(text.split()) > max_words:
        return None
    body, _ = rewrite_persons(text, speaker, other)
    return " ".join(body.split())
