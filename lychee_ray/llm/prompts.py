"""Offline prompt-token counts of schema-constrained calls (planner, answer, judge, estimates).

A structured-output call is billed for its messages *and* the JSON schema it sends, so every
estimate here counts both; the rules backend reports these counts for the prompts it would send,
which keeps query costs comparable across backends.
"""

from __future__ import annotations

import json
from functools import lru_cache

from pydantic import BaseModel

from lychee_ray.llm.schema import schema_for
from lychee_ray.text.tokens import DEFAULT_ENCODING, count_message_tokens, count_tokens

_SCHEMA_CACHE = 64  # distinct (reply model, encoding) pairs: a handful of reply models exist


@lru_cache(maxsize=_SCHEMA_CACHE)
def schema_tokens(schema: type[BaseModel], encoding: str = DEFAULT_ENCODING) -> int:
    """Tokens of the JSON schema a structured-output call sends (providers bill it as prompt),
    counted as compact JSON: what the request carries (whitespace between JSON tokens is not the
    schema's content, and pretty-printing it would inflate every estimate by about a third)."""
    schema_json, _ = schema_for(schema)
    return count_tokens(json.dumps(schema_json, separators=(",", ":")), encoding)


def prompt_tokens_estimate(messages: list[dict[str, str]], schema: type[BaseModel], encoding: str = DEFAULT_ENCODING) -> int:
    """Offline prompt tokens of a schema-constrained call: messages + the JSON schema."""
    return count_message_tokens(messages, encoding) + schema_tokens(schema, encoding)


__all__ = ["prompt_tokens_estimate", "schema_tokens"]
