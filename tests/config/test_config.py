import os
from pathlib import Path

import pytest
import yaml

from lychee_ray.cli.main import main
from lychee_ray.config import (
    DEFAULT_CONFIG_PATH,
    ConfigError,
    LycheeConfig,
    Section,
    SegmenterConfig,
    load_config,
    packaged_defaults,
    parse_set,
)


def _sections(cls=LycheeConfig, path=()):
    yield path, cls
    for name, field in cls.model_fields.items():
        if isinstance(field.annotation, type) and issubclass(field.annotation, Section):
            yield from _sections(field.annotation, (*path, name))


def test_defaults_have_one_source():
    """Every key's default is on its field (a shared section's on the field that holds it); the
    shipped default.yaml is the generated one (tests/config/test_reference.py) and loads to the same."""
    repo_copy = Path(__file__).resolve().parents[2] / "configs" / "default.yaml"
    assert DEFAULT_CONFIG_PATH.read_bytes() == repo_copy.read_bytes()
    defaults = packaged_defaults()
    for path, cls in _sections():
        node = defaults
        for part in path:
            node = node[part]
        assert set(node) == set(cls.model_fields), f"keys at {'.'.join(path)}"
        shared = any(f.is_required() for f in cls.model_fields.values())
        for name, field in cls.model_fields.items():
            assert shared or not field.is_required(), f"{'.'.join((*path, name))} has no default"
    assert yaml.safe_load(repo_copy.read_text()) == defaults
    assert load_config(env={}) == LycheeConfig()
    assert LycheeConfig().segmenter.threshold == defaults["segmenter"]["threshold"]
    assert SegmenterConfig(threshold=0.3).count_pressure.start == defaults["segmenter"]["count_pressure"]["start"]
    # a partial mapping for a shared section is completed from the default of the field holding it
    partial = SegmenterConfig.model_validate({"count_pressure": {"scale": 4}}).count_pressure
    assert (partial.start, partial.scale, partial.max) == (defaults["segmenter"]["count_pressure"]["start"], 4,
                                                          defaults["segmenter"]["count_pressure"]["max"])
    assert load_config(sets=["ray.stages.build.concurrency=2"], env={}).ray.stages.build.batch_size == \
        defaults["ray"]["stages"]["build"]["batch_size"]


def test_overrides_and_precedence(tmp_path: Path):
    f = tmp_path / "c.yaml"
    f.write_text("llm:\n  model: from-file\n  temperature: 0.3\n")
    cfg = load_config([f], ["llm.model=from-set", "embedding.batch_size=8"], env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert cfg.llm.model == "from-set" and cfg.llm.temperature == 0.3
    assert cfg.embedding.batch_size == 8
    assert cfg.llm.base_url == "http://127.0.0.1:9/v1"
    cfg2 = load_config(env={"LYCHEE_LLM_BASE_URL": "http://a/v1", "OPENAI_BASE_URL": "http://b/v1", "OPENAI_API_KEY": "sk-x"})
    assert cfg2.llm.base_url == "http://a/v1" and cfg2.llm.api_key == "sk-x"
    assert "sk-x" not in str(cfg2.redacted())


def test_unknown_keys_and_bad_values_are_errors(tmp_path: Path):
    with pytest.raises(ConfigError, match="llm.modle"):
        load_config(sets=["llm.modle=x"], env={})
    with pytest.raises(ConfigError, match="embedding.batch_size"):
        load_config(sets=["embedding.batch_size=0"], env={})
    bad = tmp_path / "bad.yaml"
    bad.write_text("llm: [1, 2\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config([bad], env={})
    with pytest.raises(ConfigError, match="not found"):
        load_config([tmp_path / "nope.yaml"], env={})
    with pytest.raises(ConfigError):
        parse_set("novalue")


def test_fingerprint_ignores_secrets():
    a = load_config(env={"OPENAI_API_KEY": "one"})
    b = load_config(env={"OPENAI_API_KEY": "two"})
    assert a.fingerprint() == b.fingerprint()
    assert a.fingerprint() != load_config(sets=["llm.model=other"], env={}).fingerprint()


def test_config_show_cli(capsys):
    assert main(["config", "show", "--set", "llm.model=m1"]) == 0
    out = capsys.readouterr().out
    assert "model: m1" in out and "fingerprint" in out
    assert main(["config", "show", "--set", "nope.x=1"]) == 2


def test_serve_ray_env_values_are_strings_and_set_env_only_when_unset(monkeypatch):
    """serve.ray_env reaches a local Ray as environment strings ("1"/"0" for booleans, as Serve reads
    them); a variable the user already exported wins over the config."""
    from lychee_ray.ray.serve import apply_ray_env

    cfg = load_config(sets=["serve.ray_env.RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP=true", "serve.ray_env.LYCHEE_TEST_N=3"])
    # apply_ray_env writes os.environ itself: give it a copy, so nothing it sets leaks into later tests
    # (monkeypatch.delenv of an unset variable records nothing to undo)
    monkeypatch.setattr(os, "environ", os.environ.copy())
    assert cfg.serve.ray_env == {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0",
                                 "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "1", "LYCHEE_TEST_N": "3"}
    monkeypatch.setenv("RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD", "1")
    monkeypatch.delenv("RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP", raising=False)
    monkeypatch.delenv("LYCHEE_TEST_N", raising=False)
    applied = apply_ray_env(cfg)
    assert applied == {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "1",
                       "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "1", "LYCHEE_TEST_N": "3"}
    monkeypatch.delenv("RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP")
    monkeypatch.delenv("LYCHEE_TEST_N")


def test_flat_encoder_rules_keys_still_load_with_one_warning(tmp_path: Path):
    """encoder.rules_* (before encoder.rules existed) are read for one release: mapped, with one warning."""
    old = tmp_path / "old.yaml"
    old.write_text("encoder:\n  rules_min_words: 3\n  rules_we_mode: keep\n  rules_pair_answers: false\n")
    new = tmp_path / "new.yaml"
    new.write_text("encoder:\n  rules:\n    min_words: 3\n    we_mode: keep\n    pair_answers: false\n")
    with pytest.warns(FutureWarning) as caught:
        a = load_config([old], env={})
    assert len(caught) == 1
    msg = str(caught[0].message)
    assert "encoder.rules_min_words -> encoder.rules.min_words" in msg and "encoder.rules_we_mode -> encoder.rules.we_mode" in msg
    b = load_config([new], env={})
    assert a == b and a.encoder.rules.min_words == 3 and a.encoder.rules.we_mode == "keep"
    assert a.encoder.rules.max_topics == packaged_defaults()["encoder"]["rules"]["max_topics"]
    with pytest.warns(FutureWarning):
        assert load_config(sets=["encoder.rules_max_topics=2"], env={}).encoder.rules.max_topics == 2
    # the section hashes as the flat keys it replaced: stores built before it keep their fingerprint
    fp = a.fingerprint("encoder")
    assert fp == b.fingerprint("encoder") != LycheeConfig().fingerprint("encoder")
    dumped = a.model_dump(mode="json")["encoder"]
    assert "rules_min_words" not in dumped and dumped["rules"]["min_words"] == 3


OLD_APPEND_KEYS = """\
build:
  append_create: false
  append_lock_timeout_s: 7.5
  append_lock_poll_s: 0.05
  append_cache_conversations: 9
  catch_up_attempts: 5
serve:
  append_idle_flush_s: 12.0
  append_retry_after_s: 3
  append_encode: inline
  append_queue_max: 11
  append_queue_retry_s: 2.5
  append_queue_nice: 4
store:
  delta_max_count: 13
  delta_fold_ratio: 0.25
  delta_fold_min_rows: 77
query:
  view_rebuild: inline
  view_rebuild_background_min_rows: 123
  view_rebuild_max_pause_ms: 9.0
"""

NEW_APPEND_KEYS = dict(create=False, lock_timeout_s=7.5, lock_poll_s=0.05, cache_conversations=9, catch_up_attempts=5,
                       idle_flush_s=12.0, retry_after_s=3, encode="inline", queue_max=11, queue_retry_s=2.5, queue_nice=4,
                       delta_max_count=13, delta_fold_ratio=0.25, delta_fold_min_rows=77, view_rebuild="inline",
                       view_rebuild_background_min_rows=123, view_rebuild_max_pause_ms=9.0)


def test_old_append_keys_load_into_the_appends_section_with_one_warning_each(tmp_path: Path):
    """The 17 append keys of build/serve/store/query moved to ``appends``; a config naming them at
    their old places loads with the same values and one warning per key naming old -> new."""
    from lychee_ray.config import RenamedConfigKey
    from lychee_ray.config.appends import LEGACY_KEYS

    assert len(LEGACY_KEYS) == 17
    f = tmp_path / "old.yaml"
    f.write_text(OLD_APPEND_KEYS)
    with pytest.warns(RenamedConfigKey) as caught:
        cfg = load_config([f], env={})
    assert cfg.appends.model_dump() == NEW_APPEND_KEYS
    messages = sorted(str(w.message) for w in caught)
    assert len(messages) == 17
    assert any("build.append_create is now appends.create" in m for m in messages)
    new = tmp_path / "new.yaml"
    new.write_text("appends:\n" + "".join(f"  {k}: {str(v).lower() if isinstance(v, bool) else v}\n"
                                          for k, v in NEW_APPEND_KEYS.items()))
    assert load_config([new], env={}).appends == cfg.appends
    # --set with an old key, and a whole mapping validated directly, map the same way
    with pytest.warns(RenamedConfigKey, match=r"serve\.append_encode is now appends\.encode"):
        assert load_config(env={}, sets=["serve.append_encode=inline"]).appends.encode == "inline"
    with pytest.warns(RenamedConfigKey):
        data = packaged_defaults()
        data["store"]["delta_max_count"] = 5
        assert LycheeConfig.model_validate(data).appends.delta_max_count == 5
    # a later layer wins whichever spelling each layer uses
    later = tmp_path / "later.yaml"
    later.write_text("appends:\n  queue_max: 99\n")
    with pytest.warns(RenamedConfigKey):
        assert load_config([f, later], env={}).appends.queue_max == 99
