"""Passages of a long text: contiguous, token-bounded character spans cut at natural boundaries.

A turn longer than an embedder's window is searched by its passages (docs/data-format.md, "Long
turns"): each passage is at most ``max_tokens`` tokens of the offline tokenizer, so every word of the
turn is inside some passage's vector and some passage's BM25 document. :func:`split_passages` cuts a
text at the coarsest boundary that makes the pieces fit — paragraphs (a blank line), then lines,
then sentence ends, then any whitespace, and last (a minified blob, a base64 string) between tokens —
and packs consecutive pieces into as few passages as the bound allows, of about equal size (no
fragment of a few tokens left at the end: a short passage is a noisy search unit). A passage is a ``(start, end)`` span of the
text with no leading or trailing whitespace; the text between two passages is whitespace only, so
the passages together hold every word of the text (up to ``max_chars`` when it is bounded).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass

from lychee_ray.text.tokens import DEFAULT_ENCODING, get_encoding

# boundaries, coarsest first: blank line (paragraph), line break, sentence end, any whitespace
_LEVELS = (
    re.compile(r"\n[ \t\r\f\v]*\n\s*"),
    re.compile(r"\n\s*"),
    re.compile(r"(?<=[.!?;:])\s+"),
    re.compile(r"\s+"),
)
# tokens a join of two pieces may add (the separator's own token, a merge across it)
_JOIN_TOKENS = 1


@dataclass(frozen=True)
class PassageSpan:
    """One passage: ``text[start:end]`` and its token count."""

    start: int
    end: int
    tokens: int


@dataclass(frozen=True)
class PassageSplit:
    """A text's passages and how much of it they cover (``covered`` < ``length``: ``max_chars`` cut it)."""

    spans: list[PassageSpan]
    covered: int
    length: int

    @property
    def capped(self) -> bool:
        return self.covered < self.length


class _Counter:
    """Token counts of spans of one text (the tokenizer, without special-token handling)."""

    def __init__(self, text: str, encoding: str) -> None:
        self.text = text
        self.enc = get_encoding(encoding)

    def __call__(self, a: int, b: int) -> int:
        piece = self.text[a:b]
        if not piece:
            return 0
        return len(self.enc.encode(piece, disallowed_special=()))


def _strip(text: str, a: int, b: int) -> tuple[int, int]:
    """``[a, b)`` without leading and trailing whitespace."""
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def _pieces(text: str, a: int, b: int, level: int, max_tokens: int, count: _Counter) -> Iterator[PassageSpan]:
    """Spans of ``[a, b)`` of at most ``max_tokens`` tokens each, cut at the coarsest boundary
    from ``level`` on that makes them fit (whitespace-only spans are dropped)."""
    a, b = _strip(text, a, b)
    if a >= b:
        return
    # a span of at most max_tokens UTF-8 bytes has at most max_tokens tokens: no need to count it
    n = count(a, b) if len(text[a:b].encode("utf-8")) > max_tokens else -1
    if n <= max_tokens:
        yield PassageSpan(a, b, n if n >= 0 else count(a, b))
        return
    if level < len(_LEVELS):
        start = a
        cut = False
        for m in _LEVELS[level].finditer(text, a, b):
            if m.start() <= start:
                continue
            cut = True
            yield from _pieces(text, start, m.start(), level + 1, max_tokens, count)
            start = m.end()
        if cut:
            yield from _pieces(text, start, b, level + 1, max_tokens, count)
            return
        yield from _pieces(text, a, b, level + 1, max_tokens, count)
        return
    yield from _hard_cut(text, a, b, max_tokens, count)


def _hard_cut(text: str, a: int, b: int, max_tokens: int, count: _Counter) -> Iterator[PassageSpan]:
    """``[a, b)`` (no whitespace inside to cut at) in spans of ``max_tokens`` tokens, cut between tokens."""
    ids = count.enc.encode(text[a:b], disallowed_special=())
    _, offsets = count.enc.decode_with_offsets(ids)
    starts = [offsets[i] for i in range(0, len(ids), max_tokens)] + [b - a]
    for s, e in zip(starts, starts[1:], strict=False):
        if e > s:
            yield PassageSpan(a + s, a + e, count(a + s, a + e))


def split_passages(text: str, max_tokens: int, encoding: str = DEFAULT_ENCODING, max_chars: int = 0) -> PassageSplit:
    """``text`` as passages of at most ``max_tokens`` tokens (see the module docstring); only its
    first ``max_chars`` characters when ``max_chars`` > 0 (the split says so: ``capped``). A text
    that fits in one passage is one span."""
    if max_tokens < 1:
        raise ValueError("max_tokens must be at least 1")
    limit = min(len(text), max_chars) if max_chars > 0 else len(text)
    count = _Counter(text, encoding)
    pieces = list(_pieces(text, 0, limit, 0, max_tokens, count))
    left = sum(p.tokens for p in pieces) + _JOIN_TOKENS * max(0, len(pieces) - 1)
    # as many passages as the bound needs, each filled to about an equal share of what is left (so
    # the last one is not a leftover fragment); a piece that would pass the bound starts a new one
    spans: list[PassageSpan] = []
    group: list[PassageSpan] = []  # the pieces of the passage being packed
    estimate = 0
    target = 0.0
    for p in pieces:
        grown = estimate + _JOIN_TOKENS + p.tokens
        if group and grown <= max_tokens and estimate < target and grown - target <= target - estimate:
            group.append(p)
            estimate = grown
            continue
        if group:
            spans.extend(_exact(group, count, max_tokens))
            left -= estimate + _JOIN_TOKENS
        group, estimate = [p], p.tokens
        target = left / max(1, math.ceil(left / max_tokens))
    if group:
        spans.extend(_exact(group, count, max_tokens))
    return PassageSplit(spans, limit, len(text))


def _exact(group: list[PassageSpan], count: _Counter, max_tokens: int) -> list[PassageSpan]:
    """The packed pieces as one passage with its exact token count; when their joins cost more
    than estimated, packed again piece by piece with exact counts (so no passage passes ``max_tokens``)."""
    n = count(group[0].start, group[-1].end) if len(group) > 1 else group[0].tokens
    if n <= max_tokens:
        return [PassageSpan(group[0].start, group[-1].end, n)]
    out: list[PassageSpan] = []
    cur = group[0]
    for p in group[1:]:
        m = count(cur.start, p.end)
        if m <= max_tokens:
            cur = PassageSpan(cur.start, p.end, m)
        else:
            out.append(cur)
            cur = p
    out.append(cur)
    return out


__all__ = ["PassageSpan", "PassageSplit", "split_passages"]
