"""The effective configuration: defaults, files, ``--set`` overrides and the environment."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from lychee_ray.config.appends import move_legacy_keys
from lychee_ray.config.base import ConfigError, deep_merge, read_yaml
from lychee_ray.config.root import LycheeConfig, packaged_defaults


def parse_set(item: str) -> dict[str, Any]:
    """Turn ``a.b.c=value`` into ``{"a": {"b": {"c": value}}}``; the value is read as YAML."""
    if "=" not in item:
        raise ConfigError(f"--set expects key=value, got {item!r}")
    key, raw = item.split("=", 1)
    parts = [p for p in key.strip().split(".") if p]
    if not parts:
        raise ConfigError(f"--set has an empty key: {item!r}")
    try:
        value = yaml.safe_load(raw) if raw.strip() else ""
    except yaml.YAMLError:
        value = raw
    out: dict[str, Any] = {parts[-1]: value}
    for p in reversed(parts[:-1]):
        out = {p: out}
    return out

def _env_overrides(env: dict[str, str]) -> dict[str, Any]:
    llm: dict[str, Any] = {}
    base = env.get("LYCHEE_LLM_BASE_URL") or env.get("OPENAI_BASE_URL")
    if base:
        llm["base_url"] = base
    if env.get("OPENAI_API_KEY"):
        llm["api_key"] = env["OPENAI_API_KEY"]
    if env.get("LYCHEE_LLM_MODEL"):
        llm["model"] = env["LYCHEE_LLM_MODEL"]
    out: dict[str, Any] = {"llm": llm} if llm else {}
    if env.get("LYCHEE_SERVE_TOKEN"):
        out["serve"] = {"token": env["LYCHEE_SERVE_TOKEN"]}
    return out


def _env_keys(env: dict[str, str]) -> list[dict[str, Any]]:
    """``LYCHEE_SERVE_KEYS``: a JSON list of ``{name, key, users, user_prefixes, admin}``; each
    plaintext ``key`` is replaced by its SHA-256 here, so no key is kept in the configuration."""
    raw = env.get("LYCHEE_SERVE_KEYS")
    if not raw:
        return []
    try:
        items = json.loads(raw)
    except json.JSONDecodeError as e:
        raise ConfigError(f"LYCHEE_SERVE_KEYS is not JSON: {e.msg} at character {e.pos}") from None
    if not isinstance(items, list) or not all(isinstance(i, dict) for i in items):
        raise ConfigError("LYCHEE_SERVE_KEYS must be a JSON list of objects {name, key, users, user_prefixes, admin}")
    out = []
    for i, item in enumerate(items):
        item = dict(item)
        key = item.pop("key", None)
        if key is not None:
            if not isinstance(key, str) or not key:
                raise ConfigError(f"LYCHEE_SERVE_KEYS[{i}].key must be a non-empty string")
            item["sha256"] = hashlib.sha256(key.encode("utf-8")).hexdigest()
        out.append(item)
    return out

def load_config(
    files: list[str | Path] | None = None,
    sets: list[str] | None = None,
    env: dict[str, str] | None = None,
) -> LycheeConfig:
    """Build the effective config: defaults (the fields') < each file < each ``--set`` < env
    (``LYCHEE_SERVE_KEYS`` adds API keys to ``serve.keys``).

    Raises :class:`ConfigError` with the offending key on error.
    """
    data: dict[str, Any] = packaged_defaults()
    # each layer's keys at their old places move to ``appends`` before it is merged, so a later
    # layer wins whichever spelling each uses
    for f in files or []:
        data = deep_merge(data, move_legacy_keys(read_yaml(Path(f))))
    for s in sets or []:
        data = deep_merge(data, move_legacy_keys(parse_set(s)))
    environ = dict(os.environ) if env is None else env
    data = deep_merge(data, _env_overrides(environ))
    extra_keys = _env_keys(environ)  # added to the configured keys (a merge would replace the list)
    if extra_keys:
        serve = dict(data.get("serve") or {})
        serve["keys"] = [*(serve.get("keys") or []), *extra_keys]
        data["serve"] = serve
    try:
        return LycheeConfig.model_validate(data)
    except ValidationError as e:
        msgs = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err["loc"])
            msgs.append(f"{loc}: {err['msg']}")
        raise ConfigError("invalid configuration:\n  " + "\n  ".join(msgs)) from None

def ray_address(env: dict[str, str] | None = None) -> str | None:
    """The Ray cluster address from ``RAY_ADDRESS`` (None = start local Ray)."""
    return (dict(os.environ) if env is None else env).get("RAY_ADDRESS") or None
