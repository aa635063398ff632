"""Shared images: ``[image: ...]`` captions (the LoCoMo adapter puts BLIP captions there) as records."""

from __future__ import annotations

import re

from lychee_ray.ingest.encode.base import RecordDraft
from lychee_ray.ingest.encode.rules.metadata import extract_entities, extract_topics

_IMAGE = re.compile(r"\[image:\s*([^\]]*)\]", re.I)
_PHOTOGRAPHY = re.compile(r"^an?\s+photograph(?:y)?\s+of\b", re.I)  # BLIP often says "a photography of"
_PHOTO_PREFIX = re.compile(
    r"^(?:a|an)\s+(?:photo|photograph|photography|picture|image|screenshot|drawing|painting|close up|closeup)\b", re.I)
# Words every caption record has: not topics.
_CAPTION_WORDS = {"photo", "picture", "image", "shared"}


def split_captions(content: str) -> tuple[list[str], str]:
    """(the turn's image captions, its content with the captions blanked out)."""
    if "[image" not in content.lower():
        return [], content
    captions = [c.strip() for c in _IMAGE.findall(content) if c.strip()]
    return captions, _IMAGE.sub(" ", content)


def caption_record(caption: str, speaker: str, known: dict[str, str], seen_caps: set[str], turn_index: int, *,
                   max_entities: int, max_topics: int, bigrams: bool) -> RecordDraft:
    """The record for one caption: "Melanie shared a photo of a sunset over a lake."."""
    cap = _PHOTOGRAPHY.sub("a photo of", caption.strip().rstrip("."))
    text = f"{speaker} shared {cap}." if _PHOTO_PREFIX.match(cap) else f"{speaker} shared a photo of {cap}."
    entities = extract_entities(text, known, seen_caps, max_entities)
    exclude = {w.lower() for e in entities for w in e.split()} | set(known) | _CAPTION_WORDS
    topics = extract_topics(cap, exclude, max_topics, bigrams)
    return RecordDraft(type="fact", text=text, entities=entities, topics=topics, time=None, source_turns=[turn_index])
