"""A conversation's kind comes from its turns' structure — roles, tool calls on assistant turns, tool
turns answering them — never from words in a turn's text or metadata."""

from __future__ import annotations

import json

import pytest

from lychee_ray.core.conversation import Conversation
from lychee_ray.core.kinds import conversation_kind
from lychee_ray.io.adapters import read_input


def kind_of(conv: Conversation) -> str:
    """The kind of a conversation as stored: its turn rows' ``role`` and ``meta`` (JSON text) columns."""
    rows = conv.turn_rows()
    return conversation_kind([r["role"] for r in rows], [r["meta"] for r in rows])


def one(fmt: str, path) -> Conversation:
    [item] = list(read_input(fmt, path))
    assert item.conversation is not None
    return item.conversation


def test_a_dialogue_whose_metadata_mentions_tools_is_a_dialogue(tmp_path):
    sample = {"sample_id": "garage-1", "conversation": {
        "speaker_a": "Rosa", "speaker_b": "Ivo", "session_1_date_time": "4:10 pm on 3 June, 2023",
        "session_1": [
            {"speaker": "Rosa", "dia_id": "D1:1", "text": "I finally sorted the shed this weekend."},
            {"speaker": "Ivo", "dia_id": "D1:2", "text": "Look what I found at the flea market!",
             "img_url": ["https://pics.example.org/2023/Vintage_garden_tools.jpg"],
             "query": "old hand _tools tool_calls", "blip_caption": "a photo of a rack of _tools and a tool_call sign"},
            {"speaker": "Rosa", "dia_id": "D1:3", "text": "Those would look great on the workshop wall."}]},
        "qa": []}
    path = tmp_path / "garage.json"
    path.write_text(json.dumps([sample]))
    conv = one("locomo", path)
    metas = [r["meta"] for r in conv.turn_rows()]
    assert any(m and "_tool" in m for m in metas)  # the words are there; they do not make it an agent log
    assert kind_of(conv) == "dialogue"


def test_a_chat_whose_metadata_mentions_tool_calls_is_a_chat():
    conv = Conversation.model_validate({"conversation_id": "c-1", "user_id": "u-1", "sessions": [{"session_id": "s1", "turns": [
        {"turn_id": "1", "role": "user", "content": "Which wrench fits a 10 mm bolt?",
         "meta": {"note": "asked about tool_calls", "source": "https://x.example/_tools/faq"}},
        {"turn_id": "2", "role": "assistant", "content": "A 10 mm open-end wrench.",
         "meta": {"tags": ["_tool", "tool_calls"], "tool_calls": "none"}}]}]})
    assert kind_of(conv) == "chat"


def test_a_chat_completion_log_with_tool_calls_is_an_agent_log(tmp_path):
    log = {"conversation_id": "desk-7", "user_id": "u-2", "messages": [
        {"role": "user", "content": "Is booking QX4412 still on for Friday?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function", "function": {"name": "get_booking", "arguments": "{\"code\": \"QX4412\"}"}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "{\"status\": \"confirmed\", \"day\": \"Friday\"}"},
        {"role": "assistant", "content": "Yes, QX4412 is confirmed for Friday."}]}
    path = tmp_path / "log.jsonl"
    path.write_text(json.dumps(log) + "\n")
    conv = one("openai", path)
    assert [r["role"] for r in conv.turn_rows()] == ["user", "assistant", "tool", "assistant"]
    assert kind_of(conv) == "agent"


@pytest.mark.parametrize(("roles", "metas", "kind"), [
    # an assistant turn's tool call alone (no result turn yet) makes an agent log
    (["user", "assistant"], [None, json.dumps({"_tool": {"calls": [{"call_id": "c1", "name": "lookup"}]}})], "agent"),
    (["system", "user", "assistant"], [None, None, None], "agent"),  # a system prompt
    (["user", "tool"], [None, None], "agent"),
    # tool fields on a user turn are no call (only assistant turns call tools); malformed ones neither
    (["user", "user"], [json.dumps({"_tool": {"calls": [{"call_id": "c1", "name": "lookup"}]}}), None], "dialogue"),
    (["user", "assistant"], [None, json.dumps({"_tool": {"calls": "lookup"}})], "chat"),
    (["user", "assistant"], [None, "not json: _tool"], "chat"),
    ([], [], "dialogue"),
])
def test_the_kind_of_stored_turns(roles, metas, kind):
    assert conversation_kind(roles, metas) == kind
