"""The encode prompt's "Fields:" list is generated from :class:`RecordDraft` (issue 36): the texts
pinned here were captured before it was, so the rendered prompts (every encoder.mode ×
context_style × agent variant) and the JSON schema sent with them are byte for byte as before; a
new draft field is explained by its ``Field(description=...)`` with no prompt edit. Since pinned:
the slot fields of memory that stays current (slot, slot_value, valid_from, replaces, contradicts)
added to the list and the schema."""

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
    '- source_turns: the [index] numbers of the turns the record comes from;\n'
    "- slot: what the record states a value of, as 'subject · attribute' ('user · shipping address',\n"
    "  'reservation ABC123 · flights'), or null when it states nothing that can change;\n"
    '- slot_value: that value in a few words, or null;\n'
    '- valid_from: YYYY-MM-DD the value became true (the day of the change, from the session date), or null;\n'
    '- replaces: labels of candidate records (given with the reference context) of the same slot whose value this one replaces;\n'
    '- contradicts: labels of candidate records of the same slot this one contradicts without saying it changed.\n'
    'resolution_state: a short note of who or what the pronouns and aliases of this conversation refer to\n'
    '(e.g. "I = Caroline; you = Melanie; \'the shelter\' = Hope Animal Shelter"), for the next segment.\n'
)

# sha256 of instructions_for(EncoderConfig(mode, context_style), agent), captured before the change
PINNED_VARIANTS = {
    ("atomic", "plain", False): "78ddd71b5b682784edb5cf0d809909cf9a9a1cbb3465102478d04818f70cf675",
    ("atomic", "plain", True): "68587fd235b09af52084dfd8f8c54c9fb104c73f277ccbcfa358dda3c18efeff",
    ("atomic", "guarded", False): "7d72f66376dd2b8c9be926c3c78573bbe81a161e3beb0331ece6b0d8f6884788",
    ("atomic", "guarded", True): "4e73cf978ab5ab8b3cfaf2ec9ce1a1539d901d583a69b86684ab9a4590c61f14",
    ("summary", "plain", False): "b9572faeb6d88a4d02525568e69726fedfc2410187d04828c143af6c1ad63c0e",
    ("summary", "plain", True): "bedf2f6c95f7ae9a3264b4e2336083e63b817ece89f3cf4b44aca08e479f58b7",
    ("summary", "guarded", False): "91eadb4a05e79f947232b05d3cf138b08cbe4bcf901b5923096c33072d12d559",
    ("summary", "guarded", True): "f8a727e1243c528496d3e4f83dbd02160dae9ba068ae50fbaea39c192d45218a",
}
PINNED_SYSTEM_PROMPT = "3472c18fefb5ebb0f8d2ec33220338247328df981a4d96d248cbd2624d272e47"
# the strict JSON schema sent with every encode call (json.dumps(sort_keys=True)); the field descriptions are in it
PINNED_SCHEMA = "f72a2b22972da846626e03d2e9da620ffb5d5f891ab4995f3164e1b7f553479a"


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
    and a record share by name (the slot fields: ingest/supersede.py normalises them after)."""
    shared = set(RecordDraft.model_fields) & set(MemoryRecord.model_fields)
    assert shared == set(base._NORMALISED_FIELDS) | set(base._COPIED_FIELDS)
    assert base._COPIED_FIELDS == ("slot", "slot_value", "valid_from")


@pytest.mark.parametrize("mode", ["atomic", "summary"])
def test_summary_prompt_keeps_the_field_list(mode):
    assert "Fields:\n" + draft_fields() + "\nresolution_state:" in instructions_for(EncoderConfig(mode=mode))
