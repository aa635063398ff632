"""``configs/default.yaml`` and the key reference of docs/configuration.md, generated from the fields.

Each configuration key is defined once, on its section's field (:mod:`lychee_ray.config.base`); this
module writes what users read from those fields. ``python -m lychee_ray.config.reference --write``
regenerates both files; a test fails, naming that command, when either differs from the fields.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from lychee_ray.config.base import Effect, declared_effect, section_type
from lychee_ray.config.root import LycheeConfig, packaged_defaults

REGENERATE = "python -m lychee_ray.config.reference --write"
REPO = Path(__file__).resolve().parents[2]
YAML_PATH = REPO / "configs" / "default.yaml"
DOC_PATH = REPO / "docs" / "configuration.md"
DOC_BEGIN = "<!-- generated: the key reference (python -m lychee_ray.config.reference --write) -->"
DOC_END = "<!-- end of the generated key reference -->"
COMMENT_COLUMN = 30

HEADER = """\
# lychee_ray default configuration: every key, its default and what it does. GENERATED from the
# fields of lychee_ray/config/*.py, where each key is defined once (do not edit: change the field and
# run `python -m lychee_ray.config.reference --write`); shipped inside the package as
# lychee_ray/config/default.yaml. Copy what you change into your own file: `--config FILE` (merged
# on top) and `--set section.key=value`.
# Secrets/endpoints come from the environment: OPENAI_API_KEY, OPENAI_BASE_URL or LYCHEE_LLM_BASE_URL,
# LYCHEE_LLM_MODEL, RAY_ADDRESS, LYCHEE_SERVE_TOKEN. Unknown keys are errors.
"""


def flow(value: Any) -> str:
    """One YAML value on one line."""
    text = yaml.safe_dump(value, default_flow_style=True, width=1 << 20, allow_unicode=True, sort_keys=False)
    return text.removesuffix("\n").removesuffix("\n...").strip()


def _line(indent: int, head: str, doc: str | None) -> str:
    text = " " * indent + head
    return f"{text.ljust(COMMENT_COLUMN - 1)} # {doc}" if doc else text


def _yaml_lines(cls: type[BaseModel], data: dict[str, Any], indent: int, seen: set[type]) -> list[str]:
    out: list[str] = []
    quiet = cls in seen  # a shared section's keys are described where it first appears
    seen.add(cls)
    for name, field in cls.model_fields.items():
        doc = None if quiet else field.description
        value = data[name]
        sub = section_type(field)
        if sub is not None:
            out.append(_line(indent, f"{name}:", doc))
            out.extend(_yaml_lines(sub, value, indent + 2, seen))
        elif isinstance(value, dict) and value:
            out.append(_line(indent, f"{name}:", doc))
            out.extend(" " * (indent + 2) + f"{flow(k)}: {flow(v)}" for k, v in value.items())
        else:
            out.append(_line(indent, f"{name}: {flow(value)}", doc))
    return out


def default_yaml() -> str:
    """The text of ``configs/default.yaml``: every key with its default and description."""
    data = packaged_defaults()
    lines = [HEADER.rstrip("\n")]
    seen: set[type] = set()
    for name, field in LycheeConfig.model_fields.items():
        sub = section_type(field)
        assert sub is not None
        lines += ["", _line(0, f"{name}:", field.description), *_yaml_lines(sub, data[name], 2, seen)]
    return "\n".join(lines) + "\n"


def _rows(cls: type[BaseModel], data: dict[str, Any], path: str, effect: Effect | None) -> list[tuple[str, Any, Effect | None, str]]:
    rows = []
    for name, field in cls.model_fields.items():
        own = declared_effect(field, effect)
        sub = section_type(field)
        key = f"{path}{name}"
        if sub is not None:
            rows.extend(_rows(sub, data[name], f"{key}.", own))
        else:
            rows.append((key, data[name], own, field.description or ""))
    return rows


def reference_markdown() -> str:
    """The key reference table of docs/configuration.md (between its generated markers)."""
    lines = [DOC_BEGIN, "", "| key | default | effect | what it does |", "|---|---|---|---|"]
    for key, value, effect, doc in _rows(LycheeConfig, packaged_defaults(), "", None):
        cell = flow(value).replace("|", "\\|")
        lines.append(f"| `{key}` | `{cell}` | {effect or ''} | {doc.replace('|', chr(92) + '|')} |")
    return "\n".join([*lines, "", DOC_END])


def with_reference(doc: str) -> str:
    """``doc`` (docs/configuration.md) with its generated part replaced by the current reference."""
    head, sep, rest = doc.partition(DOC_BEGIN)
    _, sep2, tail = rest.partition(DOC_END)
    if not sep or not sep2:
        raise ValueError(f"{DOC_PATH.name} lacks the generated-part markers")
    return head + reference_markdown() + tail


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--write", action="store_true", help="write configs/default.yaml and docs/configuration.md's reference")
    args = p.parse_args(argv)
    if not args.write:
        print(default_yaml(), end="")
        return 0
    YAML_PATH.write_text(default_yaml(), encoding="utf-8")
    DOC_PATH.write_text(with_reference(DOC_PATH.read_text(encoding="utf-8")), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
