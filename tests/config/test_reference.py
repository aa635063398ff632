"""configs/default.yaml, the docs' key reference and `config show --defaults` come from the fields."""

import yaml

from lychee_ray.cli.main import main
from lychee_ray.config import packaged_defaults
from lychee_ray.config.reference import DOC_PATH, REGENERATE, YAML_PATH, default_yaml, with_reference


def test_shipped_default_yaml_is_generated_from_the_fields():
    assert YAML_PATH.read_text(encoding="utf-8") == default_yaml(), f"configs/default.yaml is stale: run `{REGENERATE}`"
    assert yaml.safe_load(default_yaml()) == packaged_defaults()


def test_docs_key_reference_is_generated_from_the_fields():
    doc = DOC_PATH.read_text(encoding="utf-8")
    assert doc == with_reference(doc), f"docs/configuration.md's key reference is stale: run `{REGENERATE}`"
    assert "| `store.io_threads` | `16` | runtime |" in doc and "| `segmenter.threshold` | `0.5` | store |" in doc


def test_every_key_has_a_comment_where_it_is_first_shown():
    text = default_yaml()
    assert "  io_threads: 16" in text and "# commit markers of a remote store read in parallel" in text
    # a shared section's keys are described once (ray.stages.read), not under every stage
    assert text.count("# logical CPUs per task/actor") == 1


def test_config_show_defaults_prints_the_generated_yaml(capsys):
    assert main(["config", "show", "--defaults"]) == 0
    assert capsys.readouterr().out == default_yaml()
