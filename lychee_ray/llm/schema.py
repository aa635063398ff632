"""Structured output: the JSON schema a reply model is sent as, the instruction for servers that
cannot enforce a schema, and turning a reply's content into a validated model.

Pure functions of the reply model and the text; the transport (:mod:`lychee_ray.llm.client`)
decides when each is used.
"""

from __future__ import annotations

import json
import logging
import re
from functools import lru_cache
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from lychee_ray.llm.errors import MAX_ERROR_TEXT, AttemptError
from lychee_ray.llm.strict_schema import strict_json_schema

log = logging.getLogger(__name__)

T = TypeVar("T", bound=BaseModel)

# OpenAI's rule for response_format names: ^[a-zA-Z0-9_-]{1,64}$
_NAME_MAX = 64
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S | re.I)


@lru_cache(maxsize=256)
def schema_for(model: type[BaseModel]) -> tuple[dict[str, Any], bool]:
    """JSON schema for ``model`` and whether it is strict-mode compatible.

    The strict form is the ``openai`` library's (:mod:`~lychee_ray.llm.strict_schema`: all properties
    required, ``additionalProperties: false``); falls back to the plain pydantic schema, non-strict.
    """
    try:
        return strict_json_schema(model), True
    except Exception as e:  # noqa: BLE001 — any converter failure just means "not strict"
        log.debug("schema for %s is not strict-compatible (%s); sending strict=false", model.__name__, e)
        return model.model_json_schema(), False


def lean_json_schema(schema: dict[str, Any]) -> None:
    """``json_schema_extra`` hook for reply models sent on every query: drops the titles and the
    model's own docstring from its JSON schema. Providers bill the schema as prompt tokens, titles
    repeat the field names, and a docstring is written for developers, not for the model; field
    descriptions (the model's guidance) stay."""
    schema.pop("title", None)
    schema.pop("description", None)
    for prop in (schema.get("properties") or {}).values():
        prop.pop("title", None)


def schema_instruction(model: type[BaseModel]) -> str:
    """Text appended to the system prompt when the server cannot enforce the schema itself."""
    schema = json.dumps(model.model_json_schema(), separators=(",", ":"), ensure_ascii=False)
    return (
        "Reply with one JSON object only (no prose, no code fences) that validates against this "
        f"JSON Schema:\n{schema}"
    )


def safe_schema_name(name: str) -> str:
    """``name`` as a valid ``response_format`` schema name (other characters become ``_``)."""
    return (re.sub(r"[^a-zA-Z0-9_-]", "_", name) or "reply")[:_NAME_MAX]


def with_instruction(msgs: list[dict[str, str]], instruction: str) -> list[dict[str, str]]:
    """Append ``instruction`` to the (first) system message, or prepend one."""
    out = [dict(m) for m in msgs]
    for m in out:
        if m.get("role") == "system":
            m["content"] = f"{m.get('content') or ''}\n\n{instruction}".strip()
            return out
    return [{"role": "system", "content": instruction}, *out]


def strip_fences(text: str) -> str:
    """The content without a surrounding Markdown code fence (models add one without being asked)."""
    m = _FENCE.match(text.strip())
    return m.group(1) if m else text.strip()


def parse_reply(text: str, finish: str | None, schema: type[T]) -> T:
    """Parse and validate the content; raises :class:`AttemptError` for unusable replies."""
    if finish == "length":
        raise AttemptError("truncated", "reply cut off at max_completion_tokens (finish_reason=length)",
                           reply_text=text)
    if finish == "content_filter":
        raise AttemptError("empty_reply", "reply withheld by the provider (finish_reason=content_filter)")
    body = strip_fences(text)
    if not body:
        raise AttemptError("empty_reply", f"empty content (finish_reason={finish})")
    try:
        obj = json.loads(body)
    except json.JSONDecodeError as e:
        raise AttemptError("invalid_json", f"{e.msg} at char {e.pos}: {body[:120]!r}") from e
    try:
        return schema.model_validate(obj)
    except ValidationError as e:
        errs = "; ".join(f"{'.'.join(map(str, x['loc'])) or '<root>'}: {x['msg']}" for x in e.errors()[:5])
        raise AttemptError("schema_violation", f"{schema.__name__}: {errs}"[:MAX_ERROR_TEXT]) from e


__all__ = ["lean_json_schema", "parse_reply", "safe_schema_name", "schema_for", "schema_instruction", "strip_fences", "with_instruction"]
