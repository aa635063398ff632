"""The encode prompt's "Fields:" list is generated from :class:`RecordDraft` (issue 36): the rendered
prompts (every encoder.mode × context_style × agent variant) and the JSON schema sent with them are
pinned, so any change to what the model is told is a deliberate one (the pins were last moved when
the ``artifact`` field came with assistant chats: one "- artifact: ..." line, nothing else); a new
draft field is explained by its ``Field(description=...)`` with no prompt edit."""

from __future__ import annotations

import hashlib
import itertools
import json

import pytest
from pydantic import Field

from lychee_ray.ingest.encode import base, openai
from lychee_ray.ingest.encode.base import EncodeOutput, RecordDraft
from lychee_ray.ingest.encode.openai import FIELD_NOTES, INSTRUCTIONS, SYSTEM_PROMPT_INSTRUCTIONS, draft_fields, instructions_for
from lychee_ray.config import EncoderConfig
from lychee_ray.core.records import MemoryRecord
from lychee_ray.llm.schema import schema_for

# INSTRUCTIONS as rendered
PINNED_INSTRUCTIONS = (
    'You write long-term memory records for a conversational agent.\n'
    'You receive one segment of a conversation (consecutive turns on one topic), the date of its session, and\n'
    'reference context from earlier segments. Return JSON with "records" and "resolution_state".\n'
    '\n'
    'Each record is ONE standalone sentence that can be understood with no other context:\n'
    '- use people\'s names instead of pronouns ("I", "you", "she", "my sister" -> the name when known);\n'
    '- turn relative dates into absolute ones using the session date ("yesterday" -> "7 May 2023",\n'
    '  "last year" -> "2022"); keep the original wording in time.expression;\n'
    '- keep concrete details: names, numbers, places, titles, dates, quantities, reasons;\n'
    '- one fact per record; skip greetings and small talk; do not invent anything;\n'
    '- write in the language of the segment\'s turns (do not translate).\n'
    'Fields:\n'
    '- type: one of fact, preference, event, constraint, procedure, failure_pattern, tool_affordance\n'
    '  (fact = stable information; preference = likes/dislikes/opinions; event = something that happened or is\n'
    '  planned, with its time; constraint = a rule, limit or requirement; procedure = how something is done;\n'
    '  failure_pattern = what went wrong and why; tool_affordance = what a tool or resource can do);\n'
    '- text: the standalone sentence;\n'
    '- entities: people, places, organisations, objects named in it;\n'
    '- topics: 1-4 short lowercase keywords;\n'
    '- time: start and end as YYYY-MM-DD (same day for a single day; first and last day for a month or year)\n'
    '  or null when the record has no time; expression = the original time words or null;\n'
    '- source_turns: the [index] numbers of the turns the record comes from;\n'
    '- artifact: code, table or document when the record describes ONE code block, table or drafted document\n'
    '  (letter, e-mail, message, will) of the turns; else null.\n'
    'resolution_state: a short note of who or what the pronouns and aliases of this conversation refer to\n'
    '(e.g. "I = Caroline; you = Melanie; \'the shelter\' = Hope Animal Shelter"), for the next segment.\n'
)

# sha256 of instructions_for(EncoderConfig(mode, context_style), agent)
PINNED_VARIANTS = {
    ("atomic", "plain", False): "21caf7f85cb48453398a8be0626d8bc3530fc948c30632ffe42bc691fe417e60",
    ("atomic", "plain", True): "c704f628621648ec6488ae2409103fee24b22f71e3b94572ffbdbc0bb0c16b16",
    ("atomic", "guarded", False): "c9d8e225b2e02b5c5d73adcffa154b87a8031f413728582ad117782fa8ab9561",
    ("atomic", "guarded", True): "7a27890de68d7534d5ed86a50d63e845ddb9d5517b0fdc6c7e5b0333d3b46c28",
    ("summary", "plain", False): "9cf57263ecb8590768c68743b06a417836668f83df79b65674ff3bd8174388c5",
    ("summary", "plain", True): "9156aedccb11ea8239f28d6acc672a37b33f339198d0c762c966b21ff078cc57",
    ("summary", "guarded", False): "86b8dca044e77190e3da075bb2f0d7d07f5694da1c122d07c2f3402a3ac3dc00",
    ("summary", "guarded", True): "6f419aea9094e2deccedc22b3b736d6c4c2fffbbae37f55694b03ac06d4ad634",
}
PINNED_SYSTEM_PROMPT = "3472c18fefb5ebb0f8d2ec33220338247328df981a4d96d248cbd2624d272e47"
# the strict JSON schema sent with every encode call (json.dumps(sort_keys=True)); the field descriptions are in it
PINNED_SCHEMA = "e63ec4c968cc5451f70ec4e48bc7487f996a35a870a32167452d23e0d356b923"


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_rendered_prompts_are_unchanged():
    assert INSTRUCTIONS == PINNED_INSTRUCTIONS
    for mode, style, agent in itertools.product(("atomic", "summary"), ("plain", "guarded"), (False, True)):
        assert sha(instructions_for(EncoderConfig(mode=mode, context_style=style), agent)) == PINNED_VARIANTS[mode, style, agent]
    assert sha(SYSTEM_PROMPT_INSTRUCTIONS) == PINNED_SYSTEM_PROMPT
    schema, strict = schema_for(EncodeOutput)
    assert strict and sha(json.dumps(schema, sort_keys=True)) == PINNED_SCHEMA


def test_field_notes_name_draft_fields():
    assert set(FIELD_NOTES) <= set(RecordDraft.model_fields)


def test_a_new_draft_field_is_listed_with_its_description(monkeypatch):
    class Draft(RecordDraft):
        mood: str | None = Field(None, description="the speaker's mood, one word, or null")
        plain: int = 0

    monkeypatch.setattr(openai, "RecordDraft", Draft)
    fields = draft_fields()
    assert fields.startswith(PINNED_INSTRUCTIONS.split("Fields:\n")[1].split("\nresolution_state")[0][:-1])
    assert fields.endswith(";\n- mood: the speaker's mood, one word, or null;\n- plain.")


def test_shared_fields_are_normalised_or_copied_by_name():
    """finalise_records sets the fields it normalises itself and copies every other field a draft
    and a record share by name (none today)."""
    shared = set(RecordDraft.model_fields) & set(MemoryRecord.model_fields)
    assert shared == set(base._NORMALISED_FIELDS) | set(base._COPIED_FIELDS)
    assert base._COPIED_FIELDS == ()


@pytest.mark.parametrize("mode", ["atomic", "summary"])
def test_summary_prompt_keeps_the_field_list(mode):
    assert "Fields:\n" + draft_fields() + "\nresolution_state:" in instructions_for(EncoderConfig(mode=mode))
