"""Agent-log input formats (issue 35): OpenAI chat completions, Anthropic Messages, ChatGPT export.

Every bad input named in the issue has a defined outcome here: kept and warned about, or one
located error — nothing is dropped silently.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lychee_ray.ingest.runner import input_warnings
from lychee_ray.core.conversation import Turn
from lychee_ray.io.adapters import detect_format, read_input, survey_input

POLICY = "# Shop policy\n\n- You must verify the user's e-mail before any refund.\n- Refunds are allowed at most once per order."


def openai_log(cid: str = "c-1", extra: list[dict] | None = None) -> dict:
    return {"conversation_id": cid, "user_id": "u_1", "started_at": "2024-05-15T15:00:00", "metadata": {"task": 7},
            "messages": [
                {"role": "system", "content": POLICY},
                {"role": "user", "content": "Please refund my order W123 for alice@example.com."},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_a", "type": "function",
                     "function": {"name": "get_order", "arguments": "{\"order_id\": \"W123\"}"}}]},
                {"role": "tool", "tool_call_id": "call_a", "name": "get_order",
                 "content": "{\"order_id\": \"W123\", \"total\": 42.5, \"email\": \"alice@example.com\"}"},
                {"role": "assistant", "content": None, "tool_calls": [
                    {"id": "call_b", "type": "function",
                     "function": {"name": "refund_order", "arguments": "{\"order_id\": \"W123\"}"}}]},
                {"role": "tool", "tool_call_id": "call_b", "content": "Error: order W123 was refunded already"},
                {"role": "assistant", "content": "I'm sorry, I cannot refund order W123 twice."},
                *(extra or []),
            ]}


def write_jsonl(path: Path, objs: list[dict]) -> Path:
    path.write_text("".join(json.dumps(o) + "\n" for o in objs), encoding="utf-8")
    return path


def one(path: Path, fmt: str):
    items = list(read_input(fmt, path))
    assert len(items) == 1
    return items[0]


def test_openai_log_keeps_tool_calls_and_links_results(tmp_path: Path):
    item = one(write_jsonl(tmp_path / "log.jsonl", [openai_log()]), "openai")
    conv = item.conversation
    assert conv is not None and not [i for i in item.issues if i.level == "error"]
    turns = [t for *_, t in conv.iter_turns()]
    assert [t.turn_id for t in turns] == [f"m{i}" for i in range(1, 8)]  # positions: stable on re-import
    assert [t.role for t in turns] == ["system", "user", "assistant", "tool", "assistant", "tool", "assistant"]
    call = turns[2].tool_calls[0]
    assert (call.call_id, call.name, call.parsed_arguments()) == ("call_a", "get_order", {"order_id": "W123"})
    assert turns[2].content == "" and "get_order(order_id=W123)" in turns[2].text
    assert (turns[3].tool_call_id, turns[3].tool_name) == ("call_a", "get_order")
    assert (turns[5].tool_call_id, turns[5].tool_name) == ("call_b", "refund_order")  # name from its call
    assert conv.user_id == "u_1" and conv.meta == {"task": 7}
    assert conv.sessions[0].started_at == "2024-05-15T15:00:00"


def test_tool_fields_survive_the_turns_table_and_canonical_json(tmp_path: Path):
    conv = one(write_jsonl(tmp_path / "log.jsonl", [openai_log()]), "openai").conversation
    rows = conv.turn_rows()
    back = [Turn.from_row(r) for r in rows]
    assert back == [t for *_, t in conv.iter_turns()]
    again = one(write_jsonl(tmp_path / "canonical.jsonl", [json.loads(conv.model_dump_json())]), "jsonl").conversation
    assert again == conv
    plain = json.loads(conv.model_dump_json())["sessions"][0]["turns"][1]
    assert "tool_calls" not in plain and "tool_call_id" not in plain  # plain turns serialise as before


def test_grown_log_keeps_its_turn_ids(tmp_path: Path):
    first = one(write_jsonl(tmp_path / "a.jsonl", [openai_log()]), "openai").conversation
    grown = one(write_jsonl(tmp_path / "b.jsonl", [openai_log(extra=[{"role": "user", "content": "Thanks!"}])]),
                "openai").conversation
    assert grown.turn_rows()[: first.num_turns] == first.turn_rows()


def test_openai_bad_inputs_are_kept_and_warned(tmp_path: Path):
    log = {"id": 17, "created": 1715785200, "messages": [
        {"role": "developer", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "What is in this picture?"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]},
        {"role": "assistant", "content": None},  # null content, no tool calls
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "function": {"name": "lookup", "arguments": "not json {"}},
            {"id": "c2", "function": {"name": "never_answered", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "ok"},
        {"role": "tool", "tool_call_id": "ghost", "content": "a result nobody asked for"},
        {"role": "narrator", "content": "An unknown role."},
        {"role": "assistant", "content": None, "function_call": {"name": "legacy_fn", "arguments": "{\"x\": 1}"}},
        {"role": "function", "name": "legacy_fn", "content": "legacy result"},
    ]}
    item = one(write_jsonl(tmp_path / "bad.jsonl", [log]), "openai")
    conv = item.conversation
    assert conv is not None
    warnings = " | ".join(i.message for i in item.issues if i.level == "warning")
    turns = [t for *_, t in conv.iter_turns()]
    assert len(turns) == 9  # nothing dropped
    assert turns[0].role == "system"  # developer
    assert turns[1].content == "What is in this picture?\n[image]"
    assert turns[2].content == "" and "null content read as empty text" in warnings
    assert turns[3].tool_calls[0].arguments == "not json {" and "arguments are not JSON" in warnings
    assert "never_answered(c2) has no result" in warnings
    assert turns[5].tool_call_id == "ghost" and turns[5].tool_name is None and "without a matching call 'ghost'" in warnings
    assert turns[6].role == "user" and turns[6].speaker == "narrator" and "unknown role read as user" in warnings
    assert turns[7].tool_calls[0].name == "legacy_fn"
    assert (turns[8].tool_name, turns[8].tool_call_id) == ("legacy_fn", turns[7].tool_calls[0].call_id)
    assert conv.conversation_id == "17"
    assert conv.sessions[0].started_at == "2024-05-15T15:00:00"  # epoch seconds, UTC


def test_missing_conversation_id_is_generated_stably(tmp_path: Path):
    log = openai_log()
    del log["conversation_id"]
    a = one(write_jsonl(tmp_path / "a.jsonl", [log]), "openai")
    b = one(write_jsonl(tmp_path / "b.jsonl", [log]), "openai")
    assert a.conversation.conversation_id == b.conversation.conversation_id
    assert a.conversation.conversation_id.startswith("conv-")
    assert any(i.field == "conversation_id" and i.level == "warning" for i in a.issues)


def test_a_line_of_another_format_is_one_error_and_the_rest_is_read(tmp_path: Path):
    canonical = {"conversation_id": "x", "sessions": [{"session_id": "s", "turns": [{"turn_id": "1", "content": "hi"}]}]}
    path = write_jsonl(tmp_path / "mixed.jsonl", [openai_log("c-1"), canonical, openai_log("c-2")])
    items = list(read_input("openai", path))
    assert [i.conversation.conversation_id if i.conversation else None for i in items] == ["c-1", None, "c-2"]
    err = items[1].issues[0]
    assert (err.level, err.line) == ("error", 2) and "--format jsonl" in err.message


def test_a_2mb_tool_output_is_stored_whole_and_warned(tmp_path: Path):
    big = "x" * (2 * 1024 * 1024)
    item = one(write_jsonl(tmp_path / "big.jsonl", [openai_log(extra=[
        {"role": "assistant", "content": None,
         "tool_calls": [{"id": "d", "function": {"name": "dump", "arguments": "{}"}}]},
        {"role": "tool", "tool_call_id": "d", "content": big}])]), "openai")
    turn = [t for *_, t in item.conversation.iter_turns()][-1]
    assert len(turn.content) == len(big)
    assert any("segmenter.max_turn_chars=50000" in w for w in input_warnings(item, 50000))


def test_anthropic_messages(tmp_path: Path):
    log = {"conversation_id": "a-1", "user_id": "u_2", "system": [{"type": "text", "text": POLICY}], "messages": [
        {"role": "user", "content": "Refund order W9."},
        {"role": "assistant", "content": [
            {"type": "thinking", "thinking": "check the order first"},
            {"type": "text", "text": "Let me look."},
            {"type": "tool_use", "id": "tu_1", "name": "get_order", "input": {"order_id": "W9"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "tu_1", "content": [{"type": "text", "text": "{\"total\": 5}"}]},
            {"type": "text", "text": "Also, what is my balance?"}]},
        {"role": "assistant", "content": [{"type": "tool_use", "id": "tu_2", "name": "refund", "input": {"id": "W9"}}]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "tu_2", "content": "denied",
                                      "is_error": True}]},
    ]}
    path = write_jsonl(tmp_path / "a.jsonl", [log])
    assert detect_format(path).format == "anthropic"
    item = one(path, "anthropic")
    turns = [t for *_, t in item.conversation.iter_turns()]
    assert [(t.turn_id, t.role) for t in turns] == [
        ("system", "system"), ("m1", "user"), ("m2", "assistant"), ("m3.r1", "tool"), ("m3", "user"),
        ("m4", "assistant"), ("m5.r1", "tool")]
    assert turns[2].content == "Let me look." and turns[2].meta == {"thinking": ["check the order first"]}
    assert turns[2].tool_calls[0].parsed_arguments() == {"order_id": "W9"}
    assert (turns[3].tool_call_id, turns[3].tool_name, turns[3].content) == ("tu_1", "get_order", "{\"total\": 5}")
    assert turns[6].meta == {"is_error": True} and turns[6].tool_name == "refund"


def chatgpt_export() -> list[dict]:
    def node(nid, parent, children, role=None, text=None, **msg):
        m = None if role is None else {"id": nid, "author": {"role": role, **msg.pop("author", {})}, "create_time": 1700000000.0,
                                       "content": {"content_type": "text", "parts": [text]}, **msg}
        return {"id": nid, "message": m, "parent": parent, "children": children}
    mapping = {
        "root": node("root", None, ["sys"]),
        "sys": node("sys", "root", ["u1"], "system", ""),  # the export's hidden, empty system message
        "u1": node("u1", "sys", ["a1", "a1b"], "user", "Plot y = x^2."),
        "a1": node("a1", "u1", [], "assistant", "First try (regenerated later)."),
        "a1b": node("a1b", "u1", ["t1"], "assistant", "plot(x**2)", recipient="python"),
        "t1": node("t1", "a1b", ["a2"], "tool", "[figure]", author={"name": "python"}),
        "a2": node("a2", "t1", [], "assistant", "Here is the plot."),
    }
    return [{"title": "Parabola", "create_time": 1700000000.0, "mapping": mapping, "current_node": "a2", "id": "g-1"}]


def test_chatgpt_export_reads_the_current_branch(tmp_path: Path):
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps(chatgpt_export()), encoding="utf-8")
    assert detect_format(path).format == "chatgpt"
    item = one(path, "chatgpt")
    turns = [t for *_, t in item.conversation.iter_turns()]
    assert [t.turn_id for t in turns] == ["u1", "a1b", "t1", "a2"]
    assert turns[1].tool_calls[0].name == "python" and turns[1].tool_calls[0].arguments == "plot(x**2)"
    assert (turns[2].tool_call_id, turns[2].tool_name) == ("a1b", "python")
    warnings = " | ".join(i.message for i in item.issues)
    assert "1 message(s) on other branches" in warnings and "1 empty message(s)" in warnings
    assert item.conversation.meta["title"] == "Parabola"


def test_formats_are_detected_by_content_not_suffix(tmp_path: Path):
    canonical = {"conversation_id": "x", "sessions": [{"session_id": "s", "turns": [{"turn_id": "1", "content": "hi"}]}]}
    a = write_jsonl(tmp_path / "chat.jsonl", [openai_log()])
    b = write_jsonl(tmp_path / "canon.jsonl", [canonical])
    c = tmp_path / "array.json"
    c.write_text(json.dumps([openai_log("c-1"), openai_log("c-2")]), encoding="utf-8")
    assert detect_format(a).format == "openai" and detect_format(b).format == "jsonl"
    assert detect_format(c).format == "openai"
    s = survey_input(c)
    assert (s.format, s.conversations) == ("openai", 2)
    assert [i.conversation.conversation_id for i in read_input("openai", c)] == ["c-1", "c-2"]


def test_a_chat_log_given_as_canonical_jsonl_is_refused_naming_its_format(tmp_path: Path):
    from lychee_ray.io.adapters import InputError

    path = write_jsonl(tmp_path / "log.jsonl", [openai_log()])
    with pytest.raises(InputError) as e:
        survey_input(path, "jsonl")
    assert e.value.kind == "format_mismatch" and "--format openai" in str(e.value)


def test_reserved_meta_key_and_misplaced_tool_fields_are_errors():
    with pytest.raises(ValueError):
        Turn(turn_id="1", content="x", meta={"_tool": 1})
    with pytest.raises(ValueError):
        Turn(turn_id="1", role="user", content="x", tool_call_id="c")
    with pytest.raises(ValueError):
        Turn(turn_id="1", role="tool", content="x", tool_calls=[{"call_id": "c", "name": "f"}])
