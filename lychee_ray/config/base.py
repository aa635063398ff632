"""What every configuration section shares: strict keys, and each key defined once, on its field.

A section's field holds everything about its key: the type and bounds, the default and a one-line
``description``. ``configs/default.yaml`` (shipped in the package as ``default.yaml``) and the key
reference in docs/configuration.md are generated from the fields (:mod:`lychee_ray.config.reference`),
so there is nothing to keep equal by hand.

Each key also has a declared *effect* (:data:`Effect`): ``store`` keys change what a build writes and
make up a store's fingerprint; ``runtime`` keys change only how the code runs. A field declares it
with ``json_schema_extra={"effect": ...}``; one that does not inherits the effect of the section
field above it (the root sections each declare theirs).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, model_validator
from pydantic.fields import FieldInfo

# The generated defaults, shipped inside the package for users to read and copy (a link to
# configs/default.yaml in the repository, a copy in a wheel); the code never reads it.
DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent / "default.yaml"

Effect = Literal["store", "runtime"]
EFFECTS: tuple[Effect, ...] = ("store", "runtime")


class ConfigError(ValueError):
    """A configuration file, override or value is invalid."""


def deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    """``over`` merged into ``base``, recursively for nested mappings (neither is modified)."""
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = deep_merge(out[k], v)
        else:
            out[k] = v
    return out


def read_yaml(path: Path) -> dict[str, Any]:
    """A YAML mapping from ``path``; :class:`ConfigError` when missing, invalid or not a mapping."""
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except FileNotFoundError as e:
        raise ConfigError(f"config file not found: {path}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: invalid YAML: {e}") from e
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: top level must be a mapping")
    return data


def section_type(field: FieldInfo) -> type[Section] | None:
    """The section class a field holds (None for a plain key)."""
    sub = field.annotation
    return sub if isinstance(sub, type) and issubclass(sub, Section) else None


def declared_effect(field: FieldInfo, inherited: Effect | None) -> Effect | None:
    """The effect a field declares, else the one it inherits from the section field above it."""
    extra = field.json_schema_extra
    effect = extra.get("effect") if isinstance(extra, dict) else None
    if effect is None:
        return inherited
    if effect not in EFFECTS:
        raise ValueError(f"unknown config key effect {effect!r}; one of {EFFECTS}")
    return effect


def _shared(cls: type[Section]) -> bool:
    """A class used at several places (a build stage, a pressure ramp): its defaults are on the fields using it."""
    return any(f.is_required() for f in cls.model_fields.values())


class Section(BaseModel):
    """A configuration section: unknown keys are errors; a missing key takes its field's default."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True, validate_default=True)

    @model_validator(mode="before")
    @classmethod
    def _complete_shared(cls, data: Any) -> Any:
        """A partial mapping for a shared section (one without defaults of its own) is completed from
        the default of the field that holds it, as any other section is from its own defaults."""
        if not isinstance(data, dict):
            return data
        out: dict[str, Any] | None = None
        for name, field in cls.model_fields.items():
            sub = section_type(field)
            given = data.get(name)
            if sub is None or not isinstance(given, dict) or field.default_factory is None or not _shared(sub):
                continue
            default = field.get_default(call_default_factory=True)
            out = dict(data) if out is None else out
            out[name] = deep_merge(default.model_dump(), given)
        return data if out is None else out
