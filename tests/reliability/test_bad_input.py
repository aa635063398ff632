"""Bad input (issue 9 item 2): every file of ``tests/data/bad/`` is built with the local runner and
the rules backend, plus two inputs generated at test time (a 10 MB turn, a conversation of tiny turns).

For every file: each input line is accounted for (built, or failed with ``file:line`` and a
reason); the conversations that should build are built and pass ``verify``; a built conversation
keeps every input turn, with its text equal to the input after the documented cleaning
(:func:`lychee_ray.io.adapters.clean.clean_text`); every repair is reported as a warning. The expected
outcome per file is in ``tests/data/bad/README.md``.

The small files use the real offline embedder (the session fixture). The generated big inputs use
a cheap hashing embedder for the tiny-turn conversation (what is measured is the pipeline, not the
model's throughput) and the 10 MB turn. The full-size 100,000-turn conversation is marked ``slow``
(``LYCHEE_SLOW=1`` or ``-m slow`` runs it); CI runs 20,000 turns.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import resource
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from lychee_ray.io.adapters import AdapterItem, read_input
from lychee_ray.io.adapters.clean import clean_text
from lychee_ray.config import DEFAULT_CONFIG_PATH, LycheeConfig, SegmenterConfig, load_config
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import BuildSummary, run_local_build
from lychee_ray.io.store import StoreReader
from lychee_ray.io.verify import verify_store

pytestmark = pytest.mark.reliability

BAD = Path(__file__).resolve().parents[1] / "data" / "bad"
# What must never reach stored text or prompts (the cleaning removes it).
UNCLEAN = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


class HashEmbedder:
    """Deterministic bag-of-words hashing embedder: cheap, so big inputs measure the pipeline."""

    name = "test-hash-embedder"
    dim = 64

    def encode(self, texts):
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        for i, t in enumerate(texts):
            for w in t.lower().split()[:64]:
                h = zlib.crc32(w.encode("utf-8", "replace"))
                out[i, h % self.dim] += 1.0 if (h >> 20) & 1 else -1.0
        norms = np.linalg.norm(out, axis=1, keepdims=True)
        norms[norms == 0] = 1.0
        return out / norms


def raw_lines(path: Path) -> dict[int, bytes]:
    """Non-blank raw lines by 1-based line number: one input conversation each."""
    return {i: raw for i, raw in enumerate(path.read_bytes().splitlines(), start=1) if raw.strip()}


def raw_object(raw: bytes) -> dict[str, Any]:
    """The input object as a lenient reader sees it (invalid bytes replaced, BOM dropped)."""
    return json.loads(raw.decode("utf-8", "replace").lstrip("\ufeff"), strict=False)


def raw_turns(obj: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for s in obj.get("sessions") or [] if isinstance(s, dict) for t in (s.get("turns") or [])]


@dataclass
class Built:
    path: Path
    root: Path
    summary: BuildSummary
    reader: StoreReader
    items: list[AdapterItem]
    wall_s: float

    def turns(self, cid: str) -> list[dict[str, Any]]:
        return self.reader.load(cid).turns.to_pylist()

    def warnings(self, cid: str) -> list[str]:
        return [w["message"] for w in self.summary.warnings if w["conversation_id"] == cid]


def build(path: Path, out: Path, embedder, *sets: str) -> Built:
    cfg = load_config(sets=list(sets), env={})
    t0 = time.perf_counter()
    s = run_local_build(cfg, "jsonl", path, out, backend="rules", ctx=make_context(cfg, "rules", embedder))
    wall = time.perf_counter() - t0
    return Built(path, out, s, StoreReader(out), list(read_input("jsonl", path)), wall)


def check_file(b: Built, built: set[str], failed: dict[int, str], warned: dict[str, list[str]],
               duplicates: dict[int, str] | None = None) -> None:
    """Accounting, verify, turn preservation and reported repairs for one bad-input file."""
    lines = raw_lines(b.path)
    s = b.summary
    # every input conversation is accounted for: built, failed with file:line and a reason, or a
    # skipped duplicate line (a warning naming the line)
    assert s.inputs == len(lines) and s.built + s.skipped + s.failed + s.duplicate == s.inputs
    assert s.duplicate == len(duplicates or {}) and sorted(s.duplicates) == sorted(
        f"{b.path}:{line} [{cid}]" for line, cid in (duplicates or {}).items())
    assert set(b.reader.conversation_ids()) == built and s.built == len(built) and s.skipped == 0
    errors = {e["line"]: e for e in s.errors}
    assert set(errors) == set(failed) and s.failed == len(failed)
    for line, needle in failed.items():
        assert needle in errors[line]["message"], errors[line]
        assert errors[line]["file"] == str(b.path) and errors[line]["stage"] == "input"
    stored = b.reader.errors().to_pylist()
    assert sorted(e["line"] for e in stored if e["stage"] != "warning") == sorted(failed)
    assert len([e for e in stored if e["stage"] == "warning"]) == len(s.warnings)
    # the good conversations are built and consistent
    report = verify_store(b.root)
    assert report["ok"], report["problems"]
    assert report["conversations"] == len(built)
    # nothing silently dropped: every built conversation keeps exactly its input turns
    by_id = {i.conversation.conversation_id: i for i in b.items if i.conversation is not None}
    assert set(by_id) == built
    for cid, item in by_id.items():
        raw = raw_turns(raw_object(lines[item.line]))
        rows = b.turns(cid)
        assert len(rows) == len(raw) == item.conversation.num_turns, cid
        assert [r["content"] for r in rows] == [clean_text(str(t.get("content") or ""))[0] for t in raw], cid
        segs = b.reader.load(cid).segments.to_pylist()
        assert sorted(t for sg in segs for t in sg["turn_ids"]) == sorted(r["turn_id"] for r in rows)
        if "-good-" in cid:
            assert not b.warnings(cid) and b.reader.markers[cid].counts.records > 0
    # every repair is reported, and only repaired conversations carry warnings
    assert {w["conversation_id"] for w in s.warnings} == set(warned)
    for cid, needles in warned.items():
        text = "\n".join(b.warnings(cid))
        for needle in needles:
            assert needle in text, (cid, needle, text)


def by_turn(b: Built, cid: str, key: str) -> list[Any]:
    return [r[key] for r in b.turns(cid)]


# --------------------------------------------------------------------------------------------
# the committed corpus
# --------------------------------------------------------------------------------------------


def test_corpus_is_small_and_listed():
    files = sorted(p.name for p in BAD.iterdir() if p.is_file())
    assert sum(p.stat().st_size for p in BAD.iterdir()) < 200_000
    readme = (BAD / "README.md").read_text()
    assert all(f"`{f}`" in readme for f in files if f.endswith(".jsonl"))
    assert len([f for f in files if f.endswith(".jsonl")]) == 8


def test_truncated_jsonl(tmp_path, embedder):
    b = build(BAD / "truncated.jsonl", tmp_path / "st", embedder)
    check_file(b, {"trunc-good-1", "trunc-good-2", "trunc-good-3"},
               {3: "malformed JSON", 5: "malformed JSON"}, {})
    errs = {e["line"]: e for e in b.summary.errors}
    assert all("truncated?" in e["message"] for e in errs.values())
    # the id is still named when it can be read from the broken line
    assert (errs[3]["conversation_id"], errs[5]["conversation_id"]) == ("trunc-cut-mid", "trunc-cut-last")


def test_invalid_utf8(tmp_path, embedder):
    b = build(BAD / "invalid_utf8.jsonl", tmp_path / "st", embedder)
    check_file(b, {"utf8-good-bom-1", "utf8-bad-bytes", "utf8-good-2", "utf8-cut-multibyte", "utf8-good-3"},
               {4: "malformed JSON"},
               {"utf8-bad-bytes": ["invalid UTF-8 at byte", "U+FFFD"], "utf8-cut-multibyte": ["invalid UTF-8 at byte"]})
    content = by_turn(b, "utf8-bad-bytes", "content")
    assert content[1] == "I drank a coffee at the cafe caf\ufffd near the station and it cost 3 euros."
    assert content[2].startswith("The broken byte \ufffd") and content[2].endswith("sentence about counseling.")
    assert by_turn(b, "utf8-cut-multibyte", "content")[2] == "The ticket price was 12 \ufffd"


def test_empty_sessions(tmp_path, embedder):
    b = build(BAD / "empty_sessions.jsonl", tmp_path / "st", embedder)
    check_file(b, {"empty-good-1", "empty-mixed", "empty-blank-turns", "empty-only-blank-turns", "empty-good-2"},
               {2: "conversation has no turns", 3: "conversation has no turns", 5: "sessions: Field required"},
               {"empty-mixed": ["null turns read as an empty session"]})
    assert by_turn(b, "empty-mixed", "session_id") == ["s1"] * 4 + ["s4"]
    assert by_turn(b, "empty-blank-turns", "content")[1:3] == ["", "   \n\t  "]
    assert b.reader.markers["empty-only-blank-turns"].counts.records == 0


@pytest.mark.heavy
def test_missing_speakers(tmp_path, embedder):
    b = build(BAD / "missing_speakers.jsonl", tmp_path / "st", embedder)
    ids = {"spk-good-1", "spk-absent", "spk-null-blank", "spk-no-role-no-speaker", "spk-odd-roles", "spk-good-2"}
    check_file(b, ids, {}, {"spk-odd-roles": ["unknown role read as user", "'narrator'"]})
    assert by_turn(b, "spk-absent", "speaker") == ["user"] * 4
    assert by_turn(b, "spk-null-blank", "speaker") == ["user"] * 4
    assert by_turn(b, "spk-no-role-no-speaker", "role") == by_turn(b, "spk-no-role-no-speaker", "speaker") == ["user"] * 4
    assert by_turn(b, "spk-odd-roles", "role") == ["assistant", "user", "user", "user"]


@pytest.mark.heavy
def test_duplicate_ids(tmp_path, embedder):
    b = build(BAD / "duplicate_ids.jsonl", tmp_path / "st", embedder)
    path_id = "../../escape/../dup-path id"
    # the repeated id is not a failure (the conversation is built): each later line is skipped with a
    # warning naming that line and the one used, and the summary names the lines (issue 39)
    check_file(b, {"dup-conv", "dup-turn-ids", "dup-session-ids", "dup-missing-ids", "4242", path_id, "dup-good-2"},
               {},
               {"dup-conv": [f"this line ({b.path}:2) skipped", f"this line ({b.path}:3) skipped",
                             f"built from its first occurrence ({b.path}:1)"],
                "dup-turn-ids": ["duplicate turn id renamed", "'t1' -> 't1#2'"],
                "dup-session-ids": ["duplicate session id renamed", "'s1' -> 's1#2'"],
                "dup-missing-ids": ["missing session id generated", "missing turn id generated"]},
               duplicates={2: "dup-conv", 3: "dup-conv"})
    assert not b.summary.errors and "failed conversations" not in b.summary.table()
    assert f"{b.path}:2 [dup-conv]" in b.summary.table()
    # the first occurrence wins, with its own content
    first = raw_object(raw_lines(b.path)[1])
    assert by_turn(b, "dup-conv", "content") == [t["content"] for t in raw_turns(first)]
    assert by_turn(b, "dup-turn-ids", "turn_id") == ["t1", "t1#2", "t2", "t1#3", "t2#2"]
    metas = [json.loads(m) if m else {} for m in by_turn(b, "dup-turn-ids", "meta")]
    assert [m.get("source_turn_id") for m in metas] == [None, "t1", None, "t1", "t2"]
    assert by_turn(b, "dup-session-ids", "session_id") == ["s1"] * 3 + ["s1#2"]
    assert by_turn(b, "dup-missing-ids", "turn_id") == ["session-1:1", "session-1:2", "session-1:3", "t3"]
    assert by_turn(b, "4242", "turn_id") == ["1", "2", "3"]
    # a path-like id never escapes the store directory
    assert sorted(p.name for p in tmp_path.iterdir()) == ["st"] and not (tmp_path.parent / "escape").exists()


@pytest.mark.heavy
def test_bad_dates(tmp_path, embedder):
    b = build(BAD / "bad_dates.jsonl", tmp_path / "st", embedder)
    ids = {"date-good-1", "date-future", "date-extremes", "date-unparseable", "date-formats", "date-timezones", "date-good-2"}
    check_file(b, ids, {}, {
        "date-future": ["date in the future (kept)", "2099-12-31T23:59:59", "2199-01-01T00:00:00"],
        "date-extremes": ["date in the future (kept)", "9999-12-31"],
        "date-unparseable": ["unparseable date dropped", "'not a date'", "'yesterday-ish'", "'2023-02-30T10:00:00'"],
        "date-formats": ["date normalised to ISO", "'1:56 pm on 8 May, 2023' -> 2023-05-08T13:56:00", "epoch date normalised"],
        # its second session starts the day before the first: kept, and reported (issue 39)
        "date-timezones": ["session starts before the session before it (kept)", "2023-05-07T09:00:00 < "],
    })
    assert set(by_turn(b, "date-future", "session_started_at")) == {"2099-12-31T23:59:59"}
    assert by_turn(b, "date-extremes", "timestamp")[:2] == ["0001-01-01T00:00:00", "9999-12-31"]
    assert b.reader.markers["date-extremes"].counts.records > 0  # no overflow at the end of time
    assert set(by_turn(b, "date-unparseable", "session_started_at")) == {None}
    assert set(by_turn(b, "date-unparseable", "timestamp")) == {None}
    assert by_turn(b, "date-formats", "session_started_at")[0] == "2023-05-08T13:56:00"
    assert by_turn(b, "date-formats", "timestamp") == ["2023-05-08T00:00:00", "2023-05-20T02:21:00",
                                                      "2023-05-08T13:56:00", "2023-05-08T13:56:00.123000"]
    assert by_turn(b, "date-timezones", "timestamp")[:3] == ["2023-05-08T12:00:00Z", "2023-05-08T14:00:00",
                                                            "2023-05-08T15:00:00-07:00"]
    # the built memories answer queries (time channel over extreme and mixed-zone dates)
    from lychee_ray.memory import MemoryStore

    ms = MemoryStore(b.root, load_config(env={}), embedder=embedder, llm="rules")
    try:
        for cid in ("date-extremes", "date-timezones", "date-future"):
            r = ms.query(cid, "What happened on 31 December 9999 and yesterday?")
            assert r.evidence and {e.conversation_id for e in r.evidence} == {cid}
    finally:
        ms.close()


@pytest.mark.heavy
def test_control_characters(tmp_path, embedder):
    b = build(BAD / "control_chars.jsonl", tmp_path / "st", embedder)
    cleaned = ["control characters removed / lone surrogates replaced"]
    check_file(b, {"ctl-good-1", "ctl-c0", "ctl-ansi", "ctl-bidi", "ctl-surrogates", "ctl-ids", "ctl-good-2", "ctl-raw-bytes"}, {},
               {"ctl-c0": cleaned, "ctl-ansi": cleaned, "ctl-bidi": cleaned, "ctl-surrogates": cleaned,
                "ctl-ids": cleaned + ["duplicate turn id renamed"], "ctl-raw-bytes": cleaned})
    # stored text is clean everywhere: turns, records, nodes, segments
    for cid in b.reader.conversation_ids():
        assert not UNCLEAN.search(cid)
        d = b.reader.load(cid)
        for table in (d.turns, d.records, d.nodes, d.segments):
            for col in table.column_names:
                if pa.types.is_string(table.schema.field(col).type):
                    for v in table.column(col).to_pylist():
                        assert v is None or not UNCLEAN.search(v), (cid, col, v)
    assert by_turn(b, "ctl-ansi", "content")[:3] == ["Red alert: the server crashed at noon.", "I renamed the terminal window.",
                                                     "The screen was cleared before this message."]
    assert by_turn(b, "ctl-c0", "content")[0] == "Null bytes inside the sentence about the pottery class."
    assert by_turn(b, "ctl-c0", "content")[2] == "Tabs\tand\nnewlines and CRLF\r\nare kept."  # whitespace kept
    assert by_turn(b, "ctl-bidi", "content")[0] == "Access level: user admin hidden text about adoption."
    assert by_turn(b, "ctl-bidi", "content")[2].startswith("Hebrew \u05e9\u05dc\u05d5\u05dd and Arabic")
    surrogates = by_turn(b, "ctl-surrogates", "content")
    assert surrogates[0] == "A lone high surrogate \ufffd in the middle of the counseling sentence."
    assert surrogates[2] == "A valid pair \U0001f600 is an emoji and stays." and surrogates[3] == "\ufffd"
    assert by_turn(b, "ctl-ids", "turn_id") == ["t0", "t0#2", "t2"] and by_turn(b, "ctl-ids", "speaker")[0] == "Melanie"
    assert by_turn(b, "ctl-raw-bytes", "content")[0] == "Raw TAB\there and raw ESC bold  and a raw NUL  end."
    # and so are the encode prompts built from them
    for item in b.items:
        for message in encode_prompts(item.conversation):
            assert not UNCLEAN.search(message["content"])


@pytest.mark.heavy
def test_prompt_injection_is_stored_as_data(tmp_path, embedder):
    b = build(BAD / "injection.jsonl", tmp_path / "st", embedder)
    check_file(b, {"inj-good-1", "inj-turns", "inj-system-role", "inj-mixed", "inj-good-2"}, {}, {})
    lines = raw_lines(b.path)
    item = next(i for i in b.items if i.conversation.conversation_id == "inj-turns")
    raw = [t["content"] for t in raw_turns(raw_object(lines[item.line]))]
    assert by_turn(b, "inj-turns", "content") == raw  # verbatim, byte for byte
    assert b.reader.markers["inj-turns"].counts.records > 0
    assert by_turn(b, "inj-system-role", "role")[0] == "system"
    # in the encoder's prompt, turn text only ever appears inside the user message's turn list
    from lychee_ray.ingest.encode.openai import instructions_for

    cfg = load_config(env={})
    seen = set()
    for message in encode_prompts(item.conversation):
        if message["role"] == "system":
            assert message["content"] == instructions_for(cfg.encoder)
        else:
            turns_part = message["content"].split("Segment turns:\n", 1)[1]
            seen |= {t for t in raw if t.strip() and t.strip()[:40] in turns_part}
    assert seen == {t for t in raw if t.strip()}


def encode_prompts(conv) -> list[dict[str, str]]:
    """The openai encoder's messages for every segment of ``conv`` (no LLM call; segments cut on
    hashing vectors: where the cuts fall does not matter here, every turn is in one prompt)."""
    from lychee_ray.ingest.pipeline import encode_turns, speakers_of
    from lychee_ray.ingest.encode.base import EncodeRequest
    from lychee_ray.ingest.encode.openai import build_messages
    from lychee_ray.ingest.segment import segment_conversation

    cfg = load_config(env={})
    segs = segment_conversation(conv, HashEmbedder(), cfg.segmenter, encoding=cfg.tokenizer.encoding).segments
    out = []
    for seg in segs:
        req = EncodeRequest(conversation_id=conv.conversation_id, user_id=conv.user_id, segment_id=f"s{seg.segment_index}",
                            segment_index=seg.segment_index, turns=encode_turns(conv, seg), speakers=speakers_of(conv),
                            prev_resolution_state="", prev_records=[])
        out.extend(build_messages(req, cfg.encoder, cfg.tokenizer))
    return out


def test_parquet_and_dataset_inputs_get_the_same_cleaning(tmp_path):
    """The repairs are not JSONL-only: Parquet rows and LoCoMo files go through the same cleaning."""
    from lychee_ray.core.conversation import CONVERSATION_SCHEMA

    row = {"conversation_id": "pq-1", "user_id": "u", "meta": None, "sessions": [{"session_id": "s1", "started_at": "8 May 2023", "turns": [
        {"turn_id": "t1", "role": "Human", "speaker": None, "content": "\x1b[31mred\x1b[0m text\x00", "timestamp": None, "meta": None},
        {"turn_id": "t1", "role": "assistant", "speaker": "bot", "content": "reply", "timestamp": "yesterday-ish", "meta": None}]}]}
    pq.write_table(pa.Table.from_pylist([row], schema=CONVERSATION_SCHEMA), tmp_path / "c.parquet")
    [item] = read_input("parquet", tmp_path / "c.parquet")
    conv = item.conversation
    assert [t.turn_id for t in conv.sessions[0].turns] == ["t1", "t1#2"] and conv.sessions[0].started_at == "2023-05-08T00:00:00"
    assert conv.sessions[0].turns[0].content == "red text" and conv.sessions[0].turns[0].role == "user"
    assert {i.level for i in item.issues} == {"warning"} and len(item.issues) == 4
    sample = {"sample_id": "x", "conversation": {"speaker_a": "A", "speaker_b": "B", "session_1_date_time": "1:56 pm on 8 May, 2023",
              "session_1": [{"speaker": "A", "dia_id": "D1:1", "text": "Hi\x00 there \ud800 friend"}]}, "qa": []}
    (tmp_path / "lo.json").write_bytes(b"\xef\xbb\xbf" + json.dumps(sample).encode() + b" ")
    [item] = read_input("locomo", tmp_path / "lo.json")
    assert item.conversation.sessions[0].turns[0].content == "Hi there \ufffd friend"
    assert [i.level for i in item.issues] == ["warning"]


def test_one_bad_text_does_not_fail_the_conversations_batched_with_it():
    """The build batches embeddings across conversations: a text the model rejects fails only its own request."""
    from lychee_ray.embed import AsyncBatchEmbedder

    class Picky(HashEmbedder):
        def encode(self, texts):
            if any("poison" in t for t in texts):
                raise TypeError("model cannot encode this text")
            return super().encode(texts)

    async def run():
        b = AsyncBatchEmbedder(Picky(), wait_ms=20, max_texts=512)
        return await asyncio.gather(b.embed(["a good text"]), b.embed(["poison"]), b.embed(["another one"]),
                                    return_exceptions=True)

    good1, bad, good2 = asyncio.run(run())
    assert isinstance(bad, TypeError)
    assert good1.shape == (1, 64) and good2.shape == (1, 64)


# --------------------------------------------------------------------------------------------
# big inputs, generated at test time (never committed)
# --------------------------------------------------------------------------------------------

LOG_SENTENCES = ["The nightly backup job on server {n} finished after {m} minutes.",
                 "Disk usage on volume {n} reached {m} percent before the cleanup ran.",
                 "Caroline restarted the payment service at {m} past midnight on node {n}.",
                 "The error rate for region {n} dropped to {m} per thousand requests."]


def huge_text(nbytes: int) -> str:
    """``nbytes`` ASCII characters of log-like sentences (few distinct ones: the embedder dedups)."""
    parts, size, i = [], 0, 0
    while size < nbytes:
        s = LOG_SENTENCES[i % 4].format(n=i % 5, m=10 + i % 3) + " "
        parts.append(s)
        size += len(s)
        i += 1
    return "".join(parts)[:nbytes]


def write_huge_turn(path: Path, nbytes: int) -> str:
    text = huge_text(nbytes)
    conv = {"conversation_id": "huge-turn", "sessions": [{"session_id": "s1", "started_at": "2023-05-08T13:56:00", "turns": [
        {"turn_id": "t0", "speaker": "Caroline", "content": "Here is the full server log from last night."},
        {"turn_id": "t1", "speaker": "Caroline", "content": text},
        {"turn_id": "t2", "speaker": "Melanie", "content": "Thanks, I will read the log and look at the payment service."}]}]}
    neighbour = {"conversation_id": "huge-neighbour", "sessions": [{"session_id": "s1", "turns": [
        {"turn_id": "t0", "speaker": "Melanie", "content": "I signed up for a pottery class at the community center."}]}]}
    path.write_text(json.dumps(conv) + "\n" + json.dumps(neighbour) + "\n")
    return text


TINY = ["ok", "yes", "no", "sure", "lol", "hmm", "cool", "right", "thanks", "bye", "hi", "nice"]
TOPICS = ["pizza", "rain", "exam", "gym", "train", "movie", "cat", "beach"]


def write_tiny_turns(path: Path, n: int) -> None:
    """One conversation of ``n`` tiny user/assistant turns ("ok pizza", "lol pizza" …; the topic word
    changes every 40 turns; every 20th turn is a short sentence)."""
    turns = [{"turn_id": f"t{i}", "role": "user" if i % 2 == 0 else "assistant",
              "content": f"I moved the meeting with Priya to room {i}." if i % 20 == 0
              else f"{TINY[i % len(TINY)]} {TOPICS[(i // 40) % len(TOPICS)]}"}
             for i in range(n)]
    path.write_text(json.dumps({"conversation_id": "tiny-turns", "sessions": [{"session_id": "s1", "turns": turns}]}) + "\n")


def test_max_turn_chars_default_is_documented():
    assert SegmenterConfig().max_turn_chars == 50_000
    assert load_config(env={}) == LycheeConfig()  # configs/default.yaml equals the code defaults
    assert yaml.safe_load(DEFAULT_CONFIG_PATH.read_text())["segmenter"]["max_turn_chars"] == SegmenterConfig().max_turn_chars


class LongestText(HashEmbedder):
    """Records the longest text it was asked to embed."""

    longest = 0

    def encode(self, texts):
        self.longest = max([self.longest, *map(len, texts)])
        return super().encode(texts)


@pytest.mark.heavy
def test_10mb_turn_is_stored_in_full_and_encoded_bounded(tmp_path):
    src = tmp_path / "huge.jsonl"
    text = write_huge_turn(src, 10_000_000)
    embedder = LongestText()
    b = build(src, tmp_path / "st", embedder)
    s = b.summary
    assert (s.inputs, s.built, s.failed) == (2, 2, 0) and verify_store(b.root)["ok"]
    warnings = b.warnings("huge-turn")
    [warning] = [w for w in warnings if "segmenter.max_turn_chars" in w]
    assert "segmenter.max_turn_chars=50000" in warning and "t1 (10000000 chars)" in warning
    # searchable by its passages up to passages.max_turn_chars, and the build says where search stops
    [capped] = [w for w in warnings if "passages.max_turn_chars" in w]
    assert "passages.max_turn_chars=1000000" in capped and "t1 (10000000 chars)" in capped
    stored = b.turns("huge-turn")
    assert len(stored) == 3 and len(stored[1]["content"]) == len(text)
    assert hashlib.sha256(stored[1]["content"].encode()).digest() == hashlib.sha256(text.encode()).digest()
    # only the bounded prefix was segmented and encoded: a handful of segments, not ~1,200
    segs = b.reader.load("huge-turn").segments.to_pylist()
    assert 1 <= sum("t1" in sg["turn_ids"] for sg in segs) <= 10
    assert all(sg["status"] == "ok" for sg in segs) and b.reader.markers["huge-turn"].counts.records > 0
    assert embedder.longest <= SegmenterConfig().max_turn_chars  # the model never sees the whole turn
    # and the store answers within its budget
    from lychee_ray.memory import MemoryStore

    ms = MemoryStore(b.root, load_config(env={}), embedder=embedder, llm="rules")
    try:
        r = ms.search("huge-turn", "When did Caroline restart the payment service?")
        assert r.evidence and sum(len(e.text) for e in r.evidence) < 100_000
    finally:
        ms.close()
    print(f"\n10 MB turn: build {b.wall_s:.1f} s, peak RSS of the test process {peak_rss_mb()} MB")


def peak_rss_mb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024


def check_tiny_turns(tmp_path: Path, n: int) -> Built:
    src = tmp_path / "tiny.jsonl"
    write_tiny_turns(src, n)
    b = build(src, tmp_path / "st", HashEmbedder())
    s = b.summary
    assert (s.inputs, s.built, s.failed) == (1, 1, 0) and not s.warnings
    report = verify_store(b.root)
    assert report["ok"] and report["turns"] == n
    d = b.reader.load("tiny-turns")
    assert d.turns.num_rows == n and sum(len(t) for t in d.segments.column("turn_ids").to_pylist()) == n
    print(f"\n{n} tiny turns: build {b.wall_s:.1f} s, {d.segments.num_rows} segments, "
          f"{s.records} records, peak RSS of the test process {peak_rss_mb()} MB")
    return b


@pytest.mark.heavy
def test_20k_tiny_turns_build_in_bounded_time(tmp_path):
    b = check_tiny_turns(tmp_path, 20_000)
    assert b.wall_s < 120  # measured ~6-9 s on a loaded 2-core box; the segmenter is O(n)


@pytest.mark.slow  # full size, ~30-60 s: skipped unless LYCHEE_SLOW=1 or -m slow (tests/conftest.py)
def test_100k_tiny_turns_build_in_bounded_time(tmp_path):
    b = check_tiny_turns(tmp_path, 100_000)
    assert b.wall_s < 600


def test_token_split_of_a_huge_text_is_linear(monkeypatch):
    """Splitting an over-cap text tokenises O(n) characters in total (it was O(n^2): minutes for 10 MB)."""
    import lychee_ray.ingest.segment.exchanges as segment
    from lychee_ray.text.tokens import count_tokens, get_encoding

    real = get_encoding()
    seen = {"chars": 0}

    class Counting:
        def encode(self, text, **kw):
            seen["chars"] += len(text)
            return real.encode(text, **kw)

        def decode_tokens_bytes(self, ids):
            return real.decode_tokens_bytes(ids)

    monkeypatch.setattr(segment, "get_encoding", lambda *_: Counting())
    text = huge_text(1_000_000)
    spans = segment.split_text_by_tokens(text, 2048)
    assert spans[0][0] == 0 and spans[-1][1] == len(text) and all(a[1] == b[0] for a, b in zip(spans, spans[1:]))
    assert all(count_tokens(text[a:b]) <= 2048 for a, b in spans[:5])
    assert seen["chars"] < 4 * len(text)
