"""The encode prompt's "Fields:" list is generated from :class:`RecordDraft`: the rendered
prompts (every encoder.mode × context_style × agent variant) and the JSON schema sent with them are
pinned, so any change to what the model is told is a deliberate one (the pins last moved when the
``artifact`` field of assistant chats and the slot fields of memory that stays current — slot,
slot_value, valid_from, replaces, contradicts — were added to the list and the schema); a new draft
field is explained by its ``Field(description=...)`` with no prompt edit."""

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
    '  (letter, e-mail, message, will) of the turns; else null;\n'
    "- slot: what the record states a value of, as 'subject · attribute' ('user · shipping address',\n"
    "  'reservation ABC123 · flights'), or null when it states nothing that can change;\n"
    '- slot_value: that value in a few words, or null;\n'
    '- valid_from: YYYY-MM-DD the value became true (the day of the change, from the session date), or null;\n'
    '- replaces: labels of candidate records (given with the reference context) of the same slot whose value this one replaces;\n'
    '- contradicts: labels of candidate records of the same slot this one contradicts without saying it changed.\n'
    'resolution_state: a short note of who or what the pronouns and aliases of this conversation refer to\n'
    '(e.g. "I = Caroline; you = Melanie; \'the shelter\' = Hope Animal Shelter"), for the next segment.\n'
)

# sha256 of instructions_for(EncoderConfig(mode, context_style), agent)
PINNED_VARIANTS = {
    ("atomic", "plain", False): "488795624250920832be346312c0402c5be68ffe311e9eaa2c46e93cff62ea97",
    ("atomic", "plain", True): "e9748c4bc08c99f5a1db3eb7b735c1eb3c80f3b62ea2da51ccf87e6fb0c7bfa1",
    ("atomic", "guarded", False): "c5d133fffbbc7f959af9fb264423b30d8985424db4b6f01a47ff122888757328",
    ("atomic", "guarded", True): "bb1bd71db9156212a2f4ca7992fd9d9d1a7101646cced2f41191830bfa6c9723",
    ("summary", "plain", False): "9ea91d6cf41689726f18c351b6ea397d536f0c0d4d7b9dc1f67d2f983eac7f03",
    ("summary", "plain", True): "73f49cace252b32a5acac177297f4eb75bc0a038e5562de3cb9a8bb2009e68a4",
    ("summary", "guarded", False): "65c6c6f2e9dfb48b67ec7b418b6816cbc9043216d7059e553d85623f284e5fe6",
    ("summary", "guarded", True): "1989cbaef2db92fe8b2486ba11cde5e8373d88ce3b3349a37fdd696cd9258451",
}
PINNED_SYSTEM_PROMPT = "3472c18fefb5ebb0f8d2ec33220338247328df981a4d96d248cbd2624d272e47"
# the strict JSON schema sent with every encode call (json.dumps(sort_keys=True)); the field descriptions are in it
PINNED_SCHEMA = "ff662678a2b3104594cf7e2d24ef9eaa95bc717cc5c603c2d98114c2dd029229"


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
