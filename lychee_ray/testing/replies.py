"""Fake replies of the test server: successful completions (good or unusable content) and vectors.

A :class:`Reply` is a 200 chat completion; the helpers build the shapes a model's answer can take —
valid JSON (:func:`ok`), not JSON (:func:`malformed_content`), JSON of the wrong shape
(:func:`schema_violation`), cut off (:func:`truncated`), empty (:func:`empty`) or in the wrong
language (:func:`wrong_language`). :func:`completion_body` and :func:`embeddings_body` write the
OpenAI wire format; :func:`pseudo_embedding` makes deterministic vectors.
"""

from __future__ import annotations

import hashlib
import json
import time
from dataclasses import dataclass
from typing import Any
from collections.abc import Iterable

import numpy as np

_SEED_BYTES = 8  # of the text's SHA-256: the seed of its pseudo-random vector
_CJK_BASE, _CJK_STRIDE = 0x4E00, 97  # letters map onto spread-out CJK ideographs


@dataclass(frozen=True)
class Reply:
    """A 200 chat completion. ``usage=None`` = computed; ``include_usage=False`` omits it."""

    content: str | None
    finish_reason: str = "stop"
    usage: dict[str, int] | None = None
    cached_tokens: int = 0
    include_usage: bool = True
    refusal: str | None = None


def ok(content: str | dict | list = "{}", *, usage: dict[str, int] | None = None, finish_reason: str = "stop",
       cached_tokens: int = 0, include_usage: bool = True) -> Reply:
    """A successful reply; a dict/list ``content`` is JSON-encoded."""
    text = content if isinstance(content, str) else json.dumps(content)
    return Reply(text, finish_reason=finish_reason, usage=usage, cached_tokens=cached_tokens,
                 include_usage=include_usage)


def malformed_content(text: str = '{"answer": "unterminated') -> Reply:
    """A well-formed completion whose message content is not valid JSON."""
    return Reply(text)


def schema_violation(obj: Any = None) -> Reply:
    """Valid JSON content that does not match the requested schema."""
    return Reply(json.dumps({"unexpected": True} if obj is None else obj))


def truncated(content: str = '{"answer": "cut') -> Reply:
    """A reply with ``finish_reason == "length"``."""
    return Reply(content, finish_reason="length")


def empty() -> Reply:
    """A reply with empty content."""
    return Reply("")


_CYRILLIC = dict(zip("abcdefghijklmnopqrstuvwxyz", "абцдефгхийклмнопкрстувшксз", strict=False))


def foreign_script(text: str, script: str = "cjk") -> str:
    """``text`` with every ASCII letter replaced by a letter of another script (``cjk`` ideographs or
    ``cyrillic``); digits, spaces and punctuation stay. A stand-in for a model that writes in the
    wrong language: same shape, different script."""
    if script not in ("cjk", "cyrillic"):
        raise ValueError(f"unknown script {script!r}; expected cjk or cyrillic")
    out = []
    for ch in text:
        low = ch.lower()
        if "a" <= low <= "z":
            out.append(chr(_CJK_BASE + _CJK_STRIDE * (ord(low) - ord("a"))) if script == "cjk" else _CYRILLIC[low])
        else:
            out.append(ch)
    return "".join(out)


def _rewrite(obj: Any, keys: frozenset[str] | None, script: str, under: bool) -> Any:
    if isinstance(obj, dict):
        return {k: _rewrite(v, keys, script, keys is None or k in keys) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rewrite(v, keys, script, under) for v in obj]
    if isinstance(obj, str) and under:
        return foreign_script(obj, script)
    return obj


def wrong_language(content: str | dict | list, *, keys: Iterable[str] | None = None, script: str = "cjk") -> Reply:
    """A well-formed reply in the wrong language: the strings under ``keys`` (every string when
    None; a plain ``str`` content as a whole) rewritten by :func:`foreign_script`. Name only the
    free-text fields (e.g. ``keys=["text"]`` for encoder records) so the JSON still fits its schema."""
    if isinstance(content, str):
        return Reply(foreign_script(content, script))
    return Reply(json.dumps(_rewrite(content, None if keys is None else frozenset(keys), script, keys is None),
                            ensure_ascii=False))


def pseudo_embedding(text: str, dim: int) -> np.ndarray:
    """Deterministic unit vector for ``text`` (same text → same vector, any process)."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:_SEED_BYTES], "little")
    v = np.random.default_rng(seed).standard_normal(dim)
    return (v / np.linalg.norm(v)).astype(np.float32)


def completion_body(number: int, model: str, r: Reply, prompt: int, completion: int) -> dict[str, Any]:
    """The ``chat.completion`` JSON of reply ``r`` (the server's ``number``-th) with the given token counts."""
    out: dict[str, Any] = {
        "id": f"chatcmpl-test-{number}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{
            "index": 0,
            "message": {"role": "assistant", "content": r.content, "refusal": r.refusal},
            "finish_reason": r.finish_reason,
            "logprobs": None,
        }],
    }
    if r.include_usage:
        out["usage"] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": r.cached_tokens},
        }
    return out


def embeddings_body(model: str, texts: list[Any], dim: int, tokens: int) -> dict[str, Any]:
    """The ``/v1/embeddings`` JSON: one :func:`pseudo_embedding` per input, in order."""
    data = [{"object": "embedding", "index": i, "embedding": pseudo_embedding(str(t), dim).tolist()}
            for i, t in enumerate(texts)]
    return {"object": "list", "data": data, "model": model, "usage": {"prompt_tokens": tokens, "total_tokens": tokens}}


__all__ = [
    "Reply", "completion_body", "embeddings_body", "empty", "foreign_script", "malformed_content", "ok",
    "pseudo_embedding", "schema_violation", "truncated", "wrong_language",
]
