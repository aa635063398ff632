"""Spans that perspective rewriting must not touch: code, quotes, URLs, paths and terms.

"I" → the speaker and "you" → the other speaker is right in narrative text and wrong everywhere
else: inside ``sqlite:///my_budget.db`` (a path), "non-blocking I/O" (a term), `` `self.conn` `` (code)
or a quoted line ("My motto is 'I never give up'"), the words are the text's own. :func:`mask`
replaces each such span with a placeholder that holds no letter (so the rewriting, the date rewriting
and the sentence rules pass over it) and returns the function that puts the spans back.
"""

from __future__ import annotations

import re
from collections.abc import Callable

# Placeholders: private-use code points around the span's number (no letter, no sentence end).
_OPEN, _CLOSE = "\ue000", "\ue001"
_PLACEHOLDER = re.compile(_OPEN + r"(\d+)" + _CLOSE)
PROTECTED = re.compile(
    r"`[^`\n]+`"                                             # inline code
    r"|\b[a-z][a-z0-9+.-]*://[^\s<>\"')\]]+"                 # URLs and URIs (sqlite:///x.db)
    r"|\"[^\"\n]{2,}?\"|“[^”\n]{2,}?”"                       # double quotes
    r"|(?<![\w'])'[^'\n]{2,}?'(?![\w'])"                     # single quotes (not apostrophes)
    r"|(?<![\w/])(?:[\w.~-]*/)+[\w.~-]+/?"                   # paths and slashed terms (src/app.py, I/O)
    r"|\b[A-Za-z_]\w*(?:_\w+)+(?:\(\))?"                     # snake_case names (my_db, get_order_details)
    r"|\b[A-Za-z_]\w+(?:\.[A-Za-z_]\w+)+(?:\(\))?"              # dotted names (app.py, self.conn); not e.g.
    r"|\b[a-z]+[A-Z]\w*\b"                                   # camelCase names
    r"|\b\w+\(\)"                                            # calls: init()
)


def mask(text: str) -> tuple[str, Callable[[str], str]]:
    """``text`` with its protected spans replaced by placeholders, and the function that restores
    them in any text derived from it (placeholders the derivation dropped are simply gone)."""
    spans: list[str] = []

    def keep(m: re.Match) -> str:
        spans.append(m.group(0))
        return f"{_OPEN}{len(spans) - 1}{_CLOSE}"

    masked = PROTECTED.sub(keep, text)

    def span(i: int) -> str:
        if i >= len(spans):
            return ""
        s = spans[i]
        return s[1:-1] if s.startswith("`") else s  # inline code without its markdown quotes

    def restore(s: str) -> str:
        return _PLACEHOLDER.sub(lambda m: span(int(m.group(1))), s)

    return masked, restore


def has_placeholder(text: str) -> bool:
    """Whether ``text`` holds a masked span."""
    return _OPEN in text


__all__ = ["PROTECTED", "has_placeholder", "mask"]
