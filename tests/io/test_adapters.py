import json
from pathlib import Path

import pytest

from lychee_ray.io.adapters import read_input
from lychee_ray.io.adapters.dates import parse_datetime
from lychee_ray.cli.main import main
from lychee_ray.io.convert import convert, side_paths
from lychee_ray.core.conversation import Conversation, conversation_from_row, conversations_to_table

from tests.paths import LOCOMO_DIR, LONGMEMEVAL_FILE, need


def _conv(cid="c-1", **kw):
    base = {
        "conversation_id": cid,
        "user_id": "u-1",
        "sessions": [
            {
                "session_id": "s1",
                "started_at": "2023-05-08T13:56:00",
                "turns": [{"turn_id": "D1:1", "role": "user", "speaker": "Caroline", "content": "Hey Mel!"}],
            }
        ],
    }
    base.update(kw)
    return base


def test_dates():
    assert parse_datetime("1:56 pm on 8 May, 2023") == "2023-05-08T13:56:00"
    assert parse_datetime("10:37 am on 27 June, 2023") == "2023-06-27T10:37:00"
    assert parse_datetime("2023/05/20 (Sat) 02:21") == "2023-05-20T02:21:00"
    assert parse_datetime("2023-05-08T13:56:00") == "2023-05-08T13:56:00"
    with pytest.raises(ValueError):
        parse_datetime("the day after the thing")


def test_arrow_roundtrip():
    conv = Conversation.model_validate(_conv())
    table = conversations_to_table([conv])
    back = conversation_from_row(table.to_pylist()[0])
    assert back == conv
    rows = conv.turn_rows()
    assert rows[0]["turn_id"] == "D1:1" and rows[0]["session_index"] == 0 and rows[0]["turn_index"] == 0


def test_jsonl_bad_lines_are_reported_and_rest_converted(tmp_path: Path):
    lines = [
        json.dumps(_conv("good-1")),
        '{"conversation_id": "broken", ',  # malformed
        json.dumps({"user_id": "x", "sessions": []}),  # missing conversation_id
        # an unparseable date is dropped with a warning; the conversation is kept
        json.dumps(_conv("bad-date", sessions=[{"session_id": "s1", "started_at": "yesterday-ish", "turns": [{"turn_id": "1", "content": "x"}]}])),
        json.dumps(_conv("empty", sessions=[{"session_id": "s1", "turns": []}])),
        json.dumps(_conv("good-1")),  # duplicate id
        json.dumps(_conv("good-2")),
    ]
    src = tmp_path / "in.jsonl"
    src.write_text("\n".join(lines) + "\n")
    rep = convert("jsonl", src, tmp_path / "out.jsonl")
    assert rep.conversations == 3
    assert (rep.errors, rep.warnings) == (3, 2)  # the duplicate line is skipped with a warning (issue 39)
    out = [json.loads(l) for l in (tmp_path / "out.jsonl").read_text().splitlines()]
    assert [c["conversation_id"] for c in out] == ["good-1", "bad-date", "good-2"]
    assert out[1]["sessions"][0]["started_at"] is None
    errs = [json.loads(l) for l in side_paths(tmp_path / "out.jsonl")[1].read_text().splitlines()]
    by_line = {e["line"]: e for e in errs}
    assert "malformed JSON" in by_line[2]["message"]
    assert by_line[3]["field"] == "conversation_id"
    assert by_line[4]["field"] == "sessions.0.started_at" and by_line[4]["conversation_id"] == "bad-date"
    assert by_line[4]["level"] == "warning" and "yesterday-ish" in by_line[4]["message"]
    assert "no turns" in by_line[5]["message"]
    assert "duplicate" in by_line[6]["message"] and by_line[6]["field"] == "conversation_id"
    assert by_line[6]["level"] == "warning" and f"{src}:6" in by_line[6]["message"] and f"{src}:1" in by_line[6]["message"]
    assert all(e["file"] == str(src) for e in errs)


def test_convert_exit_codes(tmp_path: Path, capsys):
    src = tmp_path / "in.jsonl"
    src.write_text("not json\n")
    assert main(["convert", "--format", "jsonl", "--input", str(src), "--out", str(tmp_path / "o.jsonl")]) == 1
    src.write_text(json.dumps(_conv()) + "\nnot json\n")
    assert main(["convert", "--format", "jsonl", "--input", str(src), "--out", str(tmp_path / "o.jsonl")]) == 0
    assert main(["convert", "--format", "jsonl", "--input", str(src), "--out", str(tmp_path / "o.jsonl"), "--strict"]) == 1
    assert main(["convert", "--format", "jsonl", "--input", str(tmp_path / "missing"), "--out", str(tmp_path / "o.jsonl")]) == 2


def test_invalid_utf8_line(tmp_path: Path):
    src = tmp_path / "in.jsonl"
    src.write_bytes(json.dumps(_conv("a")).encode() + b"\n" + b'{"conversation_id": "\xff\xfe"}\n')
    items = list(read_input("jsonl", src))
    assert items[0].conversation is not None
    # undecodable bytes are replaced (warning); the line still fails on its own (no sessions)
    assert "invalid UTF-8" in items[1].issues[0].message and items[1].issues[0].line == 2
    assert items[1].issues[0].level == "warning" and items[1].conversation is None
    assert any(i.level == "error" and i.field == "sessions" for i in items[1].issues)


def test_locomo_conversion(tmp_path: Path):
    need(LOCOMO_DIR)
    rep = convert("locomo", LOCOMO_DIR, tmp_path / "locomo.jsonl")
    assert (rep.conversations, rep.turns, rep.questions, rep.errors) == (10, 5882, 1986, 0)
    convs = [Conversation.model_validate_json(l) for l in (tmp_path / "locomo.jsonl").read_text().splitlines()]
    qa = [json.loads(l) for l in (tmp_path / "locomo.qa.jsonl").read_text().splitlines()]
    assert sum(q["category"] in {"1", "2", "3", "4"} for q in qa) == 1540
    ids = {c.conversation_id: {t.turn_id for *_, t in c.iter_turns()} for c in convs}
    # every evidence id left in the side file resolves; the unresolvable ones were reported
    assert all(e in ids[q["conversation_id"]] for q in qa for e in q["evidence"])
    errs = [json.loads(l) for l in (tmp_path / "locomo.errors.jsonl").read_text().splitlines()]
    assert errs and all(e["level"] == "warning" and "evidence" in e["field"] for e in errs)
    c26 = next(c for c in convs if c.conversation_id == "locomo-26")
    s1 = c26.sessions[0]
    assert s1.session_id == "session_1" and s1.started_at == "2023-05-08T13:56:00"
    assert s1.turns[0].turn_id == "D1:1" and s1.turns[0].speaker == "Caroline"
    assert any("[image: " in t.content for t in s1.turns)
    nums = [int(s.session_id.split("_")[1]) for s in c26.sessions]
    assert nums == sorted(nums)
    # "D8:6; D9:17" was split into two resolvable ids
    q = next(q for q in qa if q["meta"].get("evidence_raw") == ["D8:6; D9:17"])
    assert q["evidence"] == ["D8:6", "D9:17"]


def test_longmemeval_conversion(tmp_path: Path):
    need(LONGMEMEVAL_FILE)
    rep = convert("longmemeval", LONGMEMEVAL_FILE, tmp_path / "lme.jsonl")
    assert rep.conversations == 1 and rep.questions == 1 and rep.errors == 0
    conv = Conversation.model_validate_json((tmp_path / "lme.jsonl").read_text())
    raw = json.loads(LONGMEMEVAL_FILE.read_text())[0]
    assert len(conv.sessions) == len(raw["haystack_sessions"])
    assert all(s.started_at for s in conv.sessions)
    starts = [s.started_at for s in conv.sessions]
    assert starts == sorted(starts)
    qa = json.loads((tmp_path / "lme.qa.jsonl").read_text())
    assert qa["question_date"] == "2023-05-30T23:40:00"
    assert qa["answer_session_ids"] == raw["answer_session_ids"]
    has_answer = {t.turn_id for *_, t in conv.iter_turns() if t.meta.get("has_answer")}
    assert has_answer and set(qa["evidence"]) == has_answer


def test_longmemeval_bad_date(tmp_path: Path):
    inst = {"question_id": "q1", "question": "?", "answer": "a", "question_type": "x", "haystack_session_ids": ["s1"],
            "haystack_dates": ["not a date"], "haystack_sessions": [[{"role": "user", "content": "hi"}]]}
    good = dict(inst, question_id="q2", haystack_dates=["2023/05/20 (Sat) 02:21"])
    src = tmp_path / "lme.json"
    src.write_text(json.dumps([inst, good]))
    items = list(read_input("longmemeval", src))
    assert items[0].conversation is None and items[0].issues[0].field == "haystack_dates.0"
    assert items[1].conversation is not None


def test_uri_inputs_and_parquet(tmp_path: Path):
    from lychee_ray.io.adapters import input_units
    from lychee_ray.core.conversation import conversations_to_table
    import pyarrow.parquet as pq

    (tmp_path / "a.jsonl").write_text(json.dumps(_conv("u1")) + "\n")
    uri = f"file://{tmp_path}"
    assert input_units("jsonl", uri) == [f"file://{tmp_path}/a.jsonl"]
    items = list(read_input("jsonl", uri))
    assert [i.conversation.conversation_id for i in items] == ["u1"]
    table = conversations_to_table([Conversation.model_validate(_conv("p1")), Conversation.model_validate(_conv("p2"))])
    pq.write_table(table, tmp_path / "convs.parquet")
    got = [i.conversation.conversation_id for i in read_input("parquet", f"file://{tmp_path}/convs.parquet")]
    assert got == ["p1", "p2"]
    with pytest.raises(FileNotFoundError):
        input_units("jsonl", f"file://{tmp_path}/missing")
