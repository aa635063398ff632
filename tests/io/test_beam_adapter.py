"""The BEAM adapter (lychee_ray.io.adapters.beam): a folder per conversation, sessions with their
dates, message ids as turn ids, questions with gold per ability in every ``source_chat_ids`` shape,
and the defined outcome of each bad input (synthetic folders: tests/beam_data.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lychee_ray.config import load_config
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build
from lychee_ray.io.adapters import InputError, detect_format, read_input, survey_input
from lychee_ray.io.adapters.beam import gold_ids
from lychee_ray.io.adapters.detect import sniff_bytes
from lychee_ray.io.convert import convert
from lychee_ray.io.store import StoreReader
from tests.beam_data import BATCHES, batches_json, write_beam, write_split


def one(path: Path):
    items = list(read_input("beam", path))
    assert len(items) == 1
    return items[0]


def by_kind(item, kind: str) -> list:
    return [i for i in item.issues if i.kind == kind]


def test_conversation_sessions_dates_and_message_ids(tmp_path: Path):
    item = one(write_beam(tmp_path / "7"))
    c = item.conversation
    assert c.conversation_id == "beam-7" and c.meta == {"source": "beam", "chat_file": "chat.json"}
    assert [(s.session_id, s.started_at) for s in c.sessions] == [("batch-1", "2024-03-15T00:00:00"),
                                                                 ("batch-2", "2024-04-05T00:00:00")]
    turns = [t for *_, t in c.iter_turns()]
    assert [t.turn_id for t in turns] == [str(i) for i in range(12)]
    assert [t.role for t in turns[:4]] == ["user", "assistant", "user", "assistant"]
    assert turns[0].meta == {"time_anchor": "March-15-2024", "index": "1,1", "question_type": "main_question"}
    assert turns[3].content == BATCHES[0][1][1][1]  # content verbatim (a code block inside)


def test_questions_gold_in_every_shape(tmp_path: Path):
    item = one(write_beam(tmp_path / "1"))
    qa = {q.question_id: q for q in item.qa}
    assert len(qa) == 7 and {q.category for q in qa.values()} >= {"knowledge_update", "abstention"}
    ie = qa["beam-1:information_extraction:0"]
    assert (ie.evidence, ie.answer, ie.meta["rubric"]) == (["2"], "Your first sprint ends on March 29.",
                                                          ["LLM response should state: March 29"])
    ku = qa["beam-1:knowledge_update:0"]
    assert ku.evidence == ["4", "6"] and ku.meta["gold_groups"] == {"original_info": ["4"], "updated_info": ["6"]}
    eo = qa["beam-1:event_ordering:0"]
    assert eo.evidence == ["2", "4", "10"] and eo.meta["gold_problems"] == ["nested"]
    ms = qa["beam-1:multi_session_reasoning:0"]
    assert ms.evidence == ["4", "6"] and ms.meta["gold_problems"] == ["missing"]  # 99 is not in the chat
    empty = qa["beam-1:multi_session_reasoning:1"]
    assert empty.evidence == [] and empty.meta["gold_problems"] == ["empty"]
    ab = qa["beam-1:abstention:0"]
    assert ab.evidence == [] and ab.meta["abstention"] and "gold_problems" not in ab.meta
    assert ab.answer == "There is no information about a dog."
    # every problem is reported (a warning naming the question), none silently dropped
    assert [i.field for i in by_kind(item, "gold_nested")] == ["event_ordering.0.source_chat_ids"]
    assert [i.field for i in by_kind(item, "gold_empty")] == ["multi_session_reasoning.1.source_chat_ids"]
    missing = by_kind(item, "gold_missing")
    assert [i.field for i in missing] == ["multi_session_reasoning.0.source_chat_ids"] and "'99'" in missing[0].message
    assert all(i.level == "warning" for i in item.issues)


def test_gold_id_shapes():
    assert gold_ids([3, 5]) == (["3", "5"], None, [], [])
    assert gold_ids({"first_event": [2], "second_event": [0]}) == (["2", "0"], {"first_event": ["2"], "second_event": ["0"]},
                                                                   [], [])
    assert gold_ids([1, [2, [3]], 1]) == (["1", "2", "3"], None, ["nested"], [])
    assert gold_ids([]) == ([], None, ["empty"], [])
    assert gold_ids({"a": [], "b": []})[2] == ["empty"]
    assert gold_ids(None)[2] == ["empty"]
    assert gold_ids(["12", "chat_id: 4"]) == (["12"], None, [], ["chat_id: 4"])


def test_truncated_chat_is_preferred(tmp_path: Path):
    short = batches_json(BATCHES[:1])
    item = one(write_beam(tmp_path / "5", truncated=short))
    assert item.conversation.meta["chat_file"] == "chat_trunecated.json" and item.conversation.num_turns == 6
    ku = next(q for q in item.qa if q.category == "knowledge_update")
    assert ku.evidence == ["4"] and "gold_missing" in {i.kind for i in item.issues}  # 6 lies after the cut


def test_bad_messages_have_defined_outcomes(tmp_path: Path):
    """Null content, an empty batch, a code-only turn, a turn that is one huge table and a
    349,000-character turn that is mostly blank: all read, content verbatim, reported where repaired."""
    chat = batches_json()
    code = "```python\n" + "\n".join(f"x{i} = {i}" for i in range(400)) + "\n```"
    table = "| k | v |\n|---|---|\n" + "\n".join(f"| key{i} | {i * 7} |" for i in range(3000))
    blank = "Here is the diagram:\n" + ("   |" + " " * 440 + "\\\n") * 790 + "Done."
    assert len(blank) >= 349_000
    msgs = [m for ex in chat[0]["turns"] for m in ex]
    msgs[1]["content"], msgs[3]["content"], msgs[5]["content"] = None, code, table
    chat[1]["turns"][0][1]["content"] = blank
    chat.append({"batch_number": 3, "turns": [], "time_anchor": "May-01-2024"})
    item = one(write_beam(tmp_path / "1", chat=chat))
    c = item.conversation
    assert [s.session_id for s in c.sessions] == ["batch-1", "batch-2"]  # the empty batch is no session
    turns = {t.turn_id: t for *_, t in c.iter_turns()}
    assert (turns["1"].content, turns["3"].content, turns["5"].content, turns["7"].content) == ("", code, table, blank)
    text = " | ".join(i.message for i in item.issues)
    assert "null content read as empty text" in text and "batch 3 has no messages: no session" in text


def test_bad_folders_and_files(tmp_path: Path):
    (tmp_path / "nochat" / "probing_questions").mkdir(parents=True)
    (tmp_path / "nochat" / "notes.json").write_text("{}")
    assert "no chat_trunecated.json or chat.json" in one(tmp_path / "nochat").issues[0].message
    broken = write_beam(tmp_path / "broken")
    (broken / "chat.json").write_text("[{not json")
    item = one(broken)
    assert item.conversation is None and "not valid JSON" in item.issues[0].message
    shape = write_beam(tmp_path / "shape", chat={"batch_number": 1})  # type: ignore[arg-type]
    assert one(shape).conversation is None
    noq = write_beam(tmp_path / "noq")
    (noq / "probing_questions" / "probing_questions.json").unlink()
    item = one(noq)
    assert item.conversation is not None and item.qa == [] and "no probing questions file" in item.issues[0].message
    badq = write_beam(tmp_path / "badq")
    (badq / "probing_questions" / "probing_questions.json").write_text("[1, 2]")
    item = one(badq)
    assert item.conversation is not None and item.qa == [] and item.issues[0].level == "warning"
    item = list(read_input("beam", broken / "probing_questions" / "probing_questions.json"))[0]
    assert item.conversation is None and "conversation folder" in item.issues[0].message


def test_detection_sniffs_the_chat(tmp_path: Path):
    root = write_split(tmp_path / "100K", 3)
    big = batches_json([("March-01-2024", [("hello " * 20_000, "hi")])])  # first batch over the sniffed bytes
    assert sniff_bytes(json.dumps(big, indent=2).encode()[:65536]) == "beam"
    assert sniff_bytes(json.dumps(batches_json()).encode()) == "beam"
    d = detect_format(root)
    assert (d.format, d.looks_like) == ("beam", "a BEAM directory (3 folders)")
    assert detect_format(root / "2").format == "beam"
    s = survey_input(root)
    assert (s.format, s.conversations, s.unit) == ("beam", 3, "folder")
    with pytest.raises(InputError) as e:
        survey_input(root / "1" / "chat.json")
    assert e.value.kind == "needs_folder"
    with pytest.raises(InputError) as e:
        survey_input(root / "1" / "chat.json", "locomo")  # a BEAM chat is not another format either
    assert e.value.kind == "format_mismatch"


def test_convert_writes_conversations_and_questions(tmp_path: Path):
    root = write_split(tmp_path / "100K", 2)
    rep = convert("beam", root, tmp_path / "out.jsonl")
    assert (rep.conversations, rep.turns, rep.questions, rep.errors) == (2, 24, 14, 0) and rep.warnings == 6
    qa = [json.loads(x) for x in (tmp_path / "out.qa.jsonl").read_text().splitlines()]
    assert qa[1]["evidence"] == ["4", "6"] and qa[1]["category"] == "knowledge_update"


@pytest.mark.heavy
def test_local_build_of_beam_with_bad_turns(tmp_path: Path, embedder):
    chat = batches_json()
    blank = "Diagram:\n" + ("   |" + " " * 440 + "\\\n") * 790
    chat[1]["turns"][0][1]["content"] = blank
    chat[0]["turns"][0][1]["content"] = None
    root = tmp_path / "100K"
    write_beam(root / "1", chat=chat)
    write_beam(root / "2")
    cfg = load_config(env={})
    s = run_local_build(cfg, "beam", root, tmp_path / "st", backend="rules", ctx=make_context(cfg, "rules", embedder))
    assert (s.inputs, s.built, s.failed) == (2, 2, 0)
    warnings = " | ".join(w["message"] for w in s.warnings)
    assert "longer than segmenter.max_turn_chars" in warnings and "null content" in warnings
    d = StoreReader(tmp_path / "st").load("beam-1")
    contents = dict(zip(d.turns.column("turn_id").to_pylist(), d.turns.column("content").to_pylist(), strict=True))
    assert contents["7"] == blank and contents["1"] == ""  # stored in full; the null is an empty turn
