"""Memory checks on the LLM path (issue 16): each kind of bad reply gets its defined outcome —
repaired, counted, or the segment failed as degenerate — and a clean reply is left untouched."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from lychee_ray.ingest.encode.base import EncodeOutput, EncodeRequest, RecordDraft, SegmentTurn, TimeDraft
from lychee_ray.ingest.encode.guard import ConversationMemory, RecordGuard
from lychee_ray.ingest.context import make_context
from lychee_ray.ingest.runner import run_local_build
from lychee_ray.config import load_config
from lychee_ray.core.quality import DEGENERATE_OUTPUT, QualityCounts
from lychee_ray.io.store import StoreReader
from lychee_ray.io.verify import verify_store
from lychee_ray.testing import OpenAIServer
from lychee_ray.testing.fake_llm import encoder_reply, prompt_text
from lychee_ray.testing.synthetic import synthetic_conversation
from tests.reliability.test_llm_faults import EMB, llm_sets

SESSION = "2023-05-08"
TURNS = [
    ("Caroline", "I went to the LGBTQ support group yesterday and it was so powerful."),
    ("Melanie", "That sounds amazing! I am painting a sunset with my kids this week."),
    ("Caroline", "I also want to adopt a dog from the Hope shelter next month."),
]


def _request(prev: list[str] | None = None) -> EncodeRequest:
    turns = [SegmentTurn(index=i, turn_id=f"t{i}", session_id="s1", session_date=SESSION, speaker=s, role="user",
                         content=c) for i, (s, c) in enumerate(TURNS)]
    return EncodeRequest(conversation_id="c", user_id="u", segment_id="c#s1", segment_index=1, turns=turns,
                         speakers=["Caroline", "Melanie"], prev_records=prev or [])


def _draft(text: str, src: list[int], entities: list[str] | None = None, time: TimeDraft | None = None) -> RecordDraft:
    return RecordDraft(type="event", text=text, entities=["Caroline"] if entities is None else entities,
                       topics=["x"], time=time, source_turns=src)


def _check(*drafts: RecordDraft, prev: list[str] | None = None, memory: ConversationMemory | None = None, **cfg_sets):
    cfg = load_config(sets=[f"encoder.guard.{k}={v}" for k, v in cfg_sets.items()], env={}).encoder.guard
    out = EncodeOutput(records=list(drafts), resolution_state="I = Caroline")
    return RecordGuard(cfg).check(out, _request(prev), memory or ConversationMemory())


CLEAN = _draft("Caroline went to the LGBTQ support group on 7 May 2023 and found it powerful.", [0],
               time=TimeDraft(start="2023-05-07", end="2023-05-07", expression="yesterday"))


def test_clean_reply_passes_through_unchanged():
    reply = _check(CLEAN)
    assert reply.output.records == [CLEAN] and reply.output.records[0] is CLEAN
    assert reply.counts.rejected == {} and reply.counts.repaired == {} and reply.counts.records == 1
    assert not reply.is_degenerate(0.5)


def test_echo_of_reference_context_is_rejected_but_a_supported_restatement_is_kept():
    echo = _draft("Melanie found such a helpful group for her art class in Boston.", [1])
    prev = [echo.text, "Caroline adopted a cat from the city shelter."]
    reply = _check(echo, CLEAN, prev=prev)
    assert [d.text for d in reply.output.records] == [CLEAN.text]
    assert reply.counts.rejected == {"echo": 1}
    # the same fact said again in this segment's own turn is a true restatement, not an echo
    again = _draft("Caroline went to the LGBTQ support group and it was so powerful.", [0])
    reply = _check(again, prev=[again.text])
    assert reply.counts.rejected == {} and len(reply.output.records) == 1
    # an earlier record of the conversation counts like the reference context
    memory = ConversationMemory(texts={"melanie found such a helpful group for her art class in boston"})
    assert _check(echo, memory=memory).counts.rejected == {"echo": 1}


def test_citations_outside_the_segment_or_missing_are_reattributed_or_rejected():
    wrong = _draft("Caroline wants to adopt a dog from the Hope shelter.", [7])
    none = _draft("Melanie is painting a sunset with her kids.", [], entities=["Melanie"])
    bad = _draft("Caroline bought a yacht in Monaco with her uncle.", [9])
    unsupported = _draft("Caroline bought a yacht in Monaco with her uncle.", [0])
    reply = _check(wrong, none, bad, unsupported)
    kept = {d.text: d.source_turns for d in reply.output.records}
    assert kept == {wrong.text: [2], none.text: [1]}
    assert reply.counts.repaired["citation_fixed"] == 2
    # the same hallucination twice is one duplicate; here the two differ in citation only -> dedup by text
    assert reply.counts.rejected == {"invalid_citation": 1, "duplicate_in_reply": 1}
    reply = _check(unsupported)
    assert reply.counts.rejected == {"ungrounded": 1}


def test_empty_entities_are_filled_with_names_in_the_text():
    d = _draft("Caroline told Melanie about the Hope shelter.", [2], entities=[])
    reply = _check(d)
    ents = reply.output.records[0].entities
    assert "Caroline" in ents and "Melanie" in ents and reply.counts.repaired == {"entities_filled": 1}
    # a list that names someone but omits a known speaker gets the speaker added
    d = _draft("Caroline told Melanie about the dog.", [2], entities=["Caroline"])
    assert _check(d).output.records[0].entities == ["Caroline", "Melanie"]


@pytest.mark.parametrize("time,expected,repair", [
    (TimeDraft(start="1023-05-07", end="1023-05-07", expression="yesterday"), ("2023-05-07", "2023-05-07"), "time_corrected"),
    (TimeDraft(start="2023-09-01", end="2023-09-01", expression="yesterday"), ("2023-05-07", "2023-05-07"), "time_corrected"),
    (TimeDraft(start="2999-01-01", end="2999-01-01", expression=None), (None, None), "time_dropped"),
    (TimeDraft(start="2023-06-01", end="2023-06-30", expression="next month"), ("2023-06-01", "2023-06-30"), None),
])
def test_implausible_or_contradicting_times_are_corrected_or_dropped(time, expected, repair):
    d = _draft("Caroline went to the LGBTQ support group.", [0], time=time)
    out = _check(d)
    t = out.output.records[0].time
    assert (t.start, t.end) == expected and t.expression == time.expression
    assert out.counts.repaired == ({repair: 1} if repair else {})


def test_relative_words_in_the_text_become_the_absolute_date():
    d = _draft("Caroline went to the LGBTQ support group yesterday.", [0])
    out = _check(d)
    assert out.output.records[0].text == "Caroline went to the LGBTQ support group on 7 May 2023."
    assert out.counts.repaired == {"relative_time_rewritten": 1}


def test_reply_of_mostly_echoes_is_degenerate_and_counts_add_up():
    prev = ["Melanie found such a helpful group.", "Caroline likes painting sunsets at the lake."]
    reply = _check(*[_draft(t, [0]) for t in prev], CLEAN, prev=prev)
    assert reply.is_degenerate(0.5) and not reply.is_degenerate(0.7)
    c = reply.counts
    assert c.drafts == c.records + c.rejected_total == 3


def test_guard_disabled_keeps_only_the_structural_checks():
    dup = _draft("Caroline bought a yacht.", [9])
    reply = _check(dup, dup, _draft("  ", [0]), enabled="false")
    assert len(reply.output.records) == 1 and reply.counts.rejected == {"duplicate_in_reply": 1, "empty_text": 1}


def test_quality_counts_round_trip_flat_and_report():
    q = QualityCounts(drafts=5, records=3, segments_encoded=1, rejected={"echo": 2}, repaired={"entities_filled": 1})
    assert QualityCounts.from_flat(q.to_flat()) == q
    assert QualityCounts.from_flat(list(q.to_flat().items())) == q  # Arrow's map form
    assert QualityCounts.from_report(q.report()) == q
    with pytest.raises(ValueError):
        q.reject("because")


# ------------------------------------------------------------------------------------------------
# end to end through the openai encoder and the scripted test server
# ------------------------------------------------------------------------------------------------

_TURN = re.compile(r"^\[(\d+)\] (.+?) \((\w+)\): (.*)$")
_STORED_HEADERS = ("Already stored (for resolving", "Recent records:", "Already stored — do NOT")


def _context_records(body: dict[str, Any]) -> list[str]:
    """The record lines of the reference context shown in an encode prompt."""
    text = prompt_text(body)
    out: list[str] = []
    on = False
    for line in text.splitlines():
        if line.startswith(_STORED_HEADERS):
            on = True
            continue
        if on and line.startswith("- "):
            out.append(line[2:])
        elif on:
            on = False
    return out


def echo_reply(body: dict[str, Any]) -> dict[str, Any]:
    """A weak model: copies the reference context's records (cited to turn 0) instead of the turns."""
    prev = _context_records(body)
    if not prev:
        return encoder_reply(body)
    return {"records": [{"type": "fact", "text": t, "entities": [], "topics": [], "time": None, "source_turns": [0]}
                        for t in prev], "resolution_state": "copied"}


def hallucinating_reply(body: dict[str, Any]) -> dict[str, Any]:
    """Always invents facts no turn supports."""
    return {"records": [{"type": "fact", "text": f"The moon base number {i} orbits quietly near Jupiter's icy rings.",
                         "entities": [], "topics": [], "time": None, "source_turns": [0]} for i in range(3)],
            "resolution_state": ""}


@pytest.fixture(scope="module")
def guard_input(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("guard_in") / "in.jsonl"
    conv = synthetic_conversation(0, seed=5, sessions=1, topics_per_session=2, exchanges_per_topic=(2, 3))
    path.write_text(conv.model_dump_json() + "\n")
    return path


def _build(handler, src: Path, out: Path, *sets: str):
    with OpenAIServer(handler=handler) as srv:
        cfg = load_config(sets=[*llm_sets(srv.base_url), *sets], env={})
        summary = run_local_build(cfg, "jsonl", src, out, backend="openai", ctx=make_context(cfg, "openai", EMB))
        return summary, srv.chat_requests()


def _segments(out: Path) -> list[dict[str, Any]]:
    r = StoreReader(out)
    return r.load(r.conversation_ids()[0]).segments.to_pylist()


def test_echoing_model_is_repaired_once_per_segment_and_everything_is_counted(guard_input, tmp_path):
    summary, reqs = _build(echo_reply, guard_input, tmp_path / "s")
    segs = _segments(tmp_path / "s")
    assert len(segs) >= 2 and summary.failed_segments == 0
    q = summary.quality
    # every segment after the first echoed, was re-asked once without the record list, and came back clean
    assert q.segments_repaired == len(segs) - 1 and len(reqs) == 2 * len(segs) - 1
    assert q.rejected["echo"] >= len(segs) - 1 and q.drafts == q.records + q.rejected_total
    assert summary.records == q.records and q.rejected.get("replaced_by_repair", 0) == 0
    manifest = StoreReader(tmp_path / "s").manifest
    assert QualityCounts.from_report(manifest["quality"]) == q
    assert "segments repaired / degenerate" in summary.table() and verify_store(tmp_path / "s")["ok"]


def test_hallucinating_model_fails_segments_as_degenerate_and_keeps_turns(guard_input, tmp_path):
    summary, reqs = _build(hallucinating_reply, guard_input, tmp_path / "s")
    segs = _segments(tmp_path / "s")
    assert summary.failed_segments == len(segs) and summary.records == 0
    assert all(s["status"] == "failed" and s["error_kind"] == DEGENERATE_OUTPUT for s in segs)
    assert "degenerate output: 3 of 3" in segs[0]["error"]
    q = summary.quality
    assert q.segments_degenerate == len(segs) and q.rejected["ungrounded"] == 6 * len(segs)
    assert q.drafts == q.records + q.rejected_total and len(reqs) == 2 * len(segs)
    r = StoreReader(tmp_path / "s")
    assert r.load(r.conversation_ids()[0]).turns.num_rows > 0  # raw turns stay searchable
    assert verify_store(tmp_path / "s")["ok"]


def test_do_not_repeat_repair_mode_shows_the_rejected_copies(guard_input, tmp_path):
    _, reqs = _build(echo_reply, guard_input, tmp_path / "s", "encoder.guard.repair_mode=do_not_repeat")
    repair_prompts = [prompt_text(r.body) for r in reqs if "Already stored — do NOT" in prompt_text(r.body)]
    assert repair_prompts, "the repair call must list the rejected copies"


def test_rules_store_is_identical_with_and_without_the_checks(guard_input, tmp_path):
    """The rules backend's records are extractive: only the accounting runs on them, the store stays as it was."""
    stores = {}
    for on in ("true", "false"):
        cfg = load_config(sets=[f"encoder.guard.enabled={on}"], env={})
        out = tmp_path / on
        s = run_local_build(cfg, "jsonl", guard_input, out, backend="rules", ctx=make_context(cfg, "rules", EMB))
        assert s.quality.rejected_total == 0 and not s.quality.repaired
        r = StoreReader(out)
        d = r.load(r.conversation_ids()[0])
        stores[on] = (d.records, d.nodes)
    assert stores["true"][0].equals(stores["false"][0]) and stores["true"][1].equals(stores["false"][1])


def test_stats_command_prints_the_figures(guard_input, tmp_path, capsys):
    from lychee_ray.cli.main import main

    _build(echo_reply, guard_input, tmp_path / "s")
    assert main(["stats", "--memory", str(tmp_path / "s"), "--json"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["total"]["segments_repaired"] >= 1 and stats["total"]["rejected"]["echo"] >= 1
    assert main(["stats", "--memory", str(tmp_path / "s")]) == 0
    assert "rejected by reason: echo" in capsys.readouterr().out
    assert main(["stats", "--memory", str(tmp_path / "s"), "--conversation", "nope"]) == 2
