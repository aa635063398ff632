"""What keeps a build's cost linear and near one embedding pass: entities that name things, statement
links matched through an index, the embedding ways measured on the machine, one memo for one model."""

from __future__ import annotations



from lychee_ray.config import LycheeConfig, NodesConfig
from lychee_ray.core.quality import QualityCounts
from lychee_ray.core.records import MemoryRecord
from lychee_ray.ingest.encode.rules.artifacts import ArtifactLimits, table_record
from lychee_ray.ingest.encode.rules.blocks import Block
from lychee_ray.ingest.encode.rules.metadata import extract_entities
from lychee_ray.ingest.nodes import build_nodes, is_entity_name
from lychee_ray.ingest.text_links import StatementIndex

CFG = LycheeConfig()


def _rec(i: int, text: str, ents: list[str], tops: list[str], turn: str | None = None) -> MemoryRecord:
    return MemoryRecord(record_id=f"r{i}", conversation_id="c", user_id="u", session_id="s", segment_id="c#s1",
                        ordinal=i, type="fact", text=text, entities=ents, topics=tops,
                        source_turn_ids=[turn or f"t{i}"], created_at="2024-05-01", backend="rules", model="rules-v1")


def test_numbers_list_markers_and_time_ranges_are_no_entity_names():
    for junk in ("1", "2", "10", "1.", "(b)", "iv)", "10:00 AM - 10:10 AM", "9am", "5:30 p.m.", "2024-01-05",
                 "30 min", "Dec 2023", "Step 3", "•", "- [ ]", "#1"):
        assert not is_entity_name(junk), junk
    for name in ("Marisol", "Node.js", "MongoDB", "AI", "React 18", "GPT-4", "C++", "Tom & Jerry", "Sam", "Amsterdam"):
        assert is_entity_name(name), name
    # codes name one thing: an order or a booking is what a later agent asks for
    for code in ("W777", "K9Z2QX", "order W777", "B2B"):
        assert is_entity_name(code), code


def test_nodes_skip_entities_that_name_nothing():
    records = [
        _rec(0, "Row 1 of the schedule: stand-up from 10:00 AM to 10:10 AM with Redis checks.",
             ["1", "10:00 AM - 10:10 AM", "Redis"], ["schedule"]),
        _rec(1, "Row 2 of the schedule: Redis cache warm-up.", ["2", "Redis"], ["schedule"]),
    ]
    nodes = build_nodes(records, ["t0", "t1"], NodesConfig())
    keys = {(n.kind, n.key) for n in nodes if n.kind in ("entity", "entity_topic")}
    assert keys == {("entity", "redis"), ("entity_topic", "redis|schedule")}


def test_a_tables_row_numbers_and_time_slots_are_not_its_entities():
    table = ("| # | Slot | Task |\n|---|---|---|\n| 1 | 10:00 AM - 10:10 AM | Stand-up |\n"
             "| 2 | 10:10 AM - 11:00 AM | Code review |")
    draft = table_record(Block("table", table), "The assistant", "", "the sprint plan", 3, ArtifactLimits(600, 12, 6, 8))
    assert draft.entities == []
    named = "| Service | Port |\n|---|---|\n| Redis | 6379 |\n| MongoDB | 27017 |"
    assert table_record(Block("table", named), "The user", "", "", 3, ArtifactLimits(600, 12, 6, 8)).entities == \
        ["Service", "Redis", "MongoDB"]
    assert extract_entities("We met at 10 AM. Then AM rolled around with Caroline.", {}, set(), 8) == ["Caroline"]


def test_a_denial_is_matched_through_the_words_it_denies():
    """Linking stays linear: a denial embeds and compares the few statements sharing its words, not
    every statement of the conversation."""
    import asyncio

    import numpy as np

    idx = StatementIndex(CFG.encoder.currency)
    for i in range(50):
        idx.add(_rec(i, f"I walked the dog number {i} around the park.", [], []), "user")
    idx.add(_rec(60, "I've submitted my grant proposal to Ines for review.", [], []), "user")
    embedded: list[str] = []

    async def embed(texts):
        embedded.extend(texts)
        return np.ones((len(texts), 4), dtype=np.float32)  # all alike: the words decide the candidates

    denial = _rec(61, "I've never submitted my grant proposal to Ines.", [], [])
    asyncio.run(idx.prepare([(denial, "user")], embed))
    idx.link(denial, "user", QualityCounts())
    assert denial.conflicts_with == ["r60"] and len(embedded) == 2  # the denied phrase and the one candidate

def test_stats_show_nodes_per_record(monkeypatch):
    from types import SimpleNamespace

    import lychee_ray.cli.stats as stats

    markers = [SimpleNamespace(conversation_id=c, quality={}, counts=SimpleNamespace(nodes=n, records=r))
               for c, n, r in (("a", 30, 10), ("b", 10, 10))]
    monkeypatch.setattr(stats, "open_layout", lambda memory: SimpleNamespace(iter_markers=lambda: iter(markers)))
    out = stats.store_quality("S")
    assert out["conversations"]["a"]["nodes_per_record"] == 3.0 and out["total"]["nodes"] == 40
    assert out["total"]["nodes_per_record"] == 2.0
