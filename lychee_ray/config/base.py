"""What every configuration section shares: strict keys, and defaults read from ``default.yaml``.

``default.yaml`` (the package's copy of ``configs/default.yaml``) is the ONLY place that holds
default values: the section classes declare types and bounds, and a section built without a key
takes that key's value from the YAML at the section's path. So there is nothing to keep equal.
"""

from __future__ import annotations

import copy
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from pydantic import BaseModel, ConfigDict, model_validator

if TYPE_CHECKING:
    from pydantic._internal._model_construction import ModelMetaclass

    class _SectionMeta(ModelMetaclass):
        """Seen by the type checker only (see :class:`Section`)."""
else:
    _SectionMeta = type(BaseModel)

# configs/default.yaml is shipped inside the package (a link to it in the repository, a copy in a wheel)
DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent / "default.yaml"


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


@lru_cache(maxsize=1)
def _defaults() -> dict[str, Any]:
    return read_yaml(DEFAULT_CONFIG_PATH)


def packaged_defaults() -> dict[str, Any]:
    """A fresh copy of every default (the parsed ``default.yaml``)."""
    return copy.deepcopy(_defaults())


def packaged_default(*path: str) -> Any:
    """One default by its path in ``default.yaml`` (None when absent); not a copy: do not change it."""
    node: Any = _defaults()
    for part in path:
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


# Section class -> its path in default.yaml; filled by the root config for classes used at one path.
# A class used at several paths (PressureConfig) gets its defaults from its parent section instead.
_DEFAULT_PATHS: dict[type, tuple[str, ...]] = {}


def _subtree(path: tuple[str, ...]) -> dict[str, Any]:
    node: Any = _defaults()
    for part in path:
        node = node.get(part, {}) if isinstance(node, dict) else {}
    return node if isinstance(node, dict) else {}


def _fill(cls: type[Section], data: dict[str, Any], defaults: dict[str, Any]) -> dict[str, Any]:
    """Missing keys of ``data`` taken from ``defaults``; nested sections filled the same way."""
    out = dict(data)
    for name, field in cls.model_fields.items():
        if name not in defaults:
            continue
        sub = field.annotation
        if name not in out:
            out[name] = copy.deepcopy(defaults[name])
        elif isinstance(sub, type) and issubclass(sub, Section) and isinstance(out[name], dict):
            out[name] = _fill(sub, out[name], defaults[name] if isinstance(defaults[name], dict) else {})
    return out


# Why the metaclass: a section's defaults live in default.yaml, so its fields carry no defaults in
# Python and a checker deriving ``__init__`` from the fields (pydantic's ``dataclass_transform`` on
# its metaclass) would call every key required: ``StoreConfig()`` is valid and fills them all. Only a
# metaclass directly marked ``dataclass_transform`` triggers that derivation, so the checker sees an
# unmarked subclass of pydantic's and the sections keep ``BaseModel.__init__(**data: Any)``; at
# runtime it is pydantic's own metaclass, unchanged. Field types are still checked on attribute use.
class Section(BaseModel, metaclass=_SectionMeta):
    """A configuration section: unknown keys are errors; missing keys come from ``default.yaml``."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    @model_validator(mode="before")
    @classmethod
    def _fill_defaults(cls, data: Any) -> Any:
        path = _DEFAULT_PATHS.get(cls)
        if path is None or not isinstance(data, dict):
            return data
        return _fill(cls, data, _subtree(path))


def bind_default_paths(root: type[Section]) -> None:
    """Record where in ``default.yaml`` each section class lives (classes used at one path only)."""
    seen: dict[type, list[tuple[str, ...]]] = {}

    def walk(cls: type[Section], path: tuple[str, ...]) -> None:
        seen.setdefault(cls, []).append(path)
        for name, field in cls.model_fields.items():
            sub = field.annotation
            if isinstance(sub, type) and issubclass(sub, Section):
                walk(sub, (*path, name))

    walk(root, ())
    for cls, paths in seen.items():
        if len(paths) == 1:
            _DEFAULT_PATHS[cls] = paths[0]
