"""Segment encoding contract shared by the ``openai`` and ``rules`` backends.

An encoder turns one :class:`EncodeRequest` (the segment's turns, session dates and the bounded
reference context ρ_k) into an :class:`EncodeOutput` (record drafts + resolution state d_k).
:func:`finalise_records` then validates the drafts the same way for every backend and turns them
into :class:`~lychee_ray.core.records.MemoryRecord` rows with deterministic ids.
"""

from __future__ import annotations

import logging
import unicodedata
from collections import Counter
from functools import lru_cache
from typing import Literal, Protocol
from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict, Field
from pydantic.json_schema import SkipJsonSchema

from lychee_ray.core.records import ARTIFACT_KINDS, RECORD_TYPES, ArtifactKind, MemoryRecord, TimeSpan, normalise_type
from lychee_ray.core.tools import ToolCall
from lychee_ray.llm.errors import AttemptError
from lychee_ray.text.time.normalise import TimeResolver
from lychee_ray.names import LLMBackend, RepairMode

log = logging.getLogger(__name__)


class SegmentTurn(BaseModel):
    """A turn as the encoder sees it: a local index inside the segment plus its context."""

    model_config = ConfigDict(extra="forbid")

    index: int
    turn_id: str
    session_id: str
    session_date: str | None
    speaker: str
    role: str
    content: str = Field(description="the turn's text as shown to a model: its tool calls rendered (Turn.text)")
    # agent logs: the turn's calls (assistant), or the call it answers and the tool (tool turns)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    tool_name: str | None = None
    is_error: bool = Field(default=False, description="the source marked this tool result as an error")


class SlotCandidate(BaseModel):
    """An earlier record a segment's records may replace or contradict: a current record of a slot
    the segment's turns mention, shown in the reference context under its ``label``
    (ingest/supersede.py picks them)."""

    model_config = ConfigDict(extra="forbid")

    label: str
    record_id: str
    slot: str
    value: str | None = None
    text: str
    valid_from: str | None = None


# What a segment is: dialogue (turns to write memories of) or a system prompt (the conversation's
# instructions: rules to keep as constraints, encoded once per distinct text).
SegmentKind = Literal["dialogue", "system_prompt"]


class EncodeRequest(BaseModel):
    """Everything one encode call needs; built by the pipeline, consumed by a backend."""

    model_config = ConfigDict(extra="forbid")

    conversation_id: str
    user_id: str
    segment_id: str
    segment_index: int
    kind: SegmentKind = "dialogue"
    turns: list[SegmentTurn]
    speakers: list[str] = Field(default_factory=list, description="All speakers of the conversation.")
    prev_resolution_state: str = ""
    prev_records: list[str] = Field(default_factory=list, description="Texts of the last m records (ρ_k).")
    # Repair mode (encoder.guard.repair_mode) when the first reply was degenerate; None = a normal call.
    repair: RepairMode | None = None
    avoid_texts: list[str] = Field(default_factory=list, description="Rejected copies shown as 'do not repeat'.")
    # current records of the slots the segment's turns mention, which its records may replace or contradict
    candidates: list[SlotCandidate] = Field(default_factory=list)

    @property
    def session_dates(self) -> list[str]:
        return list(dict.fromkeys(t.session_date for t in self.turns if t.session_date))


class TimeDraft(BaseModel):
    """Time as a model writes it; normalised by :func:`finalise_records`."""

    model_config = ConfigDict(extra="forbid")

    start: str | None = Field(default=None, description="ISO date (YYYY-MM-DD) or null")
    end: str | None = Field(default=None, description="ISO date (YYYY-MM-DD) or null")
    expression: str | None = Field(default=None, description="original time wording from the turns, or null")


class RecordDraft(BaseModel):
    """One record as produced by a backend (LLM JSON or rules)."""

    model_config = ConfigDict(extra="forbid")

    type: str = Field(description="one of: " + ", ".join(RECORD_TYPES))
    text: str = Field(description="one standalone sentence: names not pronouns, absolute dates not relative ones")
    entities: list[str] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=list)
    time: TimeDraft | None = None
    source_turns: list[int] = Field(default_factory=list, description="local indexes of the turns it came from")
    artifact: str | None = Field(
        default=None,
        description="code, table or document when the record describes ONE code block, table or drafted "
                    "document (letter, e-mail, will) of the turns; else null")
    # memory that stays current (ingest/supersede.py normalises and links these after the call)
    slot: str | None = Field(default=None, description="'subject · attribute' whose value the record states, or null")
    slot_value: str | None = Field(default=None, description="that value in a few words, or null")
    valid_from: str | None = Field(default=None, description="YYYY-MM-DD the value became true, or null")
    replaces: list[str] = Field(default_factory=list, description="labels of candidate records it replaces")
    contradicts: list[str] = Field(default_factory=list, description="labels of candidate records it contradicts")
    # rules backend only (not in the model's schema): the record ends its subject (a cancellation),
    # so every earlier record of the subject stops being current
    ends: SkipJsonSchema[bool] = False



def merge_into(kept: RecordDraft, other: RecordDraft) -> RecordDraft:
    """``kept`` with ``other``'s sources, entities and topics added (in order, without repeats): one
    record for two drafts that say the same (ingest/encode/dedup.py)."""
    return kept.model_copy(update={
        "source_turns": list(dict.fromkeys([*kept.source_turns, *other.source_turns])),
        "entities": list(dict.fromkeys([*kept.entities, *other.entities])),
        "topics": list(dict.fromkeys([*kept.topics, *other.topics])),
    })


# What models write for an artifact kind, mapped onto the three; anything else is no artifact.
ARTIFACT_ALIASES: dict[str, ArtifactKind] = {
    "code_block": "code", "snippet": "code", "script": "code", "program": "code",
    "letter": "document", "email": "document", "e_mail": "document", "draft": "document", "will": "document",
    "cover_letter": "document", "message": "document", "note": "document",
}


def normalise_artifact(raw: str | None) -> ArtifactKind | None:
    """A drafted artifact kind as one of ``code`` / ``table`` / ``document``, or None (none, or unknown)."""
    if not raw:
        return None
    k = raw.strip().lower().replace("-", "_").replace(" ", "_")
    return next((a for a in ARTIFACT_KINDS if a == k), None) or ARTIFACT_ALIASES.get(k)


class EncodeOutput(BaseModel):
    """The JSON an encode call returns: ``{records[], resolution_state}``."""

    model_config = ConfigDict(extra="forbid")

    records: list[RecordDraft]
    resolution_state: str = Field(default="", description="short note of who/what pronouns and aliases refer to")


class SalvageNote(BaseModel):
    """Why an output holds only part of its reply: the reply was cut and its complete records kept
    (ingest/encode/salvage.py). Stored on the segment (status ``salvaged``, ``error_kind``, ``error``)."""

    model_config = ConfigDict(extra="forbid")

    kind: str = Field(description="the LLM error kind of the cut reply (lychee_ray.llm.errors): truncated")
    message: str = Field(description="what was kept and what was lost, one line")


class EncodeResult(BaseModel):
    """A backend's output plus bookkeeping the pipeline stores with the segment."""

    output: EncodeOutput
    attempts: int = 1
    model: str
    # set when the output was salvaged from a cut reply (the segment is stored as ``salvaged``)
    salvage: SalvageNote | None = None


class SegmentEncoder(Protocol):
    """An encode backend (``openai`` or ``rules``)."""

    backend: LLMBackend
    model: str

    async def encode(self, request: EncodeRequest) -> EncodeResult:
        """Encode one segment; raise on failure (the pipeline records the segment as failed)."""
        ...


SUMMARY_MAX_CHARS = 1200  # a merged summary record's text is cut here (at a word boundary)


def merge_to_summary(output: EncodeOutput, max_chars: int = SUMMARY_MAX_CHARS) -> EncodeOutput:
    """``encoder.mode: summary``: collapse a segment's drafts into ONE summary record.

    The text joins the drafts' texts in order (cut at ``max_chars``), entities/topics/source turns are
    unions, the time spans the drafts' earliest start to latest end, and the type is the most common
    draft type. An LLM asked for a summary usually returns one record already (then nothing changes);
    the rules backend returns atomic sentences, which this turns into the segment-level record the
    paper's "summary-level records" ablation stores. Empty outputs stay empty.
    """
    drafts = [d for d in output.records if d.text.strip()]
    if len(drafts) <= 1:
        return EncodeOutput(records=drafts, resolution_state=output.resolution_state)
    text = " ".join(" ".join(d.text.split()) for d in drafts)
    if len(text) > max_chars:
        text = text[:max_chars].rsplit(" ", 1)[0] + " …"
    types = [d.type for d in drafts]
    rtype = max(dict.fromkeys(types), key=types.count)
    spans = [d.time for d in drafts if d.time]
    starts = sorted(t.start for t in spans if t.start)
    ends = sorted(e for e in (t.end or t.start for t in spans) if e)
    exprs = [t.expression for t in spans if t.expression]
    time = TimeDraft(start=starts[0], end=ends[-1], expression="; ".join(dict.fromkeys(exprs)) or None) if starts else None
    merged = RecordDraft(
        type=rtype, text=text,
        entities=list(dict.fromkeys(e for d in drafts for e in d.entities)),
        topics=list(dict.fromkeys(t for d in drafts for t in d.topics)),
        time=time,
        source_turns=sorted(set(i for d in drafts for i in d.source_turns)),
    )
    return EncodeOutput(records=[merged], resolution_state=output.resolution_state)


# ------------------------------------------------------------------------------------------------
# wrong-language check (encoder.wrong_script_share)
# ------------------------------------------------------------------------------------------------

# Why a script check: a model that answers in another language (a multilingual model drifting into
# Chinese, a "helpful" translation) returns JSON that is valid and schema-conform, so nothing else
# catches it — yet its records no longer match the conversation's wording (BM25, entity keys) or
# the questions asked about it. Comparing Unicode scripts needs no language model and is cheap; it
# cannot tell English from French (same script), which is the accepted blind spot.

# Texts with fewer letters than this are not judged (a record like "Yui 結衣." says too little).
SCRIPT_MIN_LETTERS = 8
# Unicode name prefixes grouped into one script (Japanese mixes kanji and kana).
_SCRIPT_GROUPS = {"CJK": "CJK", "HIRAGANA": "CJK", "KATAKANA": "CJK", "IDEOGRAPHIC": "CJK"}


@lru_cache(maxsize=8192)
def char_script(ch: str) -> str:
    """The script of one letter from its Unicode name: LATIN, CJK, CYRILLIC, GREEK, HANGUL, ARABIC, ..."""
    words = unicodedata.name(ch, "UNKNOWN").split()
    if words[0] in ("FULLWIDTH", "HALFWIDTH") and len(words) > 1:
        words = words[1:]
    return _SCRIPT_GROUPS.get(words[0], words[0])


def dominant_script(texts: Iterable[str]) -> tuple[str | None, float, int]:
    """(most common script, its share of all letters, number of letters) over ``texts``; digits,
    punctuation and spaces do not count. ``(None, 0.0, 0)`` when there are no letters."""
    counts = Counter(char_script(ch) for t in texts for ch in t if ch.isalpha())
    total = sum(counts.values())
    if not total:
        return None, 0.0, 0
    script, n = counts.most_common(1)[0]
    return script, n / total, total


def wrong_script_problem(output: EncodeOutput, request: EncodeRequest, share: float) -> str | None:
    """Why ``output`` looks written in the wrong language, or None.

    Wrong = the segment's turns are at least ``share`` one script and some record's text (with at
    least :data:`SCRIPT_MIN_LETTERS` letters) is at least ``share`` another. ``share <= 0`` = off;
    a mixed-script segment (no script reaching ``share``) is never judged.
    """
    if share <= 0:
        return None
    src, src_share, n = dominant_script(t.content for t in request.turns)
    if src is None or n < SCRIPT_MIN_LETTERS or src_share < share:
        return None
    for i, d in enumerate(output.records):
        script, rec_share, letters = dominant_script([d.text])
        if script is not None and script != src and letters >= SCRIPT_MIN_LETTERS and rec_share >= share:
            return (f"record {i} is written in {script} script ({rec_share:.0%} of its letters) but the segment's "
                    f"turns are {src} ({src_share:.0%}): {d.text[:80]!r}")
    return None


def check_reply_language(output: EncodeOutput, request: EncodeRequest, share: float) -> None:
    """Raise a retryable ``wrong_language`` :class:`AttemptError` when :func:`wrong_script_problem` finds one."""
    problem = wrong_script_problem(output, request, share)
    if problem is not None:
        raise AttemptError("wrong_language", problem)


# Fields a draft and a record share, copied by name as drafted; the ones finalise_records
# normalises itself are set explicitly there. A new record field the encoder fills is a field of
# both models and needs nothing here.
_NORMALISED_FIELDS = frozenset({"type", "text", "entities", "topics", "time", "artifact"})
_COPIED_FIELDS = tuple(n for n in RecordDraft.model_fields if n in MemoryRecord.model_fields and n not in _NORMALISED_FIELDS)


def finalise_records(
    output: EncodeOutput, request: EncodeRequest, backend: str, model: str, resolve_time: TimeResolver | None = None
) -> tuple[list[MemoryRecord], list[str]]:
    """Validate drafts and build records. Returns (records, problems).

    - unknown type → mapped via :data:`~lychee_ray.core.records.TYPE_ALIASES` or the draft is rejected;
    - source turn indexes out of range are dropped; a draft with none left keeps all the
      segment's turns as its source (the content came from this segment);
    - empty texts are dropped; identical (type, text) drafts are merged;
    - times are normalised with ``resolve_time(draft, request_turns)`` when given
      (:func:`~lychee_ray.text.time.normalise.make_resolver`), else copied from the draft as written;
    - any other field the draft and the record share is copied as drafted (by name).
    """
    problems: list[str] = []
    by_index = {t.index: t for t in request.turns}
    records: list[MemoryRecord] = []
    seen: set[tuple[str, str]] = set()
    for i, d in enumerate(output.records):
        text = " ".join(d.text.split())
        if not text:
            problems.append(f"record {i}: empty text dropped")
            continue
        rtype = normalise_type(d.type)
        if rtype is None:
            problems.append(f"record {i}: unknown type {d.type!r} rejected")
            continue
        if (rtype, text) in seen:
            continue
        seen.add((rtype, text))
        src = [j for j in dict.fromkeys(d.source_turns) if j in by_index]
        if len(src) < len(set(d.source_turns)):
            problems.append(f"record {i}: source turn indexes out of range dropped")
        turns = [by_index[j] for j in src] or list(request.turns)
        time = resolve_time(d, turns) if resolve_time else TimeSpan(
            start=d.time.start if d.time else None, end=d.time.end if d.time else None,
            expression=d.time.expression if d.time else None,
        )
        ordinal = len(records)
        records.append(
            MemoryRecord(
                record_id=MemoryRecord.make_id(request.conversation_id, request.segment_id, ordinal, rtype, text),
                conversation_id=request.conversation_id,
                user_id=request.user_id,
                session_id=turns[0].session_id,
                segment_id=request.segment_id,
                ordinal=ordinal,
                type=rtype,
                text=text,
                entities=list(dict.fromkeys(e.strip() for e in d.entities if e and e.strip())),
                topics=list(dict.fromkeys(k.strip().lower() for k in d.topics if k and k.strip())),
                time=time,
                source_turn_ids=[t.turn_id for t in turns],
                created_at=turns[0].session_date,
                backend=backend,
                model=model,
                artifact=normalise_artifact(d.artifact),
                **{name: getattr(d, name) for name in _COPIED_FIELDS},
            )
        )
    return records, problems
