from lychee_ray.config import NodesConfig
from lychee_ray.ingest.nodes import build_nodes, time_keys
from lychee_ray.core.keys import normalise_key
from lychee_ray.core.records import MemoryRecord, TimeSpan


def rec(i, text, ents=(), tops=(), turns=("D1:1",), seg="c#s00000", start=None, end=None, gran=None, cid="c"):
    return MemoryRecord(
        record_id=f"r{i}", conversation_id=cid, user_id="u", session_id="s1", segment_id=seg, ordinal=i, type="fact",
        text=text, entities=list(ents), topics=list(tops), time=TimeSpan(start=start, end=end, granularity=gran),
        source_turn_ids=list(turns), backend="rules", model="rules-v1",
    )


def test_normalise_key():
    assert normalise_key("Caroline's  Dog!") == "caroline dog"
    assert normalise_key("  LGBTQ+ support-group ") == "lgbtq support group"
    assert normalise_key("James’s") == "james"


def test_time_keys():
    r = rec(0, "x", start="2023-05-07", end="2023-05-07", gran="day")
    assert time_keys(r, 7) == [("day:2023-05-07", "7 May 2023"), ("month:2023-05", "May 2023")]
    r = rec(0, "x", start="2023-05-30", end="2023-06-02", gran="range")
    keys = [k for k, _ in time_keys(r, 7)]
    assert keys == ["day:2023-05-30", "day:2023-05-31", "day:2023-06-01", "day:2023-06-02", "month:2023-05", "month:2023-06"]
    r = rec(0, "x", start="2023-05-01", end="2023-05-31", gran="month")
    assert [k for k, _ in time_keys(r, 7)] == ["month:2023-05"]
    r = rec(0, "x", start="2022-01-01", end="2022-12-31", gran="year")
    assert [k for k, _ in time_keys(r, 7)] == ["year:2022"]
    assert time_keys(rec(0, "x"), 7) == []


def test_build_nodes_kinds_keys_caps_and_frames():
    records = [
        rec(0, "Caroline went to the LGBTQ support group on 7 May 2023.", ["Caroline"], ["support group"], ["D1:3"], start="2023-05-07", end="2023-05-07", gran="day"),
        rec(1, "Caroline's group was inspiring.", ["caroline"], ["Support Group"], ["D1:4"]),
        rec(2, "Melanie paints sunrises.", ["Melanie"], ["painting"], ["D1:12"]),
    ]
    order = [f"D1:{i}" for i in range(1, 20)]
    nodes = build_nodes(records, order, NodesConfig(max_records_per_node=1))
    by = {(n.kind, n.key): n for n in nodes}
    assert by[("entity", "caroline")].record_ids == ["r0"]  # capped at 1
    assert by[("entity", "caroline")].text in {"Caroline", "caroline"}
    assert ("topic", "support group") in by and ("entity_topic", "caroline|support group") in by
    assert ("time", "day:2023-05-07") in by and ("time", "month:2023-05") in by
    frames = [n for n in nodes if n.kind == "event_frame"]
    # r0 and r1 are adjacent turns; r2 is 8 turns away → one frame of two records, capped like any node
    assert len(frames) == 1 and frames[0].record_ids == ["r0"]
    full = build_nodes(records, order, NodesConfig())
    frame = next(n for n in full if n.kind == "event_frame")
    assert frame.record_ids == ["r0", "r1"]
    ids = {r.record_id for r in records}
    assert all(set(n.record_ids) <= ids for n in full)
    assert len({n.node_id for n in full}) == len(full)
    assert full == build_nodes(records, order, NodesConfig())  # deterministic
    assert build_nodes([], order, NodesConfig()) == []
