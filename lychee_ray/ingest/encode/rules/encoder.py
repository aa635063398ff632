"""The rules encoder: a segment's turns → sentence-level record drafts (steps in :mod:`lychee_ray.ingest.encode.rules`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lychee_ray.ingest.encode.base import (
    EncodeOutput,
    EncodeRequest,
    EncodeResult,
    RecordDraft,
    SegmentTurn,
    TimeDraft,
    merge_into,
    merge_to_summary,
)
from lychee_ray.ingest.encode.rules.agent import AgentRecords, policy_records, strip_calls
from lychee_ray.ingest.encode.rules.answers import OpenQuestion, fold_answer, short_answer
from lychee_ray.ingest.encode.rules.assistant import AssistantAnswers, party
from lychee_ray.ingest.encode.rules.blocks import split_blocks
from lychee_ray.ingest.encode.rules.captions import caption_record, split_captions
from lychee_ray.ingest.encode.rules.cleaning import strip_markup, vocative_pattern
from lychee_ray.ingest.encode.rules.metadata import classify, extract_entities, extract_topics
from lychee_ray.ingest.encode.rules.persons import PAIR_CUES, rewrite_persons
from lychee_ray.ingest.encode.rules.protect import mask
from lychee_ray.ingest.encode.rules.requests import split_requests
from lychee_ray.ingest.encode.rules.speakers import (
    add_nicknames,
    display_name,
    known_names,
    mid_sentence_caps,
    other_speaker,
    resolution_state,
    segment_names,
)
from lychee_ray.ingest.encode.rules.units import RecordUnit, record_units
from lychee_ray.config import AssistantRecordsConfig, ToolRecordsConfig
from lychee_ray.text.dates import parse_iso_datetime
from lychee_ray.text.time.rewrite import rewrite_relative
from lychee_ray.names import RULES_BACKEND, WeMode

# Topics of the segment's last record the resolution note keeps.
_STATE_TOPICS = 2
# The roles of an assistant chat whose turns get its treatment.
_CHAT_ROLES = ("user", "assistant")


class RulesEncoder:
    """Deterministic offline :class:`~lychee_ray.ingest.encode.base.SegmentEncoder` (one record per sentence).

    Parameters (wired from the ``encoder`` config section):

    - ``min_words`` (4): sentences with fewer words are merged with a neighbouring sentence of the
      same turn, or dropped when alone and without a content word;
    - ``max_entities`` (8), ``max_topics`` (6): caps per record;
    - ``question_min_content_words`` (2): questions with fewer content words are dropped as chit-chat;
    - ``keep_questions`` (True): keep other questions as "A asked: ..." records;
    - ``we_mode`` ("auto"): "auto" rewrites we/our to "A and B" only on contact cues (talked, chat,
      catch up, ...), "pair" always, "keep" never;
    - ``image_records`` (True): a record per shared image caption;
    - ``topic_bigrams`` (True): adjacent content-word pairs as topics;
    - ``max_records_per_turn`` (0 = unlimited): cap for very long turns (assistant answers);
    - ``day_first`` (False): read "05/08/2023" as 5 August instead of May 8;
    - ``pair_answers`` (True), ``pair_max_answer_words`` (15): fold a short answer into the record of
      the question that ended the previous turn (step 9 of :mod:`lychee_ray.ingest.encode.rules`);
    - ``summary`` (False): ``encoder.mode: summary`` — the segment's sentences are merged into ONE
      summary record (:func:`~lychee_ray.ingest.encode.base.merge_to_summary`), the paper's summary-level ablation;
    - ``tools`` (``encoder.tools``): how agent logs' tool traffic and system prompts become records
      (:mod:`lychee_ray.ingest.encode.rules.agent`); tool results are not split into sentences;
    - ``assistant`` (``encoder.rules.assistant``): assistant chats — answers condensed, one record per
      code block / table / drafted document, the user's statements out of their questions
      (:mod:`lychee_ray.ingest.encode.rules.assistant`).
    """

    backend = RULES_BACKEND
    model = "rules-v2"

    def __init__(
        self,
        *,
        min_words: int = 4,
        max_entities: int = 8,
        max_topics: int = 6,
        question_min_content_words: int = 2,
        keep_questions: bool = True,
        we_mode: WeMode = "auto",
        image_records: bool = True,
        topic_bigrams: bool = True,
        max_records_per_turn: int = 0,
        day_first: bool = False,
        summary: bool = False,
        pair_answers: bool = True,
        pair_max_answer_words: int = 15,
        tools: ToolRecordsConfig | None = None,
        assistant: AssistantRecordsConfig | dict[str, Any] | None = None,
    ) -> None:
        if we_mode not in ("auto", "pair", "keep"):
            raise ValueError(f"we_mode must be auto, pair or keep, got {we_mode!r}")
        self.min_words = min_words
        self.max_entities = max_entities
        self.max_topics = max_topics
        self.question_min_content_words = question_min_content_words
        self.keep_questions = keep_questions
        self.we_mode = we_mode
        self.image_records = image_records
        self.topic_bigrams = topic_bigrams
        self.max_records_per_turn = max_records_per_turn
        self.day_first = day_first
        self.summary = summary
        self.pair_answers = pair_answers
        self.pair_max_answer_words = pair_max_answer_words
        self.tools = tools or ToolRecordsConfig()
        self.agent = AgentRecords(self.tools, max_entities, max_topics)
        a = assistant if isinstance(assistant, AssistantRecordsConfig) else AssistantRecordsConfig(**(assistant or {}))
        self.assistant_cfg = a
        self.answers = AssistantAnswers.from_config(a, max_entities, max_topics)

    async def encode(self, request: EncodeRequest) -> EncodeResult:
        """Encode one segment (pure CPU, well under 1 ms per chat turn; nothing to await)."""
        out = self.encode_sync(request)
        return EncodeResult(output=merge_to_summary(out) if self.summary else out, attempts=1, model=self.model)


    def encode_sync(self, request: EncodeRequest) -> EncodeOutput:
        """The synchronous core of :meth:`encode` (also handy for benchmarks)."""
        if request.kind == "system_prompt":  # the conversation's instructions: its rules, nothing else
            return EncodeOutput(records=policy_records(request, self.tools, self.max_topics),
                                resolution_state=request.prev_resolution_state)
        seg_names = segment_names(request)
        all_names, known = known_names(request)
        # nicknames: name prefixes of ≥3 letters used as a vocative ("Hey Mel!", "Thanks, Mel.")
        names_low = add_nicknames(request.turns, all_names, known)
        vocative = vocative_pattern(names_low)
        seen_caps = mid_sentence_caps(request.turns)
        # a user talking to an assistant: answers are condensed, artifacts recorded whole, the user's
        # statements taken out of their questions (turn by turn: a long answer may be a segment alone)
        chat = self.assistant_cfg.enabled and is_assistant_chat(request)

        records: list[RecordDraft] = []
        last_entities: list[str] = []
        last_topics: list[str] = []
        # the question that ended the previous turn
        open_question: OpenQuestion | None = None
        last_user: SegmentTurn | None = None
        for turn in request.turns:
            said = strip_calls(turn.content) if turn.tool_calls else turn.content
            if turn.role == "tool" or not said.strip():
                continue  # tool traffic: records from its structure (agent.py), not its sentences
            speaker = display_name(turn.speaker, turn.role)
            other = other_speaker(speaker, request, seg_names, all_names)
            ref = parse_iso_datetime(turn.session_date)
            asked = False
            if chat and turn.role in _CHAT_ROLES:
                view = turn if said == turn.content else turn.model_copy(update={"content": said})
                if turn.role == "assistant":
                    done = self.answers.turn_records(view, speaker, other, last_user, known, seen_caps)
                    if done is not None:  # condensed: no sentence records, no question-answer pairing
                        records.extend(done)
                        open_question = None
                        continue
                else:
                    blocks = split_blocks(said)
                    author = party(speaker)
                    records.extend(self.answers.artifacts(blocks, author[:1].upper() + author[1:],
                                                          f" with {party(other)}" if other else "", turn.index,
                                                          party(other) if other else None))
                    said = "\n".join(b.text for b in blocks if b.kind == "prose")
                    if self.assistant_cfg.split_requests:
                        said, asked = split_requests(strip_markup(said), names_low), True
                    last_user = turn
            captions, content = split_captions(said)
            units, trailing_question = record_units(
                content, vocative, names_low, min_words=self.min_words, keep_questions=self.keep_questions,
                question_min_content_words=self.question_min_content_words,
            )
            question = open_question if open_question is not None and open_question[0] != speaker else None
            open_question = None
            made = 0
            for ui, unit in enumerate(units):
                if self.max_records_per_turn and made >= self.max_records_per_turn:
                    break
                draft = self._record(unit, speaker, other, ref, known, seen_caps, turn, asked)
                if draft is None:
                    continue
                if ui == 0 and question is not None and not unit.question and len(unit.text.split()) <= self.pair_max_answer_words:
                    self._fold(records, question, draft, speaker)
                    question = None
                else:
                    records.append(draft)
                made += 1
                last_entities = [e for e in draft.entities if e not in all_names] or last_entities
                last_topics = draft.topics[:_STATE_TOPICS] or last_topics
                if ui == len(units) - 1 and unit.question and self.pair_answers:
                    open_question = (speaker, len(records) - 1, records[-1])
            if question is not None and not units:
                # a turn of only reactions ("Yes! It was so fun!") still answers the question
                answer = short_answer(content, speaker, other, self.pair_max_answer_words)
                if answer is not None:
                    draft = RecordDraft(type="fact", text=f"{speaker} said: {answer}", entities=[speaker], topics=[],
                                        time=None, source_turns=[turn.index])
                    self._fold(records, question, draft, speaker)
            if trailing_question is not None and self.pair_answers and open_question is None:
                q = self._record(RecordUnit(trailing_question), speaker, other, ref, known, seen_caps, turn, asked)
                if q is not None:
                    open_question = (speaker, None, q)
            if self.image_records:
                for cap in captions:
                    records.append(caption_record(cap, speaker, known, seen_caps, turn.index,
                                                  max_entities=self.max_entities, max_topics=self.max_topics,
                                                  bigrams=self.topic_bigrams))
        records.extend(self.agent.segment_records(request))
        state = resolution_state(seg_names, last_entities, last_topics, request.prev_resolution_state)
        return EncodeOutput(records=_first_of_each(records), resolution_state=state)

    def _fold(self, records: list[RecordDraft], question: OpenQuestion, answer: RecordDraft, speaker: str) -> None:
        fold_answer(records, question, answer, speaker, max_entities=self.max_entities, max_topics=self.max_topics)

    def _record(
        self,
        unit: RecordUnit,
        speaker: str,
        other: str | None,
        ref: datetime | None,
        known: dict[str, str],
        seen_caps: set[str],
        turn: SegmentTurn,
        asked: bool = False,
    ) -> RecordDraft | None:
        """One unit's record draft: dates made absolute and persons named outside the unit's protected
        spans (code, quotes, URLs, paths, terms: :mod:`~.protect`), attributed, metadata extracted.
        ``asked``: a question of a user's turn whose statements were taken out (a question, type event:
        never a fact or preference)."""
        masked, restore = mask(unit.text)
        text, mentions = rewrite_relative(masked, ref, day_first=self.day_first)
        we_pair = self.we_mode == "pair" or (self.we_mode == "auto" and PAIR_CUES.search(text) is not None)
        body, _left_we = rewrite_persons(text, speaker, other, we_pair=we_pair)
        body = " ".join(restore(body).split())
        text = restore(text)
        entities = extract_entities(body, known, seen_caps, self.max_entities)
        exclude = {w.lower() for e in entities for w in e.split()} | set(known)
        topics = extract_topics(body, exclude, self.max_topics, self.topic_bigrams)
        if speaker not in entities:
            entities = [speaker] + entities[: max(0, self.max_entities - 1)]
            verb = "asked" if unit.question else "said"
            body = f"{speaker} {verb}: {body}"
        timed = [m for m in mentions if m.time.start]
        time = None
        if timed:
            t = timed[0].time
            time = TimeDraft(start=t.start, end=t.end, expression=t.expression)
        rtype = classify(text, bool(timed))
        if rtype == "preference" and turn.role == "assistant":  # an assistant offering options has no preferences
            rtype = "fact"
        if asked and unit.question:
            rtype = "event"
        elif asked and rtype == "procedure":  # "I'm trying to figure out how to …" states a plan, not a how-to
            rtype = "event"
        return RecordDraft(
            type=rtype,
            text=body,
            entities=entities,
            topics=topics,
            time=time,
            source_turns=[turn.index],
        )


def _first_of_each(records: list[RecordDraft]) -> list[RecordDraft]:
    """The drafts with each repeat of an earlier (type, text) of the same reply folded into the first
    (its source turns added there), in order.

    A segment that says the same sentence twice would yield the same record twice; the reply's structural
    check would drop the copy with its source (``duplicate_in_reply``), so an extractive backend does not
    emit it: the rules backend never shows up as rejected for it. Done once at the end, because answer
    folding refers to earlier drafts by position.
    """
    first: dict[tuple[str, str], int] = {}
    out: list[RecordDraft] = []
    for d in records:
        key = (d.type, " ".join(d.text.split()))
        if key in first:
            out[first[key]] = merge_into(out[first[key]], d)
        else:
            first[key] = len(out)
            out.append(d)
    return out


def is_assistant_chat(request: EncodeRequest) -> bool:
    """A user talking with an assistant: the segment has an assistant turn that says something besides
    tool calls, or the conversation a speaker named for the assistant role (a segment of user turns
    only). A chat between people (every turn a user's, speakers by name) is none."""
    return any(t.role == "assistant" and strip_calls(t.content).strip() for t in request.turns) or \
        any(s.strip().lower() == "assistant" for s in request.speakers)
