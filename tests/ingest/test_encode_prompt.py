"""The encode prompt's "Fields:" list is generated from :class:`RecordDraft` (issue 36): the texts
pinned here were captured before it was, so the rendered prompts (every encoder.mode ×
context_style × agent variant) and the JSON schema sent with them are byte for byte as before; a
new draft field is explained by its ``Field(description=...)`` with no prompt edit."""

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

# INSTRUCTIONS as rendered before the field list was generated
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
    '- source_turns: the [index] numbers of the turns the record comes from.\n'
    'resolution_state: a short note of who or what the pronouns and aliases of this conversation refer to\n'
    '(e.g. "I = Caroline; you = Melanie; \'the shelter\' = Hope Animal Shelter"), for the next segment.\n'
)

# sha256 of instructions_for(EncoderConfig(mode, context_style), agent), captured before the change
PINNED_VARIANTS = {
    ("atomic", "plain", False): "f0351816eb8f90555127d2ebacdfadcb36d6413c49afbe773943fea7d1427103",
    ("atomic", "plain", True): "b78e2571a69cd9c9d646f0fb3248c3532398e431004b30c32d0d69b3f2068302",
    ("atomic", "guarded", False): "37853e398acc8d4e15ed357067e106785c75f09455f6161f20ff6ddca72b2c4e",
    ("atomic", "guarded", True): "5e5b1c9593b24d10e31590dd5984f6c62bc9e867727e3211f5e2d5704785e84d",
    ("summary", "plain", False): "a392bf62aa276c33a177ebbe6b53218397df61341b272666eb37634c08944984",
    ("summary", "plain", True): "53756db49f40be637158ab9eb2b05e3ed1281f36fe0dfc5731fc193300ac5d82",
    ("summary", "guarded", False): "defd17aef4581971fec4d77879cf640edcd4c034372024b052d8d26c911ada33",
    ("summary", "guarded", True): "b6550b6170a5e653fe16089d0b166b9230bf5324351d7973b8829d14277660bb",
}
PINNED_SYSTEM_PROMPT = "3472c18fefb5ebb0f8d2ec33220338247328df981a4d96d248cbd2624d272e47"
# the strict JSON schema sent with every encode call (json.dumps(sort_keys=True)); the field descriptions are in it
PINNED_SCHEMA = "ec57f9c25946f0deb0bd3098b760d349f58a3a4d11985eb431a9cf3a776edfb7"


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
