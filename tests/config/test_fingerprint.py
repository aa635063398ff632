"""A store's fingerprint follows from each key's declared effect (lychee_ray/config/fingerprint.py)."""

from pydantic import Field, create_model

from lychee_ray.config import LycheeConfig, NodesConfig, Section, load_config
from lychee_ray.config.fingerprint import effect_part

# The store fingerprint of the defaults, taken before each key's default moved onto its field (and
# before the declared effects replaced the list of keys left out at their defaults). Stores built
# with the defaults carry it: it must not change unless a store key's default does (that rebuilds).
DEFAULT_STORE_FINGERPRINT = "e2aaf5fd4e90f1ea"


def test_default_store_fingerprint_is_pinned():
    cfg = LycheeConfig()
    assert cfg.store_fingerprint() == DEFAULT_STORE_FINGERPRINT
    assert cfg.fingerprint("segmenter", "encoder", "nodes", "tokenizer", "passages") == DEFAULT_STORE_FINGERPRINT


def _with_new_nodes_key(**field_args):
    """LycheeConfig as if a new store key ``nodes.new_key`` (default 3) had been added."""
    nodes = create_model("NodesWithNewKey", __base__=NodesConfig, new_key=(int, Field(default=3, **field_args)))
    return create_model("ConfigWithNewKey", __base__=LycheeConfig,
                        nodes=(nodes, Field(default_factory=nodes, json_schema_extra={"effect": "store"})))


def test_a_new_store_key_at_its_default_leaves_existing_fingerprints():
    cls = _with_new_nodes_key()
    assert effect_part(cls(), "store")["nodes"]["new_key"] == 3  # it is a store key ...
    assert cls().store_fingerprint() == DEFAULT_STORE_FINGERPRINT  # ... left out at its default
    changed = cls.model_validate({"nodes": {"new_key": 4}})
    assert changed.store_fingerprint() != DEFAULT_STORE_FINGERPRINT


def test_a_new_store_section_at_its_defaults_leaves_existing_fingerprints():
    extra = create_model("ExtraSection", __base__=Section, knob=(float, Field(default=0.5)))
    cls = create_model("ConfigWithSection", __base__=LycheeConfig,
                       extra=(extra, Field(default_factory=extra, json_schema_extra={"effect": "store"})))
    assert cls().store_fingerprint() == DEFAULT_STORE_FINGERPRINT
    assert cls.model_validate({"extra": {"knob": 0.7}}).store_fingerprint() != DEFAULT_STORE_FINGERPRINT


def test_a_runtime_key_never_enters_the_store_fingerprint():
    cls = _with_new_nodes_key(json_schema_extra={"effect": "runtime"})
    assert "new_key" not in effect_part(cls(), "store")["nodes"]
    assert cls.model_validate({"nodes": {"new_key": 4}}).store_fingerprint() == DEFAULT_STORE_FINGERPRINT
    for s in ("query.select.budget_tokens=500", "serve.port=9000", "embedding.batch_size=4", "llm.model=other"):
        assert load_config(sets=[s], env={}).store_fingerprint() == DEFAULT_STORE_FINGERPRINT, s


def test_changing_a_store_key_changes_the_store_fingerprint():
    for s in ("segmenter.threshold=0.4", "encoder.rules.min_words=3", "encoder.mode=summary", "passages.max_tokens=100",
              "encoder.currency.slot_min_similarity=0.65", "nodes.min_records_to_embed=3"):
        assert load_config(sets=[s], env={}).store_fingerprint() != DEFAULT_STORE_FINGERPRINT, s
