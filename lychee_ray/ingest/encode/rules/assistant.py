"""Assistant answers condensed: what was recommended, decided or produced — not each sentence.

A chat assistant answers in pages: headings, numbered tips, example phrasings in quotes, code,
tables, a drafted letter. One record per sentence floods the memory with the assistant's prose (a
100K-token chat gave ~4,000 records, nine in ten citing only assistant turns) while what a later
question needs is the user's side and what the assistant produced. So an assistant turn becomes:

* one **artifact** record per code block, table or drafted document (:mod:`.artifacts`);
* one **answer** record: "The assistant recommended for the user's question about <gist of the
  user's request>: <the answer's points> <its key sentences>" — the points are its headings and the
  bold leads of its list items; the key sentences are the ones stating a figure, date or name the
  user's turns did not (a computed date, a price, a chosen library), else advice cues. It cites the
  assistant turn and the user turn its gist comes from.

A short answer (less than ``condense_min_chars`` characters of prose and no artifact) keeps the
sentence records of :mod:`.encoder`: condensing a few sentences would say the same in one, and an
agent's short replies relay the identifiers a tool returned, which a condensed record would cut.
Persons are rewritten in the answer's narrative text only ("you" → the user); quoted, code and
drafted text keeps its own words (:mod:`.protect`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lychee_ray.config import AssistantRecordsConfig
from lychee_ray.ingest.encode.base import RecordDraft, SegmentTurn
from lychee_ray.ingest.encode.rules.artifacts import ArtifactLimits, code_record, document_record, table_record
from lychee_ray.ingest.encode.rules.blocks import Block, split_blocks
from lychee_ray.ingest.encode.rules.cleaning import content_word_count, strip_markup
from lychee_ray.ingest.encode.rules.metadata import extract_entities, extract_topics
from lychee_ray.ingest.encode.rules.persons import rewrite_persons
from lychee_ray.ingest.encode.rules.protect import mask
from lychee_ray.ingest.encode.rules.requests import LEAD as _LEAD
from lychee_ray.ingest.encode.rules.requests import is_request
from lychee_ray.text.sentences import split_sentences

_HEADING = re.compile(r"^\s{0,3}#{1,6}\s+(.+?)\s*#*\s*$")
_ITEM = re.compile(r"^\s*(?:[-*•+]|\d{1,2}[.)])\s+(.+)$")
_BOLD_LEAD = re.compile(r"^\s*(?:\*\*|__)(.+?)(?:\*\*|__)")
_NUMBERING = re.compile(r"^(?:step\s+)?\d{1,2}[.):]\s*|^step\s+\d+\s*[:.-]\s*", re.I)
# Headings that name a part of the answer, not a point of it.
_GENERIC_HEAD = re.compile(
    r"^(?:(?:an?\s+|the\s+)?(?:example|examples|sample|explanation|conclusion|summary|overview|introduction|usage|output|"
    r"code|final thoughts|next steps|key points(?: to remember)?|tips|additional tips|resources|considerations|notes?|"
    r"step-by-step(?: guide)?|here's how|how it works|putting it all together|full example|complete example|"
    r"updated code|revised version|sample (?:cover )?letter|sample message|template|result|results|solution|"
    r"answer|what to expect|how to prepare)[\s:.!]*)+(?:\w+\s*){0,2}$", re.I)
_ADVICE = re.compile(r"\b(?:recommend|suggest|should|consider|best|make sure|avoid|important|key|try|use|choose|"
                     r"focus|prioriti[sz]e|instead)\b", re.I)
_SPECIFIC = re.compile(r"\d+(?:[,.:/-]\d+)*%?|\b[A-Z][a-z]+[A-Z]\w*|\b[A-Z]{2,}\b")
_GIST_WORDS = 18
# The fallback opening sentence of an answer has at least this many words ("Great question." is not one).
_MIN_OPENING_WORDS = 4
_GIST_CUT = re.compile(r",\s+(?!\d)|\s+[—–]\s+|:\s+")
# A request clause with fewer content words than this says too little to name the question by.
_GIST_MIN_CONTENT = 3


@dataclass
class AnswerLimits:
    """Bounds of condensed answers (``encoder.rules.assistant``)."""

    condense_min_chars: int
    max_points: int
    key_sentences: int
    max_chars: int
    point_chars: int
    sentence_chars: int
    max_artifacts: int
    artifact: ArtifactLimits


def party(name: str) -> str:
    """How templates name a party: a role-named one as "the user" / "the assistant", else its name."""
    return f"the {name.lower()}" if name in ("User", "Assistant") else name


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    head = text[:limit].rsplit(" ", 1)[0]
    return (head or text[:limit]).rstrip(",;:") + " …"


def _cap(text: str) -> str:
    return text[:1].upper() + text[1:]


def narrative(text: str, speaker: str, other: str | None) -> str:
    """``text`` with I/you rewritten to the parties, outside its protected spans."""
    masked, restore = mask(text)
    body, _ = rewrite_persons(masked, speaker, other)
    return " ".join(restore(body).split())


def answer_points(prose: str, limit: int, chars: int) -> list[str]:
    """The answer's headings and list-item leads (bold lead, else the item up to its colon), in order."""
    out: list[str] = []
    for line in prose.split("\n"):
        head = _HEADING.match(line)
        item = _ITEM.match(line) if head is None else None
        if head is None and item is None:
            continue
        body = (head or item).group(1)  # type: ignore[union-attr]
        bold = _BOLD_LEAD.match(body)
        text = bold.group(1) if bold else body if head else body.split(":")[0]
        text = _NUMBERING.sub("", strip_markup(text)).strip().rstrip(":.")
        if not text or _GENERIC_HEAD.match(text) or not any(c.isalpha() for c in text):
            continue
        if head is None and not bold and len(text.split()) > 12:
            text = " ".join(text.split()[:12]) + " …"
        out.append(_cut(text, chars))
    return list(dict.fromkeys(out))[:limit]


def key_sentences(prose: str, known: str, limit: int, chars: int, advice: bool) -> list[str]:
    """Sentences of the prose (not headings, not list leads) that state a figure or name absent from
    ``known`` (the user's words), best first but returned in their order; with ``advice``, advice
    cues count too. Quoted example lines are not key sentences."""
    scored: list[tuple[int, int, str]] = []
    for i, line in enumerate(x for x in prose.split("\n") if x.strip() and not _HEADING.match(x)):
        body = strip_markup(_ITEM.sub(r"\1", line)).strip()
        if body.startswith(('"', "“")):
            continue
        for s in split_sentences(body):
            new = [m for m in _SPECIFIC.findall(s) if m not in known]
            score = 2 * len(new) + (1 if advice and _ADVICE.search(s) else 0)
            if score and len(s.split()) >= 4:
                scored.append((score, -i, s.strip()))
    best = sorted(scored, reverse=True)[:limit]
    return [_cut(s, chars) for _, _, s in sorted(best, key=lambda x: -x[1])]


def request_gist(user_turn: SegmentTurn | None, asker: str, helper: str) -> str:
    """What the user asked in ``user_turn``: its request clause (else its first sentence), a few
    words, persons rewritten ("how can I" → "how can the user")."""
    if user_turn is None:
        return ""
    prose = "\n".join(b.text for b in split_blocks(user_turn.content) if b.kind == "prose")
    sentences = [s for s in split_sentences(" ".join(strip_markup(prose).split())) if s.strip()]
    if not sentences:
        return ""
    ask = next((s for s in sentences if s.rstrip().endswith("?") or is_request(s)), sentences[0])
    clause = next((c for c in _GIST_CUT.split(ask) if is_request(c)), ask).strip().rstrip("?.! ")
    if content_word_count(clause, set()) < _GIST_MIN_CONTENT:  # "can you help me with that": say what "that" is
        clauses = [c for s in sentences for c in _GIST_CUT.split(s)]
        clause = max(clauses, key=lambda c: content_word_count(c, set())).strip().rstrip("?.!: ")
    words = _LEAD.sub("", clause).split()
    gist = " ".join(words[:_GIST_WORDS]) + (" …" if len(words) > _GIST_WORDS else "")
    return narrative(gist[:1].lower() + gist[1:], asker, helper)


class AssistantAnswers:
    """Records of an assistant turn in a chat with a user (see the module doc)."""

    def __init__(self, lim: AnswerLimits, max_entities: int, max_topics: int) -> None:
        self.lim = lim
        self.max_entities = max_entities
        self.max_topics = max_topics

    @classmethod
    def from_config(cls, a: AssistantRecordsConfig, max_entities: int, max_topics: int) -> AssistantAnswers:
        """The bounds of ``encoder.rules.assistant`` and the rules backend's entity and topic caps."""
        return cls(AnswerLimits(a.condense_min_chars, a.max_points, a.key_sentences, a.max_chars, a.point_chars,
                                a.sentence_chars, a.max_artifacts,
                                ArtifactLimits(a.artifact_chars, a.artifact_identifiers, max_topics, max_entities)),
                   max_entities, max_topics)

    def artifacts(self, blocks: list[Block], author: str, for_whom: str, turn_index: int,
                  other: str | None = None) -> list[RecordDraft]:
        """One record per code block, table or document, each with the prose line that introduced it
        (persons rewritten: its "your code" is ``other``'s code)."""
        out: list[RecordDraft] = []
        intro = ""
        art = self.lim.artifact
        for b in blocks:
            if b.kind == "prose":
                lines = [x for x in b.text.split("\n") if x.strip()]
                intro = lines[-1] if lines else ""
                continue
            purpose = _cut(narrative(strip_markup(_NUMBERING.sub("", intro.strip().lstrip("#").strip())).strip()
                                     .rstrip(":."), author.lower(), other), self.lim.point_chars) if intro else ""
            if b.kind == "code":
                out.append(code_record(b, author, for_whom, purpose, turn_index, art))
            elif b.kind == "table":
                out.append(table_record(b, author, for_whom, purpose, turn_index, art))
            else:
                out.append(document_record(b, author, for_whom, intro, turn_index, art))
            intro = ""
        if len(out) > self.lim.max_artifacts:  # the rest say what they are in one line each of the last record
            rest = out[self.lim.max_artifacts - 1:]
            last = rest[0].model_copy(update={"text": _cut(" ".join(r.text for r in rest), art.max_chars)})
            out = [*out[: self.lim.max_artifacts - 1], last]
        return out

    def turn_records(self, turn: SegmentTurn, speaker: str, other: str | None, user_turn: SegmentTurn | None,
                     known: dict[str, str], seen_caps: set[str]) -> list[RecordDraft] | None:
        """The artifact records and the answer record — or None when the turn is short prose without
        artifacts (the caller writes its sentence records)."""
        blocks = split_blocks(turn.content)
        prose = "\n".join(b.text for b in blocks if b.kind == "prose")
        author, whom = party(speaker), party(other) if other else ""
        for_whom = f" for {whom}" if whom else ""
        arts = self.artifacts(blocks, _cap(author), for_whom, turn.index, whom or None)
        if not arts and len(strip_markup(prose).strip()) < self.lim.condense_min_chars:
            return None
        answer = self.answer_record(prose, turn, author, whom, user_turn, known, seen_caps)
        return [*arts, answer] if answer is not None else arts

    def answer_record(self, prose: str, turn: SegmentTurn, author: str, whom: str, user_turn: SegmentTurn | None,
                      known: dict[str, str], seen_caps: set[str]) -> RecordDraft | None:
        """The condensed answer (see the module doc); None when the prose holds nothing to keep."""
        lim = self.lim
        points = answer_points(prose, lim.max_points, lim.point_chars)
        user_words = user_turn.content if user_turn is not None else ""
        keys = key_sentences(prose, user_words, lim.key_sentences, lim.sentence_chars, advice=not points)
        if not points and not keys:  # nothing stands out: the answer's opening sentence says what it is about
            keys = [_cut(s, lim.sentence_chars) for s in split_sentences(" ".join(strip_markup(prose).split()))
                    if len(s.split()) >= _MIN_OPENING_WORDS][:1]
        if not points and not keys:
            return None
        gist = request_gist(user_turn, whom or "the user", author) if user_turn is not None else ""
        about = f" for {whom}'s question about {gist}" if gist and whom else ""
        parts = [f"{_cap(author)} recommended{about}: {'; '.join(points)}."] if points else \
            [f"{_cap(author)} answered{about}:"]
        parts += [narrative(s, author, whom or None) for s in keys]
        text = _cut(" ".join(parts), lim.max_chars)
        body_for_meta = " ".join([*points, *keys])
        entities = extract_entities(body_for_meta, known, seen_caps, self.max_entities)
        topics = extract_topics(" ".join([gist, *points]), {e.lower() for e in entities}, self.max_topics, True)
        sources = sorted({turn.index} | ({user_turn.index} if gist and user_turn is not None else set()))
        return RecordDraft(type="procedure" if points else "fact", text=text, entities=entities, topics=topics,
                           source_turns=sources)


__all__ = ["AnswerLimits", "AssistantAnswers", "answer_points", "key_sentences", "narrative", "party", "request_gist"]
