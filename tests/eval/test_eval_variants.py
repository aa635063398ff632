"""Ablation fairness: query rules that only make sense for some builds are reported both ways."""

from __future__ import annotations

from lychee_ray.config import LycheeConfig
from lychee_ray.eval.setup.variants import (
    VARIANTS,
    build_config,
    build_key,
    query_config,
    select_variants,
    with_rule_twins,
)


def test_rule_twins_report_query_rules_both_ways():
    rule = "query.select.window_within_segment=false"
    plain = select_variants(["lychee", "turn_rag"])
    assert with_rule_twins(plain, [rule]) == plain  # no ablation build selected: nothing added
    ablation = with_rule_twins(select_variants(["lychee", "eager", "fixed_window", "turn_rag"]), [rule])
    names = [v.name for v in ablation]
    assert names == ["lychee", "lychee+window_within_segment=false", "eager", "eager+window_within_segment=false",
                     "fixed_window", "fixed_window+window_within_segment=false", "turn_rag"]
    twin = ablation[3]
    cfg = LycheeConfig()
    assert twin.base_name == "eager" and twin.build_sets == VARIANTS["eager"].build_sets
    assert query_config(twin, cfg).query.select.window_within_segment is False
    assert build_config(ablation[5], cfg, fixed_window=3).segmenter.fixed_window == 3  # twin keeps its build
    assert build_key(twin.build_label, build_config(twin, cfg), "rules") == \
        build_key("eager", build_config(VARIANTS["eager"], cfg), "rules")  # and so its store
